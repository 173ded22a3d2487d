//! Each stream's report rate, from its report counter sampled at every snapshot tick, so
//! the status page shows a rate that does not depend on how often (or whether) a page
//! polls.

use std::collections::{BTreeMap, VecDeque};

/// The rate is the counter's change over (up to) this much time.
pub const RATE_WINDOW_MS: i64 = 30_000;
/// Samples kept per stream: enough for the window at a 100 ms snapshot interval.
const MAX_SAMPLES: usize = 300;

#[derive(Debug, Default)]
pub struct ReportRates {
    samples: BTreeMap<String, VecDeque<(i64, u64)>>,
}

impl ReportRates {
    /// Records that `stream` had received `reports` in total at `now_ms`.
    pub fn observe(&mut self, stream: &str, now_ms: i64, reports: u64) {
        let samples = self.samples.entry(stream.to_string()).or_default();
        samples.push_back((now_ms, reports));
        // Keep one sample at or before the window's start, so the rate spans the window.
        while samples.len() > MAX_SAMPLES
            || (samples.len() > 2 && samples[1].0 <= now_ms - RATE_WINDOW_MS)
        {
            samples.pop_front();
        }
    }

    /// Reports per second over the last [`RATE_WINDOW_MS`]; `None` before two samples.
    pub fn per_second(&self, stream: &str) -> Option<f64> {
        let samples = self.samples.get(stream)?;
        let (t0, n0) = *samples.front()?;
        let (t1, n1) = *samples.back()?;
        (t1 > t0).then(|| n1.saturating_sub(n0) as f64 * 1000.0 / (t1 - t0) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_is_the_counters_change_over_the_last_window() {
        let mut r = ReportRates::default();
        assert_eq!(r.per_second("s"), None);
        r.observe("s", 0, 0);
        assert_eq!(r.per_second("s"), None);
        r.observe("s", 1000, 500);
        assert_eq!(r.per_second("s"), Some(500.0));
        // 100/s for a long time after: the early 500/s second leaves the window.
        for i in 2..=100 {
            r.observe("s", i * 1000, 500 + (i as u64 - 1) * 100);
        }
        assert_eq!(r.per_second("s"), Some(100.0));
        assert_eq!(r.per_second("other"), None);
    }
}
