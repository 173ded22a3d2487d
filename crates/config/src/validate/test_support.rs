//! What the validation tests of every concern share: a good config to break, and ways to
//! parse a config and get its error.

use crate::model::Config;

/// A valid config; the tests break one key of it at a time.
pub(super) const GOOD: &str = r#"
[[stream]]
name = "homepage"
source = { kind = "parquet", paths = ["data/*.parquet"] }
mechanism = { kind = "grr", epsilon = 1.0, domain = 4 }
columns = { report = "report", group_by = ["group"] }
[[stream.test]]
name = "uniform_gof"
kind = "gof"
null = "uniform"
alpha = 0.05
window = { kind = "global" }
"#;

/// The error of a config that must be rejected.
pub(super) fn err(text: &str) -> String {
    match Config::from_toml_str(text, "test.toml") {
        Ok(_) => panic!("config should have been rejected:\n{text}"),
        Err(e) => e.to_string(),
    }
}

/// One Parquet stream of `mechanism` with one uniform gof test plus `test`'s keys.
pub(super) fn gof_stream(mechanism: &str, test: &str) -> String {
    format!(
        "[[stream]]\nname = \"s\"\nsource = {{ kind = \"parquet\", paths = [\"x\"] }}\nmechanism = {mechanism}\n[[stream.test]]\nname = \"t\"\nkind = \"gof\"\nnull = \"uniform\"\n{test}\n"
    )
}

/// The error of [`gof_stream`], which must be rejected.
pub(super) fn gof_err(mechanism: &str, test: &str) -> String {
    match Config::from_toml_str(&gof_stream(mechanism, test), "t") {
        Ok(_) => panic!("should be rejected: {mechanism} {test}"),
        Err(e) => e.to_string(),
    }
}

/// One Parquet stream of `mechanism` with one test of `test`'s keys.
pub(super) fn cfg(mechanism: &str, test: &str) -> Result<Config, String> {
    Config::from_toml_str(
        &format!("[[stream]]\nname = \"s\"\nsource = {{ kind = \"parquet\", paths = [\"x\"] }}\nmechanism = {mechanism}\n[[stream.test]]\nname = \"t\"\n{test}\n"),
        "t",
    )
    .map_err(|e| e.to_string())
}

/// One stream of `source` and `mechanism` with one uniform gof test over `window`.
pub(super) fn config(source: &str, mechanism: &str, window: &str) -> Result<Config, String> {
    Config::from_toml_str(
        &format!(
            "[[stream]]\nname = \"s\"\nsource = {source}\nmechanism = {mechanism}\n\
             [[stream.test]]\nname = \"t\"\nkind = \"gof\"\nnull = \"uniform\"\nwindow = {window}\n"
        ),
        "t.toml",
    )
    .map_err(|e| e.to_string())
}

pub(super) const PARQUET: &str = "{ kind = \"parquet\", paths = [\"x\"] }";
pub(super) const GRR: &str = "{ kind = \"grr\", epsilon = 1.0, domain = 4 }";
pub(super) const GRR6: &str = "{ kind = \"grr\", epsilon = 1.0, domain = 6 }";
