//! One `[[stream]]` table: its name, source, batching, columns and budget; its mechanism,
//! windows and tests are checked by their own modules.

use std::collections::HashSet;

use unicode_normalization::UnicodeNormalization;

use super::hypothesis::validate_tests;
use super::kafka::validate_kafka_source;
use super::longitudinal::validate_longitudinal_source;
use super::mechanism::validate_mechanism;
use super::null::validate_null;
use super::window::{validate_pane_count, MAX_WINDOW_MS};
use crate::error::ConfigError;
use crate::model::{SimulatorConfig, SourceConfig, StreamConfig};
use crate::number_text::compact;
use crate::toml_form::StreamTable;

/// The largest `max_groups`.
pub const MAX_GROUPS: usize = 10_000_000;

/// The largest `max_group_value_bytes`: the binary Kafka format gives a group value a
/// `u16` length.
pub const MAX_GROUP_VALUE_BYTES: usize = u16::MAX as usize;

/// The most streams one config may have: `serve` runs a source thread per stream, and
/// thousands of them exhaust the process's threads before any report is read.
pub const MAX_STREAMS: usize = 1_000;

/// Every stream, in order; a stream's name must be unique among them.
pub(super) fn validate_streams(tables: Vec<StreamTable>) -> Result<Vec<StreamConfig>, ConfigError> {
    if tables.is_empty() {
        return Err(ConfigError::invalid(
            "stream",
            "[]",
            "at least one [[stream]] table is required",
        ));
    }
    if tables.len() > MAX_STREAMS {
        return Err(ConfigError::invalid(
            "stream",
            format!("{} [[stream]] tables", tables.len()),
            format!(
                "at most {MAX_STREAMS} streams: serve runs a source thread per stream. Split \
                 the config across processes, or fold many sources into one stream with \
                 group_by"
            ),
        ));
    }
    let mut names = HashSet::new();
    let mut streams = Vec::with_capacity(tables.len());
    for (i, mut table) in tables.into_iter().enumerate() {
        // "é" and "e\u{301}" look alike everywhere a name is shown (logs, labels, record
        // keys): one canonical form makes them the same name, so a second is refused.
        table.name = table.name.nfc().collect();
        validate_name(i, &table.name, &mut names)?;
        let at = format!("stream[{i}] ({:?})", table.name);
        streams.push(validate_stream(&at, table)?);
    }
    Ok(streams)
}

fn validate_name(i: usize, name: &str, names: &mut HashSet<String>) -> Result<(), ConfigError> {
    let at = format!("stream[{i}]");
    if name.trim().is_empty() {
        return Err(ConfigError::invalid(
            format!("{at}.name"),
            format!("{name:?}"),
            "a non-empty name",
        ));
    }
    if !names.insert(name.to_string()) {
        return Err(ConfigError::invalid(
            format!("{at}.name"),
            format!("{name:?}"),
            "stream names must be unique; this one is used twice",
        ));
    }
    Ok(())
}

/// One stream, `at` naming it in errors (`stream[0] ("homepage")`).
fn validate_stream(at: &str, stream: StreamTable) -> Result<StreamConfig, ConfigError> {
    validate_mechanism(at, &stream.mechanism)?;
    validate_batching(at, &stream)?;
    validate_source(at, &stream)?;
    validate_longitudinal_source(at, &stream)?;
    validate_columns(at, &stream)?;
    validate_budget(at, &stream)?;
    validate_lateness(at, &stream)?;
    validate_pane_count(at, &stream)?;
    let tests = validate_tests(at, &stream)?;
    Ok(StreamConfig {
        name: stream.name,
        source: stream.source,
        mechanism: stream.mechanism,
        columns: stream.columns,
        tests,
        budget_epsilon: stream.budget_epsilon,
        allowed_lateness: stream.allowed_lateness,
        max_batch_rows: stream.max_batch_rows,
        max_batch_delay: stream.max_batch_delay,
        max_groups: stream.max_groups,
        max_group_value_bytes: stream.max_group_value_bytes,
    })
}

/// Event times are milliseconds in an i64: a lateness past the longest window would wrap
/// the watermark negative (`"18446744073709551615ms"` did) and make every report late.
fn validate_lateness(at: &str, stream: &StreamTable) -> Result<(), ConfigError> {
    if stream.allowed_lateness.millis() > MAX_WINDOW_MS {
        return Err(ConfigError::invalid(
            format!("{at}.allowed_lateness"),
            stream.allowed_lateness,
            "at most 3650d (ten years): event times are milliseconds in 64 bits",
        ));
    }
    Ok(())
}

