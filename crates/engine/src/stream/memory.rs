//! How much state a stream will hold, from its config alone, so that a config that cannot
//! fit is refused at startup instead of aborting hours later.
//!
//! Every term is an upper bound in steady state (`serve`): the pane store keeps a sketch
//! per group in each pane a bounded window or the allowed lateness can still need, plus the
//! retired panes merged into one; a snapshot merges one window at a time; a batch's delta
//! holds at most one sketch per row; a Monte Carlo null keeps one statistic per sample.
//! `batch` keeps every pane of its input until the end, so there the pane count grows with
//! the input's time span (`ldpstream check` says so).

use ldpstream_config::{
    Calibration, MechanismConfig, StreamConfig, TestMethod, TestSpec, WindowConfig,
};

use super::due::{longest_window, stream_pane_width};
use super::layout::ReportLayout;
use crate::mechanism::Mechanism;
use crate::sketch::SPARSE_CELL_BYTES;

/// One named part of a stream's estimated state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub what: &'static str,
    pub bytes: u64,
    /// How the figure was reached, for `ldpstream check`.
    pub how: String,
}

/// A stream's estimated peak state, by term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateEstimate {
    pub stream: String,
    pub terms: Vec<Term>,
}

impl StateEstimate {
    pub fn total(&self) -> u64 {
        self.terms
            .iter()
            .fold(0u64, |sum, t| sum.saturating_add(t.bytes))
    }

    pub fn largest(&self) -> Option<&Term> {
        // The first of equal terms: the pane store before the buffers that mirror it.
        self.terms
            .iter()
            .fold(None, |best: Option<&Term>, t| match best {
                Some(b) if b.bytes >= t.bytes => Some(b),
                _ => Some(t),
            })
    }

