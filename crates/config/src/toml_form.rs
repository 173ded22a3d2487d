//! The config file exactly as serde reads it. Validation (`validate/`) checks these tables
//! and turns them into the typed [`Config`](crate::Config): the parts whose validated form
//! differs from the written one (the tests, and so the streams and the file) have a table
//! here; the rest is read straight into the model.

use serde::Deserialize;

use crate::duration::DurationMs;
use crate::hypothesis_spec::TestTable;
use crate::model::{ColumnsConfig, MechanismConfig, ServeConfig, SourceConfig};

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConfigFile {
    #[serde(rename = "stream", default)]
    pub(crate) streams: Vec<StreamTable>,
    #[serde(default)]
    pub(crate) serve: ServeConfig,
    #[serde(default)]
    pub(crate) max_state_memory: Option<bytesize::ByteSize>,
    #[serde(default)]
    pub(crate) ledger: Option<String>,
}

/// A `[[stream]]` table as written, with its keys' defaults; validation turns it into a
/// [`StreamConfig`], whose fields these mirror.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StreamTable {
    /// Unique name, used in output records and metric labels.
    pub(crate) name: String,
    /// Where the reports come from.
    pub(crate) source: SourceConfig,
    /// The local randomizer the devices applied.
    pub(crate) mechanism: MechanismConfig,
    /// Column names in the report schema.
    #[serde(default)]
    pub(crate) columns: ColumnsConfig,
    /// The hypothesis tests to run on this stream (`[[stream.test]]` tables).
    #[serde(rename = "test", default)]
    pub(crate) tests: Vec<TestTable>,
    /// Curator model (`raw` streams): the total ε every private release of this stream may
    /// spend, under sequential composition over overlapping windows.
    #[serde(default)]
    pub(crate) budget_epsilon: Option<f64>,
    /// How far event time may run behind the largest event time seen before a report
    /// counts as late (watermark = max event time − allowed_lateness).
    #[serde(default)]
    pub(crate) allowed_lateness: DurationMs,
    /// `serve`: a batch is cut when it has this many rows...
    #[serde(default = "default_max_batch_rows")]
    pub(crate) max_batch_rows: usize,
    /// ...or when its first row has waited this long.
    #[serde(default = "default_max_batch_delay")]
    pub(crate) max_batch_delay: DurationMs,
    /// The most distinct groups (tuples of `group_by` and two-sample label values) the
    /// stream keeps apart. Reports of further groups are folded into one group whose every
    /// column is `"__other__"`, so a high-cardinality column cannot exhaust memory.
    #[serde(default = "default_max_groups")]
    pub(crate) max_groups: usize,
    /// The longest value, in UTF-8 bytes, a group column may hold. A Kafka message with a
    /// longer one is refused (`group_value_too_long`); Parquet input with one stops the job.
    #[serde(default = "default_max_group_value_bytes")]
    pub(crate) max_group_value_bytes: usize,
}

impl StreamTable {
    /// Whether any test is a curator-model (differentially private) one: such a stream
    /// needs a budget, and no exact count of its raw reports may be released.
    pub(crate) fn has_private_tests(&self) -> bool {
        self.tests.iter().any(|t| t.spec.curator().is_some())
    }
}

fn default_max_groups() -> usize {
    10_000
}

fn default_max_group_value_bytes() -> usize {
    128
}

fn default_max_batch_rows() -> usize {
    65_536
}

fn default_max_batch_delay() -> DurationMs {
    DurationMs(100)
}
