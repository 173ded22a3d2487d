use serde::Deserialize;

use crate::null::NullSpec;

/// The whole configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The streams to ingest and test (`[[stream]]` tables).
    #[serde(rename = "stream", default)]
    pub streams: Vec<StreamConfig>,
}

/// One stream of privatized reports, all produced by the same mechanism.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamConfig {
    /// Unique name, used in output records and metric labels.
    pub name: String,
    /// Where the reports come from.
    pub source: SourceConfig,
    /// The local randomizer the devices applied.
    pub mechanism: MechanismConfig,
    /// Column names in the report schema.
    #[serde(default)]
    pub columns: ColumnsConfig,
    /// The hypothesis tests to run on this stream (`[[stream.test]]` tables).
    #[serde(rename = "test", default)]
    pub tests: Vec<TestConfig>,
}

/// Where a stream's reports come from.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SourceConfig {
    /// Parquet files; each entry is a path or a glob pattern.
    Parquet { paths: Vec<String> },
}

/// The local randomizer, with its privacy parameter.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum MechanismConfig {
    /// Generalized randomized response over `domain` categories.
    Grr { epsilon: f64, domain: u32 },
}

impl MechanismConfig {
    pub fn kind(&self) -> &'static str {
        match self {
            MechanismConfig::Grr { .. } => "grr",
        }
    }

    pub fn domain(&self) -> u32 {
        match self {
            MechanismConfig::Grr { domain, .. } => *domain,
        }
    }
}

/// Names of the columns that carry the reports and the optional grouping keys.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnsConfig {
    /// The privatized report column.
    #[serde(default = "default_report_column")]
    pub report: String,
    /// Utf8 columns whose values split the stream into independently tested groups.
    #[serde(default)]
    pub group_by: Vec<String>,
}

impl Default for ColumnsConfig {
    fn default() -> Self {
        ColumnsConfig {
            report: default_report_column(),
            group_by: Vec::new(),
        }
    }
}

fn default_report_column() -> String {
    "report".to_string()
}

/// One hypothesis test on a stream.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestConfig {
    /// Unique within the stream; appears in output records.
    pub name: String,
    /// The family of test.
    pub kind: TestKind,
    /// The concrete test; defaults to the natural test for the stream's mechanism.
    #[serde(default)]
    pub method: Option<TestMethod>,
    /// The null distribution over the `domain` categories.
    pub null: NullSpec,
    /// Significance level, in (0, 1).
    #[serde(default = "default_alpha")]
    pub alpha: f64,
    /// Which reports a result covers.
    #[serde(default)]
    pub window: WindowConfig,
}

fn default_alpha() -> f64 {
    0.05
}

/// Families of hypothesis tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestKind {
    /// Identity / goodness of fit: H0 is p = p0.
    Gof,
}

/// Concrete tests, named as in STATISTICS.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum TestMethod {
    /// Gaboardi–Rogers' chi-square test on GenRR counts (seed 002, Alg. 3).
    LocalExpGOF,
}

impl TestMethod {
    pub fn name(&self) -> &'static str {
        match self {
            TestMethod::LocalExpGOF => "LocalExpGOF",
        }
    }
}

/// The window a test result covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum WindowConfig {
    /// Every report the source delivers, in one result.
    #[default]
    Global,
}
