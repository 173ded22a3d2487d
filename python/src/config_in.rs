//! A job's config from Python: TOML text, a path (str or `os.PathLike`) to a TOML file, or
//! a dict in the TOML's shape. All three go through `Config::from_toml_str` and the
//! engine's mechanism check, as `ldpstream check` does, so errors carry the CLI's messages.

use ldpstream_config::Config;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::errors::{job_error, value_error};

/// The config's TOML text and the name errors show for it.
pub struct ConfigSource {
    pub text: String,
    pub origin: String,
}

impl ConfigSource {
    /// What `config` holds: a dict, TOML text, or a path.
    pub fn from_py(config: &Bound<'_, PyAny>) -> PyResult<Self> {
        let py = config.py();
        if config.is_instance_of::<PyDict>() {
            let json: String = py
                .import("json")?
                .call_method1("dumps", (config,))?
                .extract()?;
            let value: serde_json::Value = serde_json::from_str(&json).map_err(value_error)?;
            let text = toml::to_string(&value)
                .map_err(|e| value_error(format!("config dict: not expressible as TOML: {e}")))?;
            return Ok(ConfigSource {
                text,
                origin: "<config dict>".into(),
            });
        }
        if config.is_instance_of::<PyString>() {
            let s: String = config.extract()?;
            // TOML has a key = value or a [table]; a path has neither a newline nor '='.
            if s.contains('\n') || s.contains('=') || s.trim_start().starts_with('[') {
                return Ok(ConfigSource {
                    text: s,
                    origin: "<config string>".into(),
                });
            }
        }
        let path: std::path::PathBuf = py
            .import("os")?
            .call_method1("fspath", (config,))?
            .extract()?;
        // Read as `ldpstream check --config` reads it, for the same I/O message.
        let text = std::fs::read_to_string(&path).map_err(|source| {
            job_error(
                ldpstream_config::ConfigError::Io {
                    path: path.display().to_string(),
                    source,
                }
                .into(),
            )
        })?;
        Ok(ConfigSource {
            text,
            origin: path.display().to_string(),
        })
    }

    /// The checked config.
    pub fn load(&self) -> PyResult<Config> {
        let config =
            Config::from_toml_str(&self.text, &self.origin).map_err(|e| job_error(e.into()))?;
        ldpstream::mechanisms::check_mechanisms(&config).map_err(job_error)?;
        Ok(config)
    }
}
