use serde::Deserialize;

use crate::duration::DurationMs;
use crate::hypothesis_config::TestConfig;
use crate::hypothesis_spec::{TestKind, TestMethod};
use crate::null::NullSpec;

/// The whole configuration, validated: every `Config` comes from
/// [`Config::from_toml_str`] or [`Config::from_path`], which parse the file
/// ([`crate::toml_form::ConfigFile`]) and check it.
#[derive(Debug, Clone)]
pub struct Config {
    /// The streams to ingest and test (`[[stream]]` tables).
    pub streams: Vec<StreamConfig>,
    /// Settings of the long-running service (`ldpstream serve`); `batch` ignores them.
    pub serve: ServeConfig,
    /// The most state all streams together may hold (sketches × groups × panes, plus
    /// snapshot and Monte Carlo buffers), e.g. `"8 GiB"`. `batch` and `serve` refuse a
    /// config whose estimate (`ldpstream check`) exceeds it. Default: half the machine's
    /// memory.
    pub max_state_memory: Option<bytesize::ByteSize>,
    /// The deployment's privacy-budget ledger file (top-level `ledger`), an absolute path
    /// (validated): `batch`, `merge` and `serve` of every config over the same data must
    /// spend from one file, wherever they run from. Required, or `--ledger`, when a stream
    /// has `budget_epsilon` (see `ldpstream::ledger_store`).
    pub ledger: Option<std::path::PathBuf>,
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
    /// Directory of the checkpoint (panes, source positions; never the privacy ledger,
    /// which is the top-level `ledger`). When absent, a
    /// config that reads Kafka or Parquet checkpoints beside its file (see
    /// [`crate::StateLocation`]).
    #[serde(default)]
    pub checkpoint_dir: Option<String>,
    /// `false` keeps the state only in memory even without `checkpoint_dir`: a restart
    /// starts from nothing.
    #[serde(default = "default_durable_state")]
    pub durable_state: bool,
    /// How often a checkpoint is written (and once more on shutdown).
    #[serde(default = "default_checkpoint_interval")]
    pub checkpoint_interval: DurationMs,
    /// Environment variable holding the bearer token every HTTP route but `/healthz` and
    /// `/readyz` then requires.
    #[serde(default)]
    pub auth_token_env: Option<String>,
    /// Serve HTTP on a non-loopback address without a token (logged as a warning).
    #[serde(default)]
    pub allow_unauthenticated: bool,
    /// Serve HTTPS instead of HTTP, with this certificate and key.
    #[serde(default)]
    pub tls: Option<HttpTlsConfig>,
}

/// `serve.tls`: PEM files of the endpoint's certificate (chain) and private key.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpTlsConfig {
    /// The certificate, followed by any intermediates, in PEM.
    pub cert: String,
    /// The private key for `cert`, in PEM (unencrypted).
    pub key: String,
}

