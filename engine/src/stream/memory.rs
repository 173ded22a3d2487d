//! How much state a stream will hold, from its config alone, so that a config that cannot
//! fit is refused at startup instead of aborting hours later.
//!
//! Every term is an upper bound in steady state (`serve`): the pane store keeps a sketch
//! per group in each pane a bounded window or the allowed lateness can still need, plus the
//! retired panes merged into one; a snapshot merges one window at a time; a batch's delta
//! holds at most one sketch per row; a Monte Carlo null keeps one statistic per sample.
//! `batch` keeps every pane of its input until the end, so there the pane count grows with
//! the input's time span (`ldpstream check` says so).

use ldpstream_config::{Calibration, MechanismConfig, StreamConfig, TestMethod, WindowConfig};

use super::due::{longest_window, stream_pane_width};
use super::layout::ReportLayout;
use crate::mechanism::Mechanism;

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

    /// The estimate of `stream` folding batches of at most `batch_rows` rows.
    pub fn of(stream: &StreamConfig, mechanism: &Mechanism, batch_rows: usize) -> Self {
        let sketch = mechanism.new_sketch().heap_bytes() as u64;
        let keyed = !ReportLayout::of(stream, mechanism).key_columns().is_empty();
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
        let mut terms = vec![
            Term {
                what: "pane store",
                bytes: mul(mul(sketch, groups), panes),
                how: format!("{sketch} B per sketch × {groups} groups × {panes} panes"),
            },
            Term {
                what: "window snapshot",
                bytes: mul(mul(2, sketch), groups),
                how: format!("2 copies × {sketch} B per sketch × {groups} groups"),
            },
            Term {
                what: "batch delta",
                bytes: mul(sketch, (batch_rows as u64).min(mul(groups, panes))),
                how: format!(
                    "{sketch} B per sketch × min({batch_rows} rows per batch, groups × panes)"
                ),
            },
        ];
        let mc: u64 = stream
            .tests
            .iter()
            .filter(|t| {
                t.calibration == Calibration::MonteCarlo
                    || t.method == Some(TestMethod::SheffetQ)
                    || t.spec.curator().is_some()
                    || matches!(&stream.mechanism, MechanismConfig::Laplace { .. })
            })
            .map(|t| u64::from(t.mc_samples))
            .max()
            .unwrap_or(0);
        if mc > 0 {
            terms.push(Term {
                what: "Monte Carlo null",
                bytes: mul(mc, 8).saturating_add(sketch),
                how: format!("{mc} samples × 8 B + one simulated sketch"),
            });
        }
        StateEstimate {
            stream: stream.name.clone(),
            terms,
        }
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
        StateEstimate::of(s, &m, 65_536)
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
        assert_eq!(e.terms[1].bytes, 2 * sketch * 101);
        assert_eq!(e.terms[2].bytes, sketch * 101 * 9);
        assert_eq!(e.terms.len(), 3);
        assert_eq!(e.largest().map(|t| t.what), Some("pane store"));
        assert_eq!(e.total(), sketch * (101 * 9 * 2 + 202));
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
        assert_eq!(e.terms[3].bytes, 8000 + sketch);
    }
}
