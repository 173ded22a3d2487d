use serde::Deserialize;

use crate::duration::DurationMs;
use crate::null::NullSpec;

/// The whole configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The streams to ingest and test (`[[stream]]` tables).
    #[serde(rename = "stream", default)]
    pub streams: Vec<StreamConfig>,
    /// Settings of the long-running service (`ldpstream serve`); `batch` ignores them.
    #[serde(default)]
    pub serve: ServeConfig,
}

/// The `[serve]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeConfig {
    /// Address of the HTTP endpoint (`/metrics`, `/healthz`, `/readyz`, `/api/v1/results`).
    #[serde(default = "default_listen")]
    pub listen: String,
    /// How often every open window is snapshotted and a provisional result emitted.
    #[serde(default = "default_snapshot_interval")]
    pub snapshot_interval: DurationMs,
    /// Where results go; stdout when empty.
    #[serde(rename = "sink", default)]
    pub sinks: Vec<SinkConfig>,
    /// Directory of the checkpoint (panes + source positions); none when absent.
    #[serde(default)]
    pub checkpoint_dir: Option<String>,
    /// How often a checkpoint is written (and once more on shutdown).
    #[serde(default = "default_checkpoint_interval")]
    pub checkpoint_interval: DurationMs,
}

fn default_checkpoint_interval() -> DurationMs {
    DurationMs(10_000)
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            listen: default_listen(),
            snapshot_interval: default_snapshot_interval(),
            sinks: Vec::new(),
            checkpoint_dir: None,
            checkpoint_interval: default_checkpoint_interval(),
        }
    }
}

fn default_listen() -> String {
    "127.0.0.1:9898".to_string()
}

fn default_snapshot_interval() -> DurationMs {
    DurationMs(5_000)
}

/// A destination for test records.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SinkConfig {
    /// One JSON object per line, appended to `path` and flushed after every tick.
    Jsonl { path: String },
    /// One JSON object per line on standard output.
    Stdout,
    /// One JSON message per record on `topic`, keyed by stream, test, group and window
    /// (so a compacted topic keeps the newest result of each); every tick waits until the
    /// broker acknowledged its records.
    Kafka {
        brokers: String,
        topic: String,
        /// Passed to librdkafka as is; overrides ldpstream's producer defaults.
        #[serde(default)]
        options: std::collections::BTreeMap<String, String>,
        /// librdkafka option → environment variable holding its value (secrets).
        #[serde(default)]
        options_from_env: std::collections::BTreeMap<String, String>,
    },
    /// Parquet files in `dir`, one row per record: a file is written as
    /// `.results-….parquet.inprogress` and renamed to `results-….parquet` when it is
    /// `roll_interval` old and on shutdown, so readers only ever see complete files.
    Parquet {
        dir: String,
        #[serde(default = "default_roll_interval")]
        roll_interval: DurationMs,
    },
}

fn default_roll_interval() -> DurationMs {
    DurationMs(600_000)
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
    /// Curator model (`raw` streams): the total ε every private release of this stream may
    /// spend, under sequential composition over overlapping windows.
    #[serde(default)]
    pub budget_epsilon: Option<f64>,
    /// How far event time may run behind the largest event time seen before a report
    /// counts as late (watermark = max event time − allowed_lateness).
    #[serde(default)]
    pub allowed_lateness: DurationMs,
    /// `serve`: a batch is cut when it has this many rows...
    #[serde(default = "default_max_batch_rows")]
    pub max_batch_rows: usize,
    /// ...or when its first row has waited this long.
    #[serde(default = "default_max_batch_delay")]
    pub max_batch_delay: DurationMs,
}

fn default_max_batch_rows() -> usize {
    65_536
}

fn default_max_batch_delay() -> DurationMs {
    DurationMs(100)
}