    /// The estimate of `stream` folding batches of at most `batch_rows` rows, and at most
    /// `reports` reports in all when that is known (`batch` reads it from the Parquet
    /// footers): a sparse count table holds at most one cell per report, so its terms are
    /// also bounded by the reports that can reach them.
    pub fn of(
        stream: &StreamConfig,
        mechanism: &Mechanism,
        batch_rows: usize,
        reports: Option<u64>,
    ) -> Self {
        let mechanism = mechanism.channel();
        let empty = mechanism.new_sketch();
        let sketch = empty.max_heap_bytes() as u64;
        let cell = SPARSE_CELL_BYTES as u64;
        let sparse = empty.starts_sparse();
        let layout = ReportLayout::of(stream, mechanism);
        let key_columns = layout.key_columns();
        let keyed = !key_columns.is_empty();
        // A window's snapshot is one copy of its groups' sketches; a test grouped as the
        // stream folds borrows them, and only one that merges fold keys (a two-sample
        // test's sides, a curator test's blocks) builds a second, merged set.
        let copies: u64 = if key_columns == stream.columns.group_by
            && !stream
                .tests
                .iter()
                .any(|t| matches!(t.spec, TestSpec::TwoSample { .. }))
        {
            1
        } else {
            2
        };
        // Beyond `max_groups`, reports share the one `__other__` group.
        let groups = if keyed {
            stream.max_groups as u64 + 1
        } else {
            1
        };
        let width = stream_pane_width(stream).max(1) as u64;
        let bounded = longest_window(stream) as u64;
        let panes = if bounded == 0 {
            1
        } else {
            (bounded + stream.allowed_lateness.millis()).div_ceil(width) + 2
        };
        let mul = |a: u64, b: u64| a.saturating_mul(b);
        // (bytes, how) of a dense bound, or of the cells `rows` reports can add to sparse
        // tables when that is less.
        let bound = |bytes: u64, how: String, rows: Option<u64>, copies: u64| match rows {
            Some(rows) if sparse && mul(mul(copies, rows), cell) < bytes => (
                mul(mul(copies, rows), cell),
                format!("{copies} × {rows} reports × {cell} B per sparse cell (at most {how})"),
            ),
            _ => (bytes, how),
        };
        let term = |what: &'static str, (bytes, how): (u64, String)| Term { what, bytes, how };
        let mut terms = vec![
            term(
                "pane store",
                bound(
                    mul(mul(sketch, groups), panes),
                    format!("{sketch} B per sketch × {groups} groups × {panes} panes"),
                    reports,
                    1,
                ),
            ),
            term(
                "window snapshot",
                bound(
                    mul(mul(copies, sketch), groups),
                    format!("{copies} × {sketch} B per sketch × {groups} groups"),
                    reports,
                    copies,
                ),
            ),
            term(
                "batch delta",
                bound(
                    mul(sketch, (batch_rows as u64).min(mul(groups, panes))),
                    format!(
                        "{sketch} B per sketch × min({batch_rows} rows per batch, groups × panes)"
                    ),
                    Some(batch_rows as u64),
                    1,
                ),
            ),
        ];
        if sparse {
            // The parallel fold's last merge holds both halves and the result at once.
            let (bytes, how) = bound(
                mul(mul(sketch, groups), panes),
                format!("{sketch} B per sketch × {groups} groups × {panes} panes"),
                reports,
                1,
            );
            terms.push(Term {
                what: "fold merge",
                bytes,
                how: format!("the last merge of the parallel fold: {how}"),
            });
        }
        if keyed {
            let key = KeyShape {
                values: layout.group_by.len() as u64,
                blocks: layout.block_sizes.len() as u64,
                value_bytes: stream.max_group_value_bytes as u64,
            };
            let series = (stream.tests.len() as u64).saturating_mul(d_recorded(mechanism) + 6);
            terms.push(group_values_term(&key, groups, panes + copies, series));
        }
        // The group under test, one group at a time: a dense table is borrowed, and the
        // null, the report law under it and the estimate are vectors of d doubles. A
        // sparse table is walked cell by cell against the null, and its estimate is not
        // recorded (d > 65,536): only the null and a sequential test's report law remain.
        let d = mechanism.domain() as u64;
        let vectors: u64 = if sparse { 2 } else { 3 };
        terms.push(Term {
            what: "test evaluation",
            bytes: mul(8 * vectors, d),
            how: format!("{vectors} × 8 B × d = {d} for the group under test"),
        });
        terms.extend(olh_null_term(mechanism));
        terms.extend(olh_factor_term(stream, mechanism));
        terms.extend(monte_carlo_term(stream, sketch));
        StateEstimate {
            stream: stream.name.clone(),
            terms,
        }
    }
}

/// OlhSupportGOF's null: the S × g row laws and one simulated table, and the supports with
/// their null means and variances (d each).
fn olh_null_term(mechanism: &Mechanism) -> Option<Term> {
    let Mechanism::Olh(m) = mechanism else {
        return None;
    };
    let d = mechanism.domain() as u64;
    let cells = u64::from(m.pool_size()) * u64::from(m.g());
    Some(Term {
        what: "olh null",
        bytes: cells
            .saturating_mul(16)
            .saturating_add(d.saturating_mul(24)),
        how: format!("16 B × S·g = {cells} cells + 24 B × d = {d}"),
    })
}

/// OLH's pool factors, kept for the stream's life: `W = C⁻¹` and the exact variance
/// table (or, while W is built, C itself), d × d doubles each, and per sequential test
/// the Cholesky factor of its null's covariance (docs/STATISTICS.md §1.8, §3.3). None
/// above the dense domain, where no factor is built.
fn olh_factor_term(stream: &StreamConfig, mechanism: &Mechanism) -> Option<Term> {
    let Mechanism::Olh(m) = mechanism else {
        return None;
    };
    if m.domain() > ldpstream_config::OLH_MAX_DENSE_DOMAIN {
        return None;
    }
    let d = u64::from(m.domain());
    let nulls = stream
        .tests
        .iter()
        .filter(|t| t.sequential && matches!(t.spec, TestSpec::Gof { .. }))
        .count() as u64;
    let squares = 2 + nulls;
    Some(Term {
        what: "olh pool factor",
        bytes: squares.saturating_mul(8).saturating_mul(d * d),
        how: format!(
            "{squares} × d² = {}² doubles: C⁻¹, its variance table, {nulls} sequential null factor(s)",
            d
        ),
    })
}

