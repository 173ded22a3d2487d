//! The semantic rules the parser cannot express, one concern per module. Each check
//! returns the first problem as a [`ConfigError`] naming the key, the value and what is
//! allowed; the order of the checks is the order of the errors a user meets.

mod hypothesis;
mod kafka;
mod ledger;
mod longitudinal;
mod mechanism;
mod null;
mod serve;
mod stream;
#[cfg(test)]
mod test_support;
mod window;

pub use mechanism::{
    MAX_OLH_SUPPORT_WORK, MAX_OLH_TABLE_CELLS, MAX_RHO, MIN_LAPLACE_EPSILON, MIN_RHO,
};

use crate::error::ConfigError;
use crate::model::Config;
use crate::toml_form::ConfigFile;
use crate::topic_names::validate_topic_names;

impl ConfigFile {
    /// Checks every semantic rule the parser cannot express, and returns the typed config
    /// or the first problem.
    pub(crate) fn validate(self) -> Result<Config, ConfigError> {
        let streams = stream::validate_streams(self.streams)?;
        serve::validate_serve(&self.serve)?;
        let ledger = self
            .ledger
            .as_deref()
            .map(ledger::validate_ledger)
            .transpose()?;
        let config = Config {
            streams,
            serve: self.serve,
            max_state_memory: self.max_state_memory,
            ledger,
        };
        validate_topic_names(&config)?;
        kafka::validate_scale_out_state(&config)?;
        validate_state_memory(config.max_state_memory)?;
        Ok(config)
    }
}

fn validate_state_memory(max: Option<bytesize::ByteSize>) -> Result<(), ConfigError> {
    if max.is_some_and(|m| m.as_u64() == 0) {
        return Err(ConfigError::invalid(
            "max_state_memory",
            "0 B",
            "a size > 0, e.g. \"8 GiB\"",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::test_support::{err, GOOD};
    use crate::model::Config;

    #[test]
    fn accepts_the_documented_example() {
        let c = Config::from_toml_str(GOOD, "test.toml").unwrap();
        assert_eq!(c.streams.len(), 1);
        assert_eq!(c.streams[0].columns.group_by, vec!["group".to_string()]);
        assert_eq!(c.streams[0].tests[0].alpha.get(), 0.05);
    }

    #[test]
    fn rejects_unknown_keys_naming_them() {
        let e = err(&GOOD.replace("alpha = 0.05", "alpha = 0.05\nalhpa = 0.1"));
        assert!(e.contains("alhpa"), "{e}");
        let e = err(&GOOD.replace("domain = 4", "domain = 4, epsilom = 2"));
        assert!(e.contains("epsilom"), "{e}");
    }
}
