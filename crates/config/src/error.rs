use thiserror::Error;

/// Everything that can be wrong with a configuration. All of these are the user's to fix,
/// so the binary maps them to exit code 2.
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid config {origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("invalid config: {key} = {value}: {allowed}")]
    Invalid {
        key: String,
        value: String,
        allowed: String,
    },
}

impl ConfigError {
    pub fn invalid(
        key: impl Into<String>,
        value: impl std::fmt::Display,
        allowed: impl Into<String>,
    ) -> Self {
        ConfigError::Invalid {
            key: key.into(),
            value: value.to_string(),
            allowed: allowed.into(),
        }
    }
}