/// The largest simulated null of the stream's tests that simulate one: `mc_samples`
/// statistics and one simulated sketch of `sketch` bytes.
fn monte_carlo_term(stream: &StreamConfig, sketch: u64) -> Option<Term> {
    let mc: u64 = stream
        .tests
        .iter()
        .filter(|t| {
            t.calibration == Calibration::MonteCarlo
                || t.method.method() == TestMethod::SheffetQ
                || t.method.method() == TestMethod::OlhSupportGOF
                || t.spec.curator().is_some()
                || matches!(&stream.mechanism, MechanismConfig::Laplace { .. })
        })
        .map(|t| u64::from(t.mc_samples))
        .max()
        .unwrap_or(0);
    (mc > 0).then(|| Term {
        what: "Monte Carlo null",
        bytes: mc.saturating_mul(8).saturating_add(sketch),
        how: format!("{mc} samples × 8 B + one simulated sketch"),
    })
}

/// Bytes a block-index value takes (`__block_N` columns hold decimal block numbers).
const BLOCK_VALUE_BYTES: u64 = 20;
/// What a string costs beside its bytes: its `String` header.
const STRING_HEADER_BYTES: u64 = 24;

/// The categories a record (and the service's estimate series) carries per group: none
/// past [`MAX_RECORDED_CATEGORIES`](crate::record::MAX_RECORDED_CATEGORIES).
fn d_recorded(mechanism: &Mechanism) -> u64 {
    let d = mechanism.domain();
    if d <= crate::record::MAX_RECORDED_CATEGORIES {
        d as u64
    } else {
        0
    }
}

/// A group key: its value columns (`group_by` and two-sample `by`), at most
/// `value_bytes` each, and its block-index columns.
struct KeyShape {
    values: u64,
    blocks: u64,
    value_bytes: u64,
}

/// The group values themselves, at their longest (`max_group_value_bytes`): every pane and
/// window copy keys its sketches by them, and `serve` labels each test's result series
/// (the statistic, p- and e-values, and one estimate per category) with them.
fn group_values_term(shape: &KeyShape, groups: u64, copies: u64, series: u64) -> Term {
    let key = shape
        .values
        .saturating_mul(shape.value_bytes + STRING_HEADER_BYTES)
        .saturating_add(
            shape
                .blocks
                .saturating_mul(BLOCK_VALUE_BYTES + STRING_HEADER_BYTES),
        );
    let holders = copies.saturating_add(series);
    Term {
        what: "group values",
        bytes: groups.saturating_mul(holders).saturating_mul(key),
        how: format!(
            "{groups} groups × ({copies} pane and window copies + {series} result series) × \
             {key} B per key (max_group_value_bytes = {})",
            shape.value_bytes
        ),
    }
}