fn validate_source(at: &str, stream: &StreamTable) -> Result<(), ConfigError> {
    match &stream.source {
        SourceConfig::Parquet { paths, .. } if paths.is_empty() => Err(ConfigError::invalid(
            format!("{at}.source.paths"),
            "[]",
            "at least one path or glob",
        )),
        SourceConfig::Parquet {
            rate: Some(rate), ..
        } if !(rate.is_finite() && *rate > 0.0) => Err(ConfigError::invalid(
            format!("{at}.source.rate"),
            rate,
            "rows per second, a finite number > 0",
        )),
        SourceConfig::Parquet { .. } => Ok(()),
        SourceConfig::Kafka(k) => validate_kafka_source(&format!("{at}.source"), k, stream),
        SourceConfig::Simulator(sim) => validate_simulator(
            &format!("{at}.source"),
            sim,
            stream.mechanism.domain() as usize,
            stream.max_group_value_bytes,
        ),
    }
}

/// The bounds on a stream's batches and groups, which bound its memory.
fn validate_batching(at: &str, stream: &StreamTable) -> Result<(), ConfigError> {
    if stream.max_batch_rows == 0 {
        return Err(ConfigError::invalid(
            format!("{at}.max_batch_rows"),
            0,
            "at least 1 row",
        ));
    }
    if !(1..=MAX_GROUPS).contains(&stream.max_groups) {
        return Err(ConfigError::invalid(
            format!("{at}.max_groups"),
            stream.max_groups,
            format!(
                "between 1 and {MAX_GROUPS}: every group holds a sketch in every pane, \
                 so more groups than this cannot be tested within memory"
            ),
        ));
    }
    if !(1..=MAX_GROUP_VALUE_BYTES).contains(&stream.max_group_value_bytes) {
        return Err(ConfigError::invalid(
            format!("{at}.max_group_value_bytes"),
            stream.max_group_value_bytes,
            format!(
                "between 1 and {MAX_GROUP_VALUE_BYTES} bytes (the binary message format's \
                 limit)"
            ),
        ));
    }
    if stream.max_batch_delay.millis() == 0 {
        return Err(ConfigError::invalid(
            format!("{at}.max_batch_delay"),
            stream.max_batch_delay,
            "a duration > 0, e.g. \"100ms\"",
        ));
    }
    Ok(())
}

fn validate_columns(at: &str, stream: &StreamTable) -> Result<(), ConfigError> {
    if stream.columns.report.is_empty() {
        return Err(ConfigError::invalid(
            format!("{at}.columns.report"),
            "\"\"",
            "a column name",
        ));
    }
    let mut seen_group = HashSet::new();
    for g in &stream.columns.group_by {
        if g == &stream.columns.report || !seen_group.insert(g) {
            return Err(ConfigError::invalid(
                format!("{at}.columns.group_by"),
                format!("{g:?}"),
                "distinct column names other than the report column",
            ));
        }
    }
    Ok(())
}

/// The curator model's total ε: required exactly when the stream has private tests.
fn validate_budget(at: &str, stream: &StreamTable) -> Result<(), ConfigError> {
    match stream.budget_epsilon {
        Some(b) if !(b.is_finite() && b > 0.0) => Err(ConfigError::invalid(
            format!("{at}.budget_epsilon"),
            compact(b),
            "a finite total ε > 0",
        )),
        None if stream.has_private_tests() => Err(ConfigError::invalid(
            format!("{at}.budget_epsilon"),
            "(missing)",
            "a total privacy budget: this stream has private (uniformity/identity) tests",
        )),
        _ => Ok(()),
    }
}

fn validate_simulator(
    key: &str,
    sim: &SimulatorConfig,
    d: usize,
    max_value_bytes: usize,
) -> Result<(), ConfigError> {
    if !(sim.rate.is_finite() && sim.rate > 0.0 && sim.rate <= 1e8) {
        return Err(ConfigError::invalid(
            format!("{key}.rate"),
            sim.rate,
            "reports per second, a finite number in (0, 1e8]",
        ));
    }
    validate_null(&format!("{key}.p"), &sim.p, d)?;
    match (&sim.switch_at, &sim.switch_p) {
        (Some(_), Some(p)) => validate_null(&format!("{key}.switch_p"), p, d)?,
        (None, None) => {}
        (Some(at), None) => {
            return Err(ConfigError::invalid(
                format!("{key}.switch_p"),
                format!("(missing, with switch_at = {at})"),
                "switch_at and switch_p go together",
            ))
        }
        (None, Some(_)) => {
            return Err(ConfigError::invalid(
                format!("{key}.switch_at"),
                "(missing, with switch_p set)",
                "switch_at and switch_p go together",
            ))
        }
    }
    if sim.groups.iter().any(|g| g.is_empty()) {
        return Err(ConfigError::invalid(
            format!("{key}.groups"),
            format!("{:?}", sim.groups),
            "non-empty group labels",
        ));
    }
    if let Some((i, g)) = sim
        .groups
        .iter()
        .enumerate()
        .find(|(_, g)| g.len() > max_value_bytes)
    {
        return Err(ConfigError::invalid(
            format!("{key}.groups[{i}]"),
            format!("a {}-byte label starting {:?}", g.len(), prefix(g, 24)),
            format!("at most max_group_value_bytes = {max_value_bytes} bytes"),
        ));
    }
    Ok(())
}

