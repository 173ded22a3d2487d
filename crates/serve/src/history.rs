//! The last hour of results, in memory, for `/api/v1/history` and the status page's plots.
//!
//! Bounded so that a long-running service with many groups cannot grow without limit:
//! each (stream, test, group) series keeps at most [`MAX_POINTS_PER_SERIES`] points, none
//! older than [`HORIZON_MS`], and at most [`MAX_SERIES`] series are kept at once. A
//! series whose newest point has aged out of the horizon is dropped; a new series that
//! arrives while the table is full is not recorded and is counted in `series_dropped`.

use std::collections::{BTreeMap, VecDeque};

use ldpstream_engine::record::TestRecord;
use serde::Serialize;

/// How far back the history reaches.
pub const HORIZON_MS: i64 = 3_600_000;
/// One hour at the demo's 5 s snapshot interval; a shorter interval keeps a shorter span.
pub const MAX_POINTS_PER_SERIES: usize = 720;
/// With [`MAX_POINTS_PER_SERIES`] points of ~64 bytes each, ~46 MB at the worst.
pub const MAX_SERIES: usize = 1000;

/// One record's place in its series.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Point {
    /// Unix milliseconds when the record was published.
    pub t: i64,
    pub p_value: Option<f64>,
    /// Sequential tests' e-value, when the record carries one.
    pub e_value: Option<f64>,
    pub reject: bool,
    #[serde(rename = "final")]
    pub is_final: bool,
}

#[derive(Debug, Serialize)]
pub struct Series<'a> {
    pub stream: &'a str,
    pub test: &'a str,
    /// Group column → value (null for a null key), or null for an ungrouped stream, as in
    /// the records.
    pub group: &'a Option<BTreeMap<String, Option<String>>>,
    pub points: &'a VecDeque<Point>,
}

/// The body of `/api/v1/history`.
#[derive(Debug, Serialize)]
pub struct HistoryView<'a> {
    pub horizon_seconds: i64,
    pub max_points_per_series: usize,
    pub max_series: usize,
    pub series_dropped: u64,
    pub series: Vec<Series<'a>>,
}

/// (stream, test, group): the group as its column → value map (None when ungrouped),
/// since no joined string keeps every pair of groups apart.
pub(super) type ResultKey = (String, String, Option<BTreeMap<String, Option<String>>>);

type Key = ResultKey;

#[derive(Debug, Default)]
pub struct History {
    series: BTreeMap<Key, VecDeque<Point>>,
    series_dropped: u64,
}

impl History {
    /// Appends the records of one snapshot round, published at `now_ms`, and forgets what
    /// has left the horizon.
    pub fn record(&mut self, now_ms: i64, records: &[TestRecord]) {
        self.prune(now_ms);
        for r in records {
            let key = (r.stream.clone(), r.test.clone(), r.group.clone());
            if !self.series.contains_key(&key) && self.series.len() >= MAX_SERIES {
                self.series_dropped += 1;
                continue;
            }
            let points = self.series.entry(key).or_default();
            if points.len() >= MAX_POINTS_PER_SERIES {
                points.pop_front();
            }
            points.push_back(Point {
                t: now_ms,
                p_value: r.p_value,
                e_value: e_value(r),
                reject: r.reject,
                is_final: r.is_final,
            });
        }
    }

    fn prune(&mut self, now_ms: i64) {
        let oldest = now_ms - HORIZON_MS;
        self.series.retain(|_, points| {
            while points.front().is_some_and(|p| p.t < oldest) {
                points.pop_front();
            }
            !points.is_empty()
        });
    }

    pub fn view(&self) -> HistoryView<'_> {
        HistoryView {
            horizon_seconds: HORIZON_MS / 1000,
            max_points_per_series: MAX_POINTS_PER_SERIES,
            max_series: MAX_SERIES,
            series_dropped: self.series_dropped,
            series: self
                .series
                .iter()
                .map(|((stream, test, group), points)| Series {
                    stream,
                    test,
                    group,
                    points,
                })
                .collect(),
        }
    }
}

/// `TestRecord` has no e-value until sequential tests land; reading the field by name
/// from the serialized record keeps the history right before and after they do.
fn e_value(record: &TestRecord) -> Option<f64> {
    e_value_in(&serde_json::to_value(record).ok()?)
}

fn e_value_in(record: &serde_json::Value) -> Option<f64> {
    record.get("e_value")?.as_f64()
}

/// Wall-clock time for the history's x axis (event time may lag or be absent).
pub(super) fn unix_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(test: &str, p: f64) -> TestRecord {
        let mut r: TestRecord = serde_json::from_value(serde_json::json!({
            "stream": "s", "test": test, "method": "chi2", "mechanism": "grr",
            "n": 10, "reject": false, "alpha": 0.05,
            "estimate": [], "std_error": [], "mle": [], "mle_converged": true,
            "mle_iterations": 0, "privacy": {"kind": "grr"}, "calibration": "asymptotic",
            "rejected_reports": {}, "inconclusive": false,
        }))
        .unwrap_or_else(|e| panic!("record fixture: {e}"));
        r.p_value = Some(p);
        r
    }

    #[test]
    fn a_series_keeps_at_most_its_cap_newest_first_out() {
        let mut h = History::default();
        for i in 0..(MAX_POINTS_PER_SERIES + 5) {
            h.record(i as i64, &[record("t", i as f64)]);
        }
        let view = h.view();
        assert_eq!(view.series.len(), 1);
        let points = view.series[0].points;
        assert_eq!(points.len(), MAX_POINTS_PER_SERIES);
        assert_eq!(points.front().map(|p| p.t), Some(5));
        assert_eq!(
            points.back().map(|p| p.t),
            Some(MAX_POINTS_PER_SERIES as i64 + 4)
        );
    }

    #[test]
    fn points_older_than_the_horizon_and_empty_series_are_forgotten() {
        let mut h = History::default();
        h.record(0, &[record("old", 0.5), record("both", 0.5)]);
        h.record(HORIZON_MS, &[record("both", 0.4)]);
        h.record(HORIZON_MS + 1, &[record("both", 0.3)]);
        let view = h.view();
        let tests: Vec<_> = view.series.iter().map(|s| s.test).collect();
        assert_eq!(tests, ["both"]);
        let ts: Vec<_> = view.series[0].points.iter().map(|p| p.t).collect();
        assert_eq!(ts, [HORIZON_MS, HORIZON_MS + 1]);
    }

    #[test]
    fn new_series_beyond_the_cap_are_counted_not_kept() {
        let mut h = History::default();
        let records: Vec<_> = (0..MAX_SERIES + 3)
            .map(|i| record(&format!("t{i}"), 0.5))
            .collect();
        h.record(0, &records);
        h.record(1, &records[..1]);
        let view = h.view();
        assert_eq!(view.series.len(), MAX_SERIES);
        assert_eq!(view.series_dropped, 3);
        assert_eq!(view.series.iter().map(|s| s.points.len()).max(), Some(2));
    }

    #[test]
    fn the_e_value_is_read_when_the_record_has_one() {
        assert_eq!(e_value(&record("t", 0.5)), None);
        let with = serde_json::json!({"test": "t", "e_value": 12.5});
        assert_eq!(e_value_in(&with), Some(12.5));
        assert_eq!(e_value_in(&serde_json::json!({"e_value": null})), None);
    }
}