/// Whether any test of the stream windows by time (its pane count then depends on the
/// input's time span in `batch`).
pub fn has_bounded_windows(stream: &StreamConfig) -> bool {
    stream.tests.iter().any(|t| {
        matches!(
            t.window,
            WindowConfig::Tumbling { .. } | WindowConfig::Sliding { .. }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldpstream_config::Config;

    fn estimate(stream: &str) -> StateEstimate {
        let config = Config::from_toml_str(stream, "t").unwrap();
        let s = &config.streams[0];
        let m = Mechanism::from_config(&s.mechanism).unwrap();
        StateEstimate::of(s, &m, 65_536, None)
    }

    /// OUE holds bit flip's sketch (d bit counts plus n), and subset its d item counts plus
    /// n in the same table, so `check` and the refusal at start estimate both term for
    /// term as bit flip, and a large d is not a small sketch.
    #[test]
    fn oue_is_estimated_as_its_bit_count_sketch() {
        let stream = |kind: &str| {
            format!(
                "[[stream]]\nname = \"s\"\nsource = {{ kind = \"parquet\", paths = [\"x\"] }}\n\
                 mechanism = {{ kind = \"{kind}\", epsilon = 2.0, domain = 100000 }}\n\
                 [[stream.test]]\nname = \"t\"\nkind = \"gof\"\nnull = \"uniform\"\n"
            )
        };
        let (oue, bitflip) = (estimate(&stream("oue")), estimate(&stream("bitflip")));
        let bytes = |e: &StateEstimate| e.terms.iter().map(|t| t.bytes).collect::<Vec<_>>();
        assert_eq!(bytes(&oue), bytes(&bitflip));
        assert_eq!(bytes(&estimate(&stream("subset"))), bytes(&bitflip));
        assert!(oue.terms[0].bytes >= 8 * 100_000, "{:?}", oue.terms);
    }

    /// OLH holds an S × g table whatever d: the pane store term is S·g·8 bytes per sketch,
    /// and a pool too large for max_state_memory is refused on that term.
    #[test]
    fn olh_is_estimated_as_its_pool_table() {
        let stream = |pool: u32| {
            format!(
                "[[stream]]\nname = \"s\"\nsource = {{ kind = \"parquet\", paths = [\"x\"] }}\n\
                 mechanism = {{ kind = \"olh\", epsilon = 2.0, domain = 100, g = 8, \
                 pool_size = {pool} }}\n\
                 [[stream.test]]\nname = \"t\"\nkind = \"gof\"\nnull = \"uniform\"\n"
            )
        };
        let small = estimate(&stream(1024));
        let large = estimate(&stream(65536));
        let enum_bytes = std::mem::size_of::<crate::sketch::Sketch>() as u64;
        assert_eq!(small.terms[0].bytes, 1024 * 8 * 8 + enum_bytes);
        assert_eq!(large.terms[0].bytes, 65536 * 8 * 8 + enum_bytes);
        assert!(small.terms.iter().any(|t| t.what == "olh null"));
        assert!(small.terms.iter().any(|t| t.what == "Monte Carlo null"));
    }

    /// The pool factors are counted (issue 44): W and its variance table, d² doubles
    /// each, plus one per sequential test's null; none above the dense domain.
    #[test]
    fn olh_counts_its_pool_factors() {
        let stream = |d: u32, sequential: bool| {
            format!(
                "[[stream]]\nname = \"s\"\nsource = {{ kind = \"parquet\", paths = [\"x\"] }}\n\
                 mechanism = {{ kind = \"olh\", epsilon = 4.0, domain = {d}, pool_size = 2048 }}\n\
                 [[stream.test]]\nname = \"t\"\nkind = \"gof\"\nnull = \"uniform\"\n\
                 sequential = {sequential}\n"
            )
        };
        let factor = |e: &StateEstimate| {
            e.terms
                .iter()
                .find(|t| t.what == "olh pool factor")
                .map(|t| t.bytes)
        };
        assert_eq!(
            factor(&estimate(&stream(1000, false))),
            Some(2 * 8 * 1000 * 1000)
        );
        assert_eq!(
            factor(&estimate(&stream(1000, true))),
            Some(3 * 8 * 1000 * 1000)
        );
        assert_eq!(factor(&estimate(&stream(5000, false))), None);
    }

    #[test]
    fn terms_multiply_sketch_groups_and_panes() {
        // GenRR, d = 1000: 8000 B of counts plus the enum; 100 groups + __other__; a 1 h
        // window sliding by 10 min is 6 panes, plus 1 min of lateness rounds up to 7, plus
        // the open pane and the retired panes: 9.
        let e = estimate(
            r#"
[[stream]]
name = "s"
source = { kind = "parquet", paths = ["x"] }
mechanism = { kind = "grr", epsilon = 1.0, domain = 1000 }
columns = { group_by = ["g"] }
max_groups = 100
allowed_lateness = "1m"
[[stream.test]]
name = "t"
kind = "gof"
null = "uniform"
window = { kind = "sliding", size = "1h", slide = "10m" }
"#,
        );
        let sketch = 8000 + std::mem::size_of::<crate::sketch::Sketch>() as u64;
        assert_eq!(e.terms[0].bytes, sketch * 101 * 9);
        assert_eq!(
            e.terms[1].bytes,
            sketch * 101,
            "one copy: the test groups as the fold"
        );
        assert_eq!(e.terms[2].bytes, sketch * 101 * 9);
        // Keys of 128 + 24 B, in 9 panes + 1 window copy and 1000 + 6 result series.
        let values = 101 * (10 + 1006) * (128 + 24);
        assert_eq!(
            (e.terms[3].what, e.terms[3].bytes),
            ("group values", values)
        );
        assert_eq!(
            (e.terms[4].what, e.terms[4].bytes),
            ("test evaluation", 24 * 1000)
        );
        assert_eq!(e.terms.len(), 5);
        assert_eq!(e.total(), sketch * (101 * 9 * 2 + 101) + values + 24_000);
    }

    #[test]
    fn an_ungrouped_global_stream_is_one_sketch_and_monte_carlo_counts() {
        let e = estimate(
            r#"
[[stream]]
name = "s"
source = { kind = "parquet", paths = ["x"] }
mechanism = { kind = "grr", epsilon = 1.0, domain = 10 }
[[stream.test]]
name = "t"
kind = "gof"
null = "uniform"
calibration = "monte_carlo"
mc_samples = 1000
"#,
        );
        let sketch = 80 + std::mem::size_of::<crate::sketch::Sketch>() as u64;
        assert_eq!(e.terms[0].bytes, sketch);
        assert_eq!(e.terms[4].bytes, 8000 + sketch);
    }

    /// A two-sample test merges fold keys into its sides: the snapshot then holds a
    /// second, merged set of sketches.
    #[test]
    fn a_two_sample_test_counts_a_second_snapshot_copy() {
        let e = estimate(
            r#"
[[stream]]
name = "s"
source = { kind = "parquet", paths = ["x"] }
mechanism = { kind = "grr", epsilon = 1.0, domain = 10 }
columns = { group_by = ["arm"] }
max_groups = 9
[[stream.test]]
name = "t"
kind = "two_sample"
by = "arm"
a = "x"
b = "y"
"#,
        );
        let sketch = 80 + std::mem::size_of::<crate::sketch::Sketch>() as u64;
        assert_eq!(e.terms[1].what, "window snapshot");
        assert_eq!(e.terms[1].bytes, 2 * sketch * 10);
    }

    /// A sparse table at d = 2^24: the dense bound is 128 MiB a sketch; the reports the
    /// input holds bound it much lower, one cell each.
    #[test]
    fn sparse_tables_are_bounded_by_the_reports() {
        let text = r#"
[[stream]]
name = "s"
source = { kind = "parquet", paths = ["x"] }
mechanism = { kind = "grr", epsilon = 1.0, domain = 16777216 }
columns = { group_by = ["g"] }
[[stream.test]]
name = "t"
kind = "gof"
null = "uniform"
"#;
        let config = ldpstream_config::Config::from_toml_str(text, "test").unwrap();
        let s = &config.streams[0];
        let m = Mechanism::from_config(&s.mechanism).unwrap();
        let dense = StateEstimate::of(s, &m, 65_536, None);
        assert!(dense.terms[0].bytes > 1 << 40, "{dense:?}");
        let e = StateEstimate::of(s, &m, 65_536, Some(20_000_000));
        let cell = SPARSE_CELL_BYTES as u64;
        let what: Vec<(&str, u64)> = e.terms.iter().map(|t| (t.what, t.bytes)).collect();
        assert_eq!(
            what,
            [
                ("pane store", 20_000_000 * cell),
                ("window snapshot", 20_000_000 * cell),
                ("batch delta", 65_536 * cell),
                ("fold merge", 20_000_000 * cell),
                // 10,000 groups + __other__, in 1 pane and 1 window copy, and 6 result
                // series (no estimate series past 65,536 categories).
                ("group values", 10_001 * (2 + 6) * (128 + 24)),
                ("test evaluation", 16 << 24),
            ]
        );
    }
}