/// Where a stream's reports come from.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SourceConfig {
    /// Parquet files; each entry is a path or a glob pattern. Bounded: `serve` replays them
    /// once, then emits every window as final.
    Parquet {
        paths: Vec<String>,
        /// `serve` only: replay at most this many rows per second (unthrottled when
        /// absent).
        #[serde(default)]
        rate: Option<f64>,
    },
    /// Reports generated in-process by the real client-side randomizer, with event time =
    /// wall clock. For demos and tests of `serve`; `batch` cannot read it.
    Simulator(SimulatorConfig),
    /// Kafka topics (`serve` only): production runs against Apache Kafka.
    Kafka(KafkaConfig),
}

/// A Kafka source.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaConfig {
    /// `bootstrap.servers`, e.g. `"broker1:9092,broker2:9092"`.
    pub brokers: String,
    /// One or more topics; every partition of each is consumed.
    pub topics: Vec<String>,
    /// The consumer group (`group.id`); offsets are committed to it as progress reports
    /// only; the checkpoint holds the offsets that count.
    pub group_id: String,
    /// Message encoding: `"json"` or `"binary"` (see the README).
    #[serde(default)]
    pub format: MessageFormat,
    /// Passed to librdkafka as is (e.g. `"security.protocol" = "SASL_SSL"`); overrides
    /// ldpstream's defaults.
    #[serde(default)]
    pub options: std::collections::BTreeMap<String, String>,
    /// librdkafka option → name of the environment variable holding its value, for
    /// secrets (`"sasl.password" = "KAFKA_PASSWORD"`). Values are never logged.
    #[serde(default)]
    pub options_from_env: std::collections::BTreeMap<String, String>,
    /// Treat an end-marker message on every partition as the end of input: the stream
    /// becomes bounded (for tests and replays).
    #[serde(default)]
    pub end_marker: bool,
    /// Messages that do not decode are copied here (payload as is, with headers naming the
    /// reason and the source topic/partition/offset), besides being counted.
    #[serde(default)]
    pub dead_letter_topic: Option<String>,
}

/// How Kafka messages encode reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageFormat {
    #[default]
    Json,
    Binary,
}

/// The built-in report simulator.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimulatorConfig {
    /// Reports per second.
    pub rate: f64,
    /// Distribution of the true categories: `"uniform"` or d probabilities.
    #[serde(default = "uniform")]
    pub p: NullSpec,
    /// After this much run time the true distribution becomes `switch_p`.
    #[serde(default)]
    pub switch_at: Option<DurationMs>,
    /// The distribution after `switch_at`.
    #[serde(default)]
    pub switch_p: Option<NullSpec>,
    /// Seed of the simulation RNG.
    #[serde(default)]
    pub seed: u64,
    /// Values of a Utf8 `group` column, assigned round-robin; no group column when empty.
    #[serde(default)]
    pub groups: Vec<String>,
}

fn uniform() -> NullSpec {
    NullSpec::Uniform
}

/// The local randomizer, with its privacy parameter.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum MechanismConfig {
    /// Generalized randomized response over `domain` categories.
    Grr { epsilon: f64, domain: u32 },
    /// Unary encoding with each bit flipped independently (ε/2 per bit).
    Bitflip { epsilon: f64, domain: u32 },
    /// One-hot plus N(0, 1/ρ) noise per coordinate (ρ-zCDP). `max_abs` bounds every
    /// coordinate of a report (default: far beyond any honest draw, see README).
    Gauss {
        rho: f64,
        domain: u32,
        #[serde(default)]
        max_abs: Option<f64>,
    },
    /// One-hot plus Lap(2/ε) noise per coordinate (ε-LDP); `max_abs` as for `Gauss`.
    Laplace {
        epsilon: f64,
        domain: u32,
        #[serde(default)]
        max_abs: Option<f64>,
    },
    /// Hadamard response (Bassily et al. 2017): randomized response on H[row, x].
    Hadamard { epsilon: f64, domain: u32 },
    /// Seeded random ±1 mappings, one per cohort (Sheffet §4).
    Cohort {
        epsilon: f64,
        domain: u32,
        cohorts: u32,
        #[serde(default)]
        seed: u64,
    },
    /// Any column-stochastic channel: `matrix[s][x] = P(signal s | type x)`.
    Matrix { matrix: Vec<Vec<f64>> },
    /// No local randomizer: a trusted curator sees the true category.
    Raw { domain: u32 },
}