/// At most `bytes` bytes of `s`, cut at a character boundary, for error messages.
fn prefix(s: &str, bytes: usize) -> &str {
    let mut end = bytes.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{config, err, GOOD, GRR};
    use crate::model::Config;

    #[test]
    fn rejects_duplicate_names() {
        let twice = format!("{GOOD}\n{GOOD}");
        let e = err(&twice);
        assert!(e.contains("used twice") && e.contains("homepage"), "{e}");
        let tests_twice = GOOD.to_string()
            + "[[stream.test]]\nname = \"uniform_gof\"\nkind = \"gof\"\nnull = \"uniform\"\n";
        let e = err(&tests_twice);
        assert!(
            e.contains("test[1].name") && e.contains("used twice"),
            "{e}"
        );
    }

    /// Names are compared in NFC: a decomposed spelling of a name is the same name.
    #[test]
    fn names_that_differ_only_in_unicode_normalization_are_one_name() {
        let composed = GOOD.replace("name = \"homepage\"", "name = \"caf\u{e9}\"");
        let decomposed = GOOD.replace("name = \"homepage\"", "name = \"cafe\u{301}\"");
        let e = err(&format!("{composed}\n{decomposed}"));
        assert!(e.contains("used twice"), "{e}");
        let c = Config::from_toml_str(&decomposed, "t").unwrap();
        assert_eq!(c.streams[0].name, "caf\u{e9}");
    }

    #[test]
    fn too_many_streams_are_refused() {
        let many: String = (0..=super::MAX_STREAMS)
            .map(|i| GOOD.replace("name = \"homepage\"", &format!("name = \"s{i}\"")))
            .collect::<Vec<_>>()
            .join("\n");
        let e = err(&many);
        assert!(
            e.contains("1001 [[stream]] tables") && e.contains("at most 1000"),
            "{e}"
        );
    }

    /// Group labels are bounded like the values a producer sends.
    #[test]
    fn long_group_values_are_refused() {
        let sim = GOOD.replace(
            "source = { kind = \"parquet\", paths = [\"data/*.parquet\"] }",
            "source = { kind = \"simulator\", rate = 1000.0, groups = [\"a\", \"\u{e9}\u{e9}\"] }\nmax_group_value_bytes = 3",
        );
        let e = err(&sim);
        assert!(
            e.contains("source.groups[1]")
                && e.contains("4-byte label")
                && e.contains("max_group_value_bytes = 3"),
            "{e}"
        );
        Config::from_toml_str(&sim.replace("= 3", "= 4"), "t").unwrap();
        let e = err(&sim.replace("= 3", "= 0"));
        assert!(e.contains("max_group_value_bytes = 0"), "{e}");
        let e = err(&sim.replace("= 3", "= 65536"));
        assert!(e.contains("between 1 and 65535"), "{e}");
    }

    #[test]
    fn a_lateness_that_would_wrap_the_watermark_is_refused() {
        let late = GOOD.replace(
            "[[stream.test]]",
            "allowed_lateness = \"18446744073709551615ms\"\n[[stream.test]]",
        );
        let e = err(&late);
        assert!(e.contains("allowed_lateness") && e.contains("3650d"), "{e}");
    }

    #[test]
    fn simulator_keys_validate() {
        let sim = GOOD.replace(
            "source = { kind = \"parquet\", paths = [\"data/*.parquet\"] }",
            "source = { kind = \"simulator\", rate = 1000.0, switch_at = \"1m\", switch_p = [0.4, 0.2, 0.2, 0.2] }",
        );
        Config::from_toml_str(&sim, "t").unwrap();
        let e = err(&sim.replace("rate = 1000.0", "rate = -1.0"));
        assert!(e.contains("source.rate = -1"), "{e}");
        let e = err(&sim.replace("switch_p = [0.4, 0.2, 0.2, 0.2]", "switch_p = [0.5, 0.5]"));
        assert!(e.contains("source.switch_p"), "{e}");
        let e = err(&sim.replace(", switch_p = [0.4, 0.2, 0.2, 0.2]", ""));
        assert!(e.contains("switch_p") && e.contains("go together"), "{e}");
    }

    /// `rate` on a Parquet source is the documented `serve` replay throttle, and validated.
    #[test]
    fn parquet_rate_is_validated() {
        let with_rate = |rate: &str| {
            config(
                &format!("{{ kind = \"parquet\", paths = [\"x\"], rate = {rate} }}"),
                GRR,
                "{ kind = \"global\" }",
            )
        };
        with_rate("1000.0").unwrap();
        let e = with_rate("0.0").unwrap_err();
        assert!(
            e.contains("source.rate = 0") && e.contains("rows per second"),
            "{e}"
        );
        let e = config(
            "{ kind = \"parquet\", paths = [\"x\"], speed = 2.0 }",
            GRR,
            "{ kind = \"global\" }",
        )
        .unwrap_err();
        assert!(e.contains("speed"), "{e}");
    }
}
