//! Every stream's mechanism, built once when a config is loaded. The config crate checks
//! each parameter alone; some combinations only the engine can judge (a cohort family
//! whose seed gives a singular Gram matrix). Those are the config's fault, so they are
//! reported as config errors naming the key (exit 2), before `check` calls a config valid.

use ldpstream_config::{Config, ConfigError};
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::EngineError;

use crate::error::Error;

/// Refuses a config one of whose mechanisms the engine cannot construct.
pub fn check_mechanisms(config: &Config) -> Result<(), Error> {
    for (i, stream) in config.streams.iter().enumerate() {
        match Mechanism::from_config(&stream.mechanism) {
            Ok(_) => {}
            Err(EngineError::InvalidParameter {
                name,
                value,
                allowed,
            }) => {
                return Err(ConfigError::invalid(
                    format!("stream[{i}] ({:?}).mechanism.{name}", stream.name),
                    value,
                    allowed,
                )
                .into())
            }
            Err(other) => return Err(other.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cohort family whose Gram matrix is singular is the config's fault: a config error
    /// naming the key, not an engine fault (which exits 1 after `check` said "valid").
    #[test]
    fn a_rank_deficient_cohort_family_is_a_config_error() {
        let cohort = |seed: u64| {
            format!(
                "[[stream]]\nname = \"c\"\nsource = {{ kind = \"parquet\", paths = [\"x\"] }}\n\
                 mechanism = {{ kind = \"cohort\", epsilon = 1.0, domain = 4, cohorts = 4, \
                 seed = {seed} }}\n[[stream.test]]\nname = \"t\"\nkind = \"gof\"\nnull = \"uniform\"\n"
            )
        };
        let singular = (0..200u64)
            .find(|&seed| {
                let c = Config::from_toml_str(&cohort(seed), "t").unwrap();
                Mechanism::from_config(&c.streams[0].mechanism).is_err()
            })
            .expect("some seed in 0..200 gives a singular 4 x 4 family");
        let c = Config::from_toml_str(&cohort(singular), "t").unwrap();
        let e = check_mechanisms(&c).unwrap_err();
        assert!(matches!(e, Error::Config(_)), "{e:?}");
        assert_eq!(e.fault(), crate::Fault::User);
        let text = e.to_string();
        assert!(
            text.contains("stream[0] (\"c\").mechanism.seed") && text.contains("full rank"),
            "{text}"
        );
    }
}