impl MechanismConfig {
    pub fn kind(&self) -> &'static str {
        match self {
            MechanismConfig::Grr { .. } => "grr",
            MechanismConfig::Bitflip { .. } => "bitflip",
            MechanismConfig::Gauss { .. } => "gauss",
            MechanismConfig::Laplace { .. } => "laplace",
            MechanismConfig::Hadamard { .. } => "hadamard",
            MechanismConfig::Cohort { .. } => "cohort",
            MechanismConfig::Matrix { .. } => "matrix",
            MechanismConfig::Raw { .. } => "raw",
        }
    }

    /// The number of true categories d.
    pub fn domain(&self) -> u32 {
        match self {
            MechanismConfig::Grr { domain, .. }
            | MechanismConfig::Bitflip { domain, .. }
            | MechanismConfig::Gauss { domain, .. }
            | MechanismConfig::Laplace { domain, .. }
            | MechanismConfig::Hadamard { domain, .. }
            | MechanismConfig::Cohort { domain, .. }
            | MechanismConfig::Raw { domain } => *domain,
            MechanismConfig::Matrix { matrix } => matrix.first().map_or(0, |row| row.len() as u32),
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
    /// The public row index of a Hadamard report.
    #[serde(default = "default_row_column")]
    pub row: String,
    /// The cohort index of a cohort report.
    #[serde(default = "default_cohort_column")]
    pub cohort: String,
    /// Utf8 columns whose values split the stream into independently tested groups.
    #[serde(default)]
    pub group_by: Vec<String>,
    /// Event time, `Timestamp(ms, UTC)`; without it a stream is one global window.
    #[serde(default = "default_ts_column")]
    pub ts: String,
}

impl Default for ColumnsConfig {
    fn default() -> Self {
        ColumnsConfig {
            report: default_report_column(),
            row: default_row_column(),
            cohort: default_cohort_column(),
            group_by: Vec::new(),
            ts: default_ts_column(),
        }
    }
}

fn default_report_column() -> String {
    "report".to_string()
}

fn default_ts_column() -> String {
    "ts".to_string()
}

fn default_row_column() -> String {
    "row".to_string()
}

fn default_cohort_column() -> String {
    "cohort".to_string()
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
    /// The null distribution over the `domain` categories (gof tests only).
    #[serde(default)]
    pub null: Option<NullSpec>,
    /// Independence tests: the r×c table, flattened row-major (`domain = rows·cols`).
    #[serde(default)]
    pub rows: Option<u32>,
    #[serde(default)]
    pub cols: Option<u32>,
    /// Two-sample tests: the Utf8 column that labels the samples, and its two values.
    #[serde(default)]
    pub by: Option<String>,
    #[serde(default)]
    pub a: Option<String>,
    #[serde(default)]
    pub b: Option<String>,
    /// Significance level, in (0, 1).
    #[serde(default = "default_alpha")]
    pub alpha: f64,
    /// Which reports a result covers.
    #[serde(default)]
    pub window: WindowConfig,
    /// Asymptotic p-value only, or a Monte Carlo p-value beside it.
    #[serde(default)]
    pub calibration: Calibration,
    /// Simulated null sketches for Monte Carlo calibration (and for LocalNoiseGOF on
    /// laplace, whose critical value is always simulated). Must exceed 1/alpha.
    #[serde(default = "default_mc_samples")]
    pub mc_samples: u32,
    /// Seed of the Monte Carlo null simulation, so results are reproducible.
    #[serde(default)]
    pub seed: u64,
    /// The distance parameter of SheffetTV: accept iff d_TV(estimate, p0) <= distance/2.
    #[serde(default)]
    pub distance: Option<f64>,
    /// Curator tests: the ε each release spends from the stream's budget.
    #[serde(default)]
    pub epsilon: Option<f64>,
    /// PrivateCollisions: the share of `epsilon` spent on the N_max check (the rest on the
    /// collision count).
    #[serde(default = "default_epsilon_split")]
    pub epsilon_split: f64,
    /// SubsampleAndAggregate: the answer-flip probability δ in (0, ½].
    #[serde(default = "default_delta")]
    pub delta: f64,
    /// SubsampleAndAggregate: reports per block (blocks are consecutive in stream order).
    #[serde(default)]
    pub block_size: Option<u64>,
    /// SubsampleAndAggregate: the non-private tester run on the chosen block.
    #[serde(default)]
    pub inner: InnerTester,
    /// Anytime-valid mode: the test maintains an e-process, records carry `e_value` and
    /// `anytime_p_value`, and `reject` is `e_value >= 1/alpha`, valid however many times
    /// the window is looked at.
    #[serde(default)]
    pub sequential: bool,
}

fn default_epsilon_split() -> f64 {
    0.5
}

fn default_delta() -> f64 {
    0.1
}

/// The non-private testers SubsampleAndAggregate can wrap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InnerTester {
    /// Pearson's χ² GOF at level alpha.
    #[default]
    Pearson,
    /// The collision statistic with a Monte Carlo threshold under uniform.
    Collisions,
}

