use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One test result: one JSON line per (stream, test, window, group). Fields are only ever
/// added, never renamed, so downstream parsers keep working.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestRecord {
    pub stream: String,
    pub test: String,
    /// The concrete test, e.g. `"LocalExpGOF"`.
    pub method: String,
    /// The mechanism kind of the stream, e.g. `"grr"`.
    pub mechanism: String,
    /// Group column → value (null for a null key), or null when the stream is not grouped.
    pub group: Option<BTreeMap<String, Option<String>>>,
    /// RFC 3339, or null for a global window.
    pub window_start: Option<String>,
    pub window_end: Option<String>,
    /// Reports folded into the sketch the test ran on.
    pub n: u64,
    /// Null when the test could not run (see `inconclusive_reason`).
    pub statistic: Option<f64>,
    pub df: u32,
    pub p_value: Option<f64>,
    pub reject: bool,
    pub alpha: f64,
    /// Debiased frequency estimate, one entry per category.
    pub estimate: Vec<f64>,
    /// Standard error of each entry of `estimate`.
    pub std_error: Vec<f64>,
    /// Reports seen but not folded, by reason.
    pub rejected_reports: BTreeMap<String, u64>,
    /// True when the data cannot support a decision; `reject` is then false by fiat, not
    /// by evidence.
    pub inconclusive: bool,
    pub inconclusive_reason: Option<String>,
}
