//! The ldpstream configuration: a serde model of the TOML file and its validation.
//!
//! Every key is documented in `config/README.md`. Unknown keys are rejected at parse time,
//! and [`Config::validate`] turns every semantic problem into a [`ConfigError`] that names
//! the key, the bad value and what is allowed.

mod duration;
mod error;
mod model;
mod null;
mod state_location;
mod test_spec;
mod topic_names;
mod validate;
mod window;

pub use duration::DurationMs;
pub use error::ConfigError;
pub use model::{
    ColumnsConfig, Config, EventTime, HttpTlsConfig, KafkaConfig, MechanismConfig, MessageFormat,
    ScaleOutConfig, ServeConfig, SimulatorConfig, SinkConfig, SourceConfig, StreamConfig,
};
pub use null::NullSpec;
pub use state_location::{InMemoryBecause, StateLocation};
pub use test_spec::{
    Calibration, CuratorSpec, InnerTester, KindKeyError, TestConfig, TestKind, TestMethod, TestSpec,
};
pub use topic_names::scale_out_state_topics;
pub use validate::{compact, MAX_EPSILON, MAX_RHO, MIN_EPSILON, MIN_LAPLACE_EPSILON, MIN_RHO};
pub use window::WindowConfig;

impl Config {
    /// Parses TOML text and validates it. `origin` names the text in errors (usually a path).
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            origin: origin.to_string(),
            message: e.to_string(),
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Reads, parses and validates a config file.
    pub fn from_path(path: &std::path::Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_toml_str(&text, &path.display().to_string())
    }
}