fn default_durable_state() -> bool {
    true
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
            durable_state: default_durable_state(),
            checkpoint_interval: default_checkpoint_interval(),
            auth_token_env: None,
            allow_unauthenticated: false,
            tls: None,
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

/// One stream of privatized reports, all produced by the same mechanism (a validated
/// `[[stream]]` table; see [`crate::toml_form::StreamTable`] for the keys' defaults).
#[derive(Debug, Clone)]
pub struct StreamConfig {
    /// Unique name, used in output records and metric labels.
    pub name: String,
    /// Where the reports come from.
    pub source: SourceConfig,
    /// The local randomizer the devices applied.
    pub mechanism: MechanismConfig,
    /// Column names in the report schema.
    pub columns: ColumnsConfig,
    /// The hypothesis tests to run on this stream (`[[stream.test]]` tables).
    pub tests: Vec<TestConfig>,
    /// Curator model (`raw` streams): the total ε every private release of this stream may
    /// spend, under sequential composition over overlapping windows.
    pub budget_epsilon: Option<f64>,
    /// How far event time may run behind the largest event time seen before a report
    /// counts as late (watermark = max event time − allowed_lateness).
    pub allowed_lateness: DurationMs,
    /// `serve`: a batch is cut when it has this many rows...
    pub max_batch_rows: usize,
    /// ...or when its first row has waited this long.
    pub max_batch_delay: DurationMs,
    /// The most distinct groups (tuples of `group_by` and two-sample label values) the
    /// stream keeps apart. Reports of further groups are folded into one group whose every
    /// column is `"__other__"`, so a high-cardinality column cannot exhaust memory.
    pub max_groups: usize,
    /// The longest group value (UTF-8 bytes) kept: with `max_groups`, it bounds what a
    /// producer's group strings can make the pane store and the metrics hold.
    pub max_group_value_bytes: usize,
}

impl StreamConfig {
    /// Whether any test is a curator-model (differentially private) one: such a stream
    /// needs a budget, and no exact count of its raw reports may be released.
    pub fn has_private_tests(&self) -> bool {
        self.tests.iter().any(|t| t.spec.curator().is_some())
    }
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
    /// Where a report's event time comes from (see [`EventTime`]).
    #[serde(default)]
    pub event_time: EventTime,
    /// Several `serve` instances share the stream, with its state in Kafka
    /// (docs/design/scale-out.md). Without it, one instance reads the whole group.
    #[serde(default)]
    pub scale_out: Option<ScaleOutConfig>,
}

/// Scale-out with the state in Kafka: instances in `group_id` split the input partitions
/// and publish their partial sketches transactionally to `<group_id>-changelog` (one
/// partition per input partition) and `<group_id>-partials` (one partition); the single
/// owner of the latter merges them and writes each window's final record exactly once to
/// `results_topic`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleOutConfig {
    /// Where the final records go, in the same transaction that marks them emitted.
    pub results_topic: String,
    /// How often each owned input partition commits its folded reports, its partials and
    /// its offsets in one transaction. Reports since the last commit are re-read by
    /// whichever instance owns the partition after a failure.
    #[serde(default = "default_commit_interval")]
    pub commit_interval: DurationMs,
}

fn default_commit_interval() -> DurationMs {
    DurationMs(1_000)
}

/// Where a Kafka report's event time comes from. Flink and Arroyo take the record's
/// Kafka timestamp by default; ldpstream prefers the producer's own `ts` field when the
/// payload has one, since it is the device's time rather than the producer client's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventTime {
    /// The payload's `ts` when present, else the Kafka record timestamp (CreateTime or
    /// LogAppendTime, whichever the topic keeps).
    #[default]
    Auto,
    /// The payload's `ts` only; a message without one has no event time.
    Payload,
    /// The Kafka record timestamp only; a payload `ts` is ignored.
    Kafka,
    /// No event time: every report belongs to the global and cumulative windows only.
    None,
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
    /// Optimized unary encoding (Wang et al. 2017): a true 1 is reported as 1 with
    /// probability 1/2, a true 0 with 1/(e^ε+1). Same report format as `Bitflip`.
    Oue { epsilon: f64, domain: u32 },
    /// k-subset selection (Wang et al. 2016; Ye & Barg 2018): a report is k distinct
    /// categories; `k` defaults to ⌈d/(e^ε+1)⌉.
    Subset {
        epsilon: f64,
        domain: u32,
        #[serde(default)]
        k: Option<u32>,
    },
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
    /// Optimized local hashing (Wang et al. 2017) with a fixed public pool of `pool_size`
    /// hash seeds drawn from `pool_seed`: a report is (seed index, y ∈ [g]), y the user's
    /// hashed bucket kept with probability e^ε/(e^ε+g−1), else another bucket uniformly.
    /// `g` defaults to round(e^ε)+1 ([`olh_default_g`]), `pool_size` to 1024.
    Olh {
        epsilon: f64,
        domain: u32,
        #[serde(default)]
        g: Option<u32>,
        #[serde(default)]
        pool_size: Option<u32>,
        #[serde(default)]
        pool_seed: u64,
    },
    /// Any column-stochastic channel: `matrix[s][x] = P(signal s | type x)`.
    Matrix { matrix: Vec<Vec<f64>> },
    /// No local randomizer: a trusted curator sees the true category.
    Raw { domain: u32 },
    /// L-GRR (longitudinal GenRR, Arcolezi et al. 2022): a device memoizes one GenRR
    /// response at `epsilon_perm` per value it has held and reports a second GenRR of it
    /// once per `period`, chosen so that one report is exactly GenRR at `epsilon_1`
    /// (docs/STATISTICS.md §1.9). Reports as `grr`'s.
    Lgrr {
        epsilon_perm: f64,
        epsilon_1: f64,
        domain: u32,
        #[serde(default = "default_period")]
        period: DurationMs,
    },
    /// L-OSUE: OUE at `epsilon_perm` memoized, every bit flipped per report so that one
    /// report is exactly OUE at `epsilon_1`. Reports as `oue`'s.
    Losue {
        epsilon_perm: f64,
        epsilon_1: f64,
        domain: u32,
        #[serde(default = "default_period")]
        period: DurationMs,
    },
    /// L-SUE (RAPPOR's construction): symmetric bit flipping at `epsilon_perm` memoized,
    /// every bit flipped per report so that one report is exactly `bitflip` at
    /// `epsilon_1`. Reports as `bitflip`'s.
    Lsue {
        epsilon_perm: f64,
        epsilon_1: f64,
        domain: u32,
        #[serde(default = "default_period")]
        period: DurationMs,
    },
}

