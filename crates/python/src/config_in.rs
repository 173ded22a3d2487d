//! A job's config from Python: TOML text, a path (str or `os.PathLike`) to a TOML file, or
//! a dict in the TOML's shape. All three go through `Config::from_toml_str` and the
//! engine's mechanism check, as `ldpstream check` does, so errors carry the CLI's messages.

use std::path::{Path, PathBuf};

use ldpstream_config::Config;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::errors::{config_error, job_error};

/// The config's TOML text and the name errors show for it.
pub struct ConfigSource {
    pub text: String,
    pub origin: String,
}

impl ConfigSource {
    /// What `config` holds: a dict, a path (`os.PathLike`), or a str that is TOML text or
    /// a path. A str is text when it has a newline; else a path when a file of that name
    /// exists; else text when it parses as TOML. A path may hold `=` (`/data/run=1/`).
    pub fn from_py(config: &Bound<'_, PyAny>) -> PyResult<Self> {
        let py = config.py();
        if let Ok(dict) = config.cast::<PyDict>() {
            let value = dict_to_toml(dict, "")?;
            let text = toml::to_string(&value)
                .map_err(|e| config_error(format!("config dict: not expressible as TOML: {e}")))?;
            return Ok(ConfigSource {
                text,
                origin: "<config dict>".into(),
            });
        }
        if config.is_instance_of::<PyString>() {
            let s: String = config.extract()?;
            return Self::from_str(s);
        }
        let path: PathBuf = py
            .import("os")?
            .call_method1("fspath", (config,))?
            .extract()?;
        Self::read(&path)
    }

    fn from_str(s: String) -> PyResult<Self> {
        if s.trim().is_empty() {
            return Err(config_error(
                "config: an empty string is neither TOML text nor a path",
            ));
        }
        let text = |text: String| ConfigSource {
            text,
            origin: "<config string>".into(),
        };
        if s.contains('\n') {
            return Ok(text(s));
        }
        let path = Path::new(&s);
        if path.is_file() {
            return Self::read(path);
        }
        match toml::from_str::<toml::Table>(&s) {
            Ok(_) => Ok(text(s)),
            Err(parse) => {
                let file = match std::fs::metadata(path) {
                    Ok(m) if m.is_dir() => "a directory".to_string(),
                    Ok(_) => "not a regular file".to_string(),
                    Err(e) => e.to_string(),
                };
                let parse = parse.message().to_string();
                Err(config_error(format!(
                    "config: {s:?} is neither a file ({file}) nor TOML text ({parse})"
                )))
            }
        }
    }

    /// The file at `path`, read as `ldpstream check --config` reads it (same I/O message).
    fn read(path: &Path) -> PyResult<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| {
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
        ldpstream_jobs::mechanisms::check_mechanisms(&config).map_err(job_error)?;
        Ok(config)
    }
}

/// A config dict as TOML, value by value, so that what TOML can say reaches the config
/// check as written: a NaN or infinite float is refused there naming its key, as the CLI
/// refuses `epsilon = nan` (a JSON detour would turn it into null or a parse error).
/// `path` is the dotted key of `dict`, for errors.
fn dict_to_toml(dict: &Bound<'_, PyDict>, path: &str) -> PyResult<toml::Value> {
    let mut table = toml::map::Map::new();
    for (key, value) in dict.iter() {
        let key: String = key
            .extract()
            .map_err(|_| config_error(format!("config dict{}: keys must be strings", at(path))))?;
        let here = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        table.insert(key, to_toml(&value, &here)?);
    }
    Ok(toml::Value::Table(table))
}

fn to_toml(value: &Bound<'_, PyAny>, path: &str) -> PyResult<toml::Value> {
    if let Ok(dict) = value.cast::<PyDict>() {
        return dict_to_toml(dict, path);
    }
    if value.is_instance_of::<PyBool>() {
        return Ok(toml::Value::Boolean(value.extract()?));
    }
    if value.is_instance_of::<PyInt>() {
        let int: i64 = value.extract().map_err(|_| {
            config_error(format!(
                "config dict: {path} = {value}: beyond a 64-bit integer"
            ))
        })?;
        return Ok(toml::Value::Integer(int));
    }
    if value.is_instance_of::<PyFloat>() {
        return Ok(toml::Value::Float(value.extract()?));
    }
    if value.is_instance_of::<PyString>() {
        return Ok(toml::Value::String(value.extract()?));
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        let items = value
            .try_iter()?
            .enumerate()
            .map(|(i, item)| to_toml(&item?, &format!("{path}[{i}]")))
            .collect::<PyResult<Vec<_>>>()?;
        return Ok(toml::Value::Array(items));
    }
    let kind = value.get_type().name()?;
    Err(config_error(format!(
        "config dict: {path} is a {kind}, which TOML cannot hold (use a dict, list, str, int, float or bool)"
    )))
}

fn at(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!(" at {path}")
    }
}
