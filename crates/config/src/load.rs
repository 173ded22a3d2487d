//! Reading a config: parse the TOML text, then validate it, so that every `Config` a
//! caller holds has been checked (`validate/`).

use crate::error::ConfigError;
use crate::model::Config;
use crate::toml_form::ConfigFile;

impl Config {
    /// Parses TOML text and validates it. `origin` names the text in errors (usually a path).
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let file: ConfigFile = toml::from_str(text).map_err(|e| ConfigError::Parse {
            origin: origin.to_string(),
            message: e.to_string(),
        })?;
        file.validate()
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

#[cfg(test)]
mod tests {
    use crate::error::ConfigError;
    use crate::model::Config;

    #[test]
    fn parse_errors_name_the_file() {
        match Config::from_toml_str("[[stream]\n", "bad.toml") {
            Err(ConfigError::Parse { origin, .. }) => assert_eq!(origin, "bad.toml"),
            other => panic!("unexpected {other:?}"),
        }
    }
}