fn default_mc_samples() -> u32 {
    999
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
    /// Independence of the row and column variables of an r×c table.
    Independence,
    /// Two samples (labelled by a column) come from the same distribution.
    TwoSample,
    /// Curator model: a differentially private test of H0: p = uniform.
    Uniformity,
    /// Curator model: a differentially private test of H0: p = q (Goldreich's reduction to
    /// uniformity on [6d]).
    Identity,
}

/// Concrete tests, named as in STATISTICS.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum TestMethod {
    /// Gaboardi–Rogers' chi-square test on GenRR counts (seed 002, Alg. 3).
    LocalExpGOF,
    /// Gaboardi–Rogers' projected chi-square test on bit-flip counts (seed 002, eq. 7).
    LocalBitFlipGOF,
    /// Gaboardi–Rogers' projected test on noisy one-hot sums (seed 002, Alg. 1).
    LocalNoiseGOF,
    /// Sheffet's chi-square statistic P(θ) for the non-symmetric mechanism (seed 000 §4.2).
    SheffetChi2,
    /// Sheffet's total-variation accept/reject rule (seed 000, Thm 11).
    SheffetTV,
    /// Pearson's chi-square on the signal counts of a channel, against `G p0`
    /// (Sheffet Thm 3 / Cor. 5, the test LocalExpGOF is a special case of).
    ChannelGOF,
    /// Pearson's classical chi-square on raw counts (curator model; not private by itself).
    PearsonGOF,
    /// Gaboardi–Rogers' independence test on GenRR counts (seed 002, eqs. 11–12).
    LocalExpIND,
    /// Gaboardi–Rogers' minimised projected statistic on bit-flip counts (eqs. 13–15).
    LocalBitFlipIND,
    /// Gaboardi–Rogers' minimised statistic on Gaussian-noise sums (eq. 10, Alg. 6).
    LocalNoiseIND,
    /// Sheffet's marginal-product TV rule (seed 000, Thm 12).
    SheffetTVIndependence,
    /// Sheffet's Q statistic, calibrated by a Monte Carlo null (its law is unknown).
    SheffetQ,
    /// Pearson's χ² on the 2×d table of privatized counts of two samples (seed 003).
    GenRRTwoSample,
    /// The projected two-sample statistic on bit-flip counts with a pooled estimate.
    BitFlipTwoSample,
    /// Curator model: unique-elements count plus Laplace noise (seed 004).
    PrivateUniqueElements,
    /// Curator model: noisy N_max check, then a clipped noisy collision count (seed 004).
    PrivateCollisions,
    /// Curator model: any non-private tester on one random block, answer flipped w.p. δ.
    SubsampleAndAggregate,
}