/// The default `period` of the longitudinal kinds: one report per metric per day.
pub const DEFAULT_PERIOD: DurationMs = DurationMs(86_400_000);

fn default_period() -> DurationMs {
    DEFAULT_PERIOD
}

impl MechanismConfig {
    /// Every mechanism kind, as the config's `kind` names it: the one list the Python
    /// package's Spark and Ray runners and their tests are driven by, so that a new kind
    /// cannot be left out of them. A unit test ties it to the variants serde knows.
    pub const KINDS: &'static [&'static str] = &[
        "grr", "bitflip", "oue", "subset", "gauss", "laplace", "hadamard", "cohort", "olh",
        "matrix", "raw", "lgrr", "losue", "lsue",
    ];

    pub fn kind(&self) -> &'static str {
        match self {
            MechanismConfig::Grr { .. } => "grr",
            MechanismConfig::Bitflip { .. } => "bitflip",
            MechanismConfig::Oue { .. } => "oue",
            MechanismConfig::Subset { .. } => "subset",
            MechanismConfig::Gauss { .. } => "gauss",
            MechanismConfig::Laplace { .. } => "laplace",
            MechanismConfig::Hadamard { .. } => "hadamard",
            MechanismConfig::Cohort { .. } => "cohort",
            MechanismConfig::Olh { .. } => "olh",
            MechanismConfig::Matrix { .. } => "matrix",
            MechanismConfig::Raw { .. } => "raw",
            MechanismConfig::Lgrr { .. } => "lgrr",
            MechanismConfig::Losue { .. } => "losue",
            MechanismConfig::Lsue { .. } => "lsue",
        }
    }

    /// The number of true categories d.
    pub fn domain(&self) -> u32 {
        match self {
            MechanismConfig::Grr { domain, .. }
            | MechanismConfig::Bitflip { domain, .. }
            | MechanismConfig::Oue { domain, .. }
            | MechanismConfig::Subset { domain, .. }
            | MechanismConfig::Gauss { domain, .. }
            | MechanismConfig::Laplace { domain, .. }
            | MechanismConfig::Hadamard { domain, .. }
            | MechanismConfig::Cohort { domain, .. }
            | MechanismConfig::Olh { domain, .. }
            | MechanismConfig::Raw { domain }
            | MechanismConfig::Lgrr { domain, .. }
            | MechanismConfig::Losue { domain, .. }
            | MechanismConfig::Lsue { domain, .. } => *domain,
            MechanismConfig::Matrix { matrix } => matrix.first().map_or(0, |row| row.len() as u32),
        }
    }

    /// OLH's (g, pool size) with the defaults filled in; None for other kinds.
    pub fn olh_shape(&self) -> Option<(u32, u32)> {
        match self {
            MechanismConfig::Olh {
                epsilon,
                g,
                pool_size,
                ..
            } => Some((
                g.unwrap_or_else(|| olh_default_g(*epsilon)),
                pool_size.unwrap_or(OLH_DEFAULT_POOL_SIZE),
            )),
            _ => None,
        }
    }
}

