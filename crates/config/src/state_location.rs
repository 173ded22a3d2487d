//! Where `serve` keeps its state: the rule that makes a service reading real input durable
//! without any setting.

use std::path::{Path, PathBuf};

use crate::model::{Config, SourceConfig};

/// Where `serve`'s sketches and source positions live (never the privacy ledger: see the
/// top-level `ledger`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateLocation {
    /// `serve.checkpoint_dir`, as written (relative paths are relative to the working
    /// directory, as every other path in the config).
    Configured(PathBuf),
    /// Beside the config file: `<config>.state` (`ldpstream.toml` → `ldpstream.state`).
    /// Tied to the file rather than the working directory, so that two configs run from
    /// one directory never restore each other's state.
    BesideConfig(PathBuf),
    /// Only in memory; a restart starts from nothing.
    Memory(InMemoryBecause),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InMemoryBecause {
    /// `serve.durable_state = false`.
    OptedOut,
    /// Every stream reads the simulator, whose reports a restart generates afresh: there
    /// is nothing to resume.
    OnlySimulatedInput,
    /// Every stream reads the simulator or keeps its state in Kafka (`scale_out`): there
    /// is nothing for this instance to keep, and instances sharing a config file on one
    /// machine must not contend for one directory.
    NothingLocal,
}

impl Config {
    /// Where `serve` run on the file at `config_path` keeps its state.
    pub fn state_location(&self, config_path: &Path) -> StateLocation {
        if let Some(dir) = &self.serve.checkpoint_dir {
            return StateLocation::Configured(PathBuf::from(dir));
        }
        if !self.serve.durable_state {
            return StateLocation::Memory(InMemoryBecause::OptedOut);
        }
        let real_input = self
            .streams
            .iter()
            .any(|s| !matches!(s.source, SourceConfig::Simulator(_)));
        if !real_input {
            return StateLocation::Memory(InMemoryBecause::OnlySimulatedInput);
        }
        let local = self.streams.iter().any(|s| match &s.source {
            SourceConfig::Simulator(_) => false,
            SourceConfig::Kafka(k) => k.scale_out.is_none(),
            SourceConfig::Parquet { .. } => true,
        });
        if !local {
            return StateLocation::Memory(InMemoryBecause::NothingLocal);
        }
        StateLocation::BesideConfig(config_path.with_extension("state"))
    }
}

impl StateLocation {
    pub fn dir(&self) -> Option<&Path> {
        match self {
            StateLocation::Configured(d) | StateLocation::BesideConfig(d) => Some(d),
            StateLocation::Memory(_) => None,
        }
    }
}

impl std::fmt::Display for StateLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateLocation::Configured(d) => write!(f, "{} (serve.checkpoint_dir)", d.display()),
            StateLocation::BesideConfig(d) => write!(
                f,
                "{} (the default beside the config file; serve.checkpoint_dir moves it)",
                d.display()
            ),
            StateLocation::Memory(InMemoryBecause::OptedOut) => {
                f.write_str("memory only (serve.durable_state = false)")
            }
            StateLocation::Memory(InMemoryBecause::OnlySimulatedInput) => f.write_str(
                "memory only (every stream reads the simulator, which a restart runs afresh; \
                 set serve.checkpoint_dir to keep it anyway)",
            ),
            StateLocation::Memory(InMemoryBecause::NothingLocal) => f.write_str(
                "nothing local (every stream reads the simulator or keeps its state in Kafka \
                 with scale_out)",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(serve: &str, source: &str) -> Config {
        Config::from_toml_str(
            &format!(
                "[serve]\n{serve}\n[[stream]]\nname = \"s\"\nsource = {source}\n\
                 mechanism = {{ kind = \"grr\", epsilon = 1.0, domain = 4 }}\n"
            ),
            "test",
        )
        .unwrap()
    }

    const PARQUET: &str = r#"{ kind = "parquet", paths = ["x.parquet"] }"#;
    const SIMULATOR: &str = r#"{ kind = "simulator", rate = 10.0, seed = 1 }"#;

    #[test]
    fn real_input_defaults_to_a_directory_beside_the_config() {
        let at = Path::new("/etc/ldp/prod.toml");
        assert_eq!(
            config("", PARQUET).state_location(at),
            StateLocation::BesideConfig(PathBuf::from("/etc/ldp/prod.state"))
        );
        assert_eq!(
            config("", PARQUET).state_location(Path::new("noext")),
            StateLocation::BesideConfig(PathBuf::from("noext.state"))
        );
    }

    #[test]
    fn an_explicit_directory_or_opt_out_wins_and_the_simulator_stays_in_memory() {
        let at = Path::new("c.toml");
        assert_eq!(
            config("checkpoint_dir = \"/var/lib/x\"", SIMULATOR).state_location(at),
            StateLocation::Configured(PathBuf::from("/var/lib/x"))
        );
        assert_eq!(
            config("durable_state = false", PARQUET).state_location(at),
            StateLocation::Memory(InMemoryBecause::OptedOut)
        );
        assert_eq!(
            config("", SIMULATOR).state_location(at),
            StateLocation::Memory(InMemoryBecause::OnlySimulatedInput)
        );
    }

    #[test]
    fn scale_out_streams_keep_nothing_local() {
        let at = Path::new("c.toml");
        let scale_out = r#"{ kind = "kafka", brokers = "b:9092", topics = ["in"], group_id = "g", scale_out = { results_topic = "out" } }"#;
        assert_eq!(
            config("", scale_out).state_location(at),
            StateLocation::Memory(InMemoryBecause::NothingLocal)
        );
        let single = r#"{ kind = "kafka", brokers = "b:9092", topics = ["in"], group_id = "g" }"#;
        assert_eq!(
            config("", single).state_location(at),
            StateLocation::BesideConfig(PathBuf::from("c.state"))
        );
    }

    #[test]
    fn opting_out_beside_a_directory_is_refused_naming_both() {
        let e = Config::from_toml_str(
            &format!(
                "[serve]\ndurable_state = false\ncheckpoint_dir = \"ck\"\n[[stream]]\n\
                 name = \"s\"\nsource = {PARQUET}\n\
                 mechanism = {{ kind = \"grr\", epsilon = 1.0, domain = 4 }}\n"
            ),
            "test",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("serve.durable_state") && e.contains("\"ck\""),
            "{e}"
        );
    }
}