impl TestMethod {
    pub fn name(&self) -> &'static str {
        match self {
            TestMethod::LocalExpGOF => "LocalExpGOF",
            TestMethod::LocalBitFlipGOF => "LocalBitFlipGOF",
            TestMethod::LocalNoiseGOF => "LocalNoiseGOF",
            TestMethod::SheffetChi2 => "SheffetChi2",
            TestMethod::SheffetTV => "SheffetTV",
            TestMethod::ChannelGOF => "ChannelGOF",
            TestMethod::PearsonGOF => "PearsonGOF",
            TestMethod::LocalExpIND => "LocalExpIND",
            TestMethod::LocalBitFlipIND => "LocalBitFlipIND",
            TestMethod::LocalNoiseIND => "LocalNoiseIND",
            TestMethod::SheffetTVIndependence => "SheffetTVIndependence",
            TestMethod::SheffetQ => "SheffetQ",
            TestMethod::GenRRTwoSample => "GenRRTwoSample",
            TestMethod::BitFlipTwoSample => "BitFlipTwoSample",
            TestMethod::PrivateUniqueElements => "PrivateUniqueElements",
            TestMethod::PrivateCollisions => "PrivateCollisions",
            TestMethod::SubsampleAndAggregate => "SubsampleAndAggregate",
        }
    }

    /// The methods that apply to a test kind on a mechanism; the first is the default.
    pub fn applicable(kind: TestKind, mechanism: &MechanismConfig) -> &'static [TestMethod] {
        use TestMethod::*;
        match (kind, mechanism) {
            (TestKind::Gof, MechanismConfig::Grr { .. }) => &[LocalExpGOF, ChannelGOF],
            (TestKind::Gof, MechanismConfig::Bitflip { .. }) => &[LocalBitFlipGOF],
            (TestKind::Gof, MechanismConfig::Gauss { .. } | MechanismConfig::Laplace { .. }) => {
                &[LocalNoiseGOF]
            }
            (TestKind::Gof, MechanismConfig::Hadamard { .. } | MechanismConfig::Cohort { .. }) => {
                &[SheffetChi2, SheffetTV]
            }
            (TestKind::Gof, MechanismConfig::Matrix { .. }) => &[ChannelGOF],
            (TestKind::Gof, MechanismConfig::Raw { .. }) => &[PearsonGOF],
            (TestKind::Independence, MechanismConfig::Grr { .. }) => &[LocalExpIND],
            (TestKind::Independence, MechanismConfig::Bitflip { .. }) => &[LocalBitFlipIND],
            (TestKind::Independence, MechanismConfig::Gauss { .. }) => &[LocalNoiseIND],
            (
                TestKind::Independence,
                MechanismConfig::Hadamard { .. } | MechanismConfig::Cohort { .. },
            ) => &[SheffetTVIndependence, SheffetQ],
            (
                TestKind::TwoSample,
                MechanismConfig::Grr { .. }
                | MechanismConfig::Matrix { .. }
                | MechanismConfig::Raw { .. },
            ) => &[GenRRTwoSample],
            (TestKind::TwoSample, MechanismConfig::Bitflip { .. }) => &[BitFlipTwoSample],
            (TestKind::Uniformity | TestKind::Identity, MechanismConfig::Raw { .. }) => &[
                PrivateCollisions,
                PrivateUniqueElements,
                SubsampleAndAggregate,
            ],
            _ => &[],
        }
    }
}

/// How a test's p-value is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Calibration {
    /// The test's asymptotic null law (χ² for most tests).
    #[default]
    Asymptotic,
    /// Also simulate `mc_samples` null sketches from the mechanism's law and report the
    /// Monte Carlo p-value `(1 + #{T_b >= T})/(m + 1)` beside the asymptotic one.
    MonteCarlo,
}

/// The window a test result covers. Windows are aligned to the Unix epoch (UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum WindowConfig {
    /// Every report the source delivers, in one result (null window bounds).
    #[default]
    Global,
    /// Disjoint windows `[k·size, (k+1)·size)`.
    Tumbling { size: DurationMs },
    /// Windows `[j·slide, j·slide + size)`; size must be a multiple of slide.
    Sliding { size: DurationMs, slide: DurationMs },
    /// Everything since the first report, with bounds: the first pane's start to the
    /// latest pane's end.
    Cumulative,
}