/// OLH's default pool size S.
pub const OLH_DEFAULT_POOL_SIZE: u32 = 1024;
/// OLH's largest bucket count g and pool size S.
pub const OLH_MAX_G: u32 = 1 << 16;
pub const OLH_MAX_POOL_SIZE: u32 = 1 << 16;

/// OLH's default g = round(e^ε) + 1 (Wang et al. 2017 §4.4: the g minimizing the
/// variance), capped at [`OLH_MAX_G`] (from ε ≈ 11.09 on). Every client computes it this
/// way; e^ε is never within rounding error of a half-integer in this range that matters.
pub fn olh_default_g(epsilon: f64) -> u32 {
    let g = epsilon.exp().round() + 1.0;
    if g.is_finite() && g < f64::from(OLH_MAX_G) {
        (g as u32).max(2)
    } else {
        OLH_MAX_G
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
    /// The hash-seed index of an OLH report.
    #[serde(default = "default_seed_column")]
    pub seed: String,
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
            seed: default_seed_column(),
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

fn default_seed_column() -> String {
    "seed".to_string()
}

// Which tests a mechanism offers is a fact about mechanisms, so it lives beside them.
impl TestMethod {
    /// The methods that apply to a test kind on a mechanism; the first is the default.
    pub fn applicable(kind: TestKind, mechanism: &MechanismConfig) -> &'static [TestMethod] {
        use TestMethod::*;
        // A longitudinal kind's reports follow its composed channel, whose tests apply
        // unchanged (docs/STATISTICS.md §1.9).
        match (kind, &*mechanism.server_channel()) {
            (TestKind::Gof, MechanismConfig::Grr { .. }) => &[LocalExpGOF, ChannelGOF],
            (TestKind::Gof, MechanismConfig::Bitflip { .. } | MechanismConfig::Oue { .. }) => {
                &[LocalBitFlipGOF]
            }
            (TestKind::Gof, MechanismConfig::Gauss { .. } | MechanismConfig::Laplace { .. }) => {
                &[LocalNoiseGOF]
            }
            (TestKind::Gof, MechanismConfig::Hadamard { .. } | MechanismConfig::Cohort { .. }) => {
                &[SheffetChi2, SheffetTV]
            }
            (TestKind::Gof, MechanismConfig::Subset { .. }) => &[SubsetGOF],
            (TestKind::Gof, MechanismConfig::Matrix { .. }) => &[ChannelGOF],
            (TestKind::Gof, MechanismConfig::Olh { .. }) => &[OlhSupportGOF],
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `KINDS` is every variant: serde's "unknown variant" error lists the variants it
    /// knows, and each listed kind parses as far as its own fields.
    #[test]
    fn kinds_lists_every_mechanism_variant() {
        let e = toml::from_str::<MechanismConfig>("kind = \"no such kind\"")
            .unwrap_err()
            .to_string();
        let (_, expected) = e
            .split_once("expected one of ")
            .unwrap_or_else(|| panic!("{e}"));
        let known: Vec<&str> = expected
            .split(',')
            .map(|k| k.trim().trim_matches('`').trim())
            .filter(|k| !k.is_empty())
            .map(|k| k.split('`').next().unwrap_or(k))
            .collect();
        let mut known_sorted = known.clone();
        known_sorted.sort_unstable();
        let mut listed = MechanismConfig::KINDS.to_vec();
        listed.sort_unstable();
        assert_eq!(known_sorted, listed, "serde knows {known:?}");
    }
}
