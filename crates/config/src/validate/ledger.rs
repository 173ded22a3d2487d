//! The top-level `ledger` key: the deployment's privacy-budget ledger file.
//!
//! It must be absolute. A relative path would resolve against the working directory (or,
//! resolved against the config file, against wherever a copy of the file lands), and a
//! job run from elsewhere would open another, empty ledger and spend the budget again.

use std::path::{Path, PathBuf};

use crate::error::ConfigError;

pub(super) fn validate_ledger(path: &str) -> Result<PathBuf, ConfigError> {
    let refuse = |allowed: &str| ConfigError::invalid("ledger", format!("{path:?}"), allowed);
    if path.trim().is_empty() || path.contains('\0') {
        return Err(refuse(
            "the absolute path of the privacy-budget ledger file, e.g. \
             \"/var/lib/ldpstream/ledger.json\"",
        ));
    }
    if !Path::new(path).is_absolute() {
        return Err(refuse(
            "an absolute path (e.g. \"/var/lib/ldpstream/ledger.json\"): a relative one would \
             open another ledger from another working directory, and spend the budget again",
        ));
    }
    if path.ends_with('/') {
        return Err(refuse("the path of a file, not of a directory"));
    }
    Ok(PathBuf::from(path))
}

#[cfg(test)]
mod tests {
    use crate::model::Config;
    use crate::validate::test_support::{err, GOOD};

    #[test]
    fn takes_an_absolute_ledger_path_only() {
        let ok = format!("ledger = \"/var/lib/ldpstream/ledger.json\"\n{GOOD}");
        let c = Config::from_toml_str(&ok, "t.toml").unwrap();
        assert_eq!(
            c.ledger.as_deref(),
            Some(std::path::Path::new("/var/lib/ldpstream/ledger.json"))
        );
        for bad in ["ledger.json", "./l.json", "", "/var/lib/"] {
            let e = err(&format!("ledger = \"{bad}\"\n{GOOD}"));
            assert!(e.contains(&format!("ledger = {bad:?}")), "{e}");
        }
        let e = err(&format!("ledger = \"l.json\"\n{GOOD}"));
        assert!(e.contains("an absolute path"), "{e}");
    }
}
