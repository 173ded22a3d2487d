//! The per-stream privacy-budget ledger: every release spends ε over its window; the loss
//! of any one report is the sum of ε over the releases whose windows contain it
//! (sequential composition over overlapping windows, parallel over disjoint ones), and a
//! release that would push any report past the budget is refused.

use serde::{Deserialize, Serialize};

/// Version of the ledger's JSON form.
pub const LEDGER_VERSION: u32 = 1;

/// One release: its window as `[start, end)` in ms since the epoch (None = unbounded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    pub start: Option<i64>,
    pub end: Option<i64>,
    pub epsilon: f64,
    pub label: String,
}

impl Spend {
    fn contains(&self, t: i64) -> bool {
        self.start.is_none_or(|s| s <= t) && self.end.is_none_or(|e| t < e)
    }

    fn overlaps(&self, start: Option<i64>, end: Option<i64>) -> bool {
        let begins_before_end = match (self.start, end) {
            (Some(s), Some(e)) => s < e,
            _ => true,
        };
        let ends_after_start = match (self.end, start) {
            (Some(e), Some(s)) => e > s,
            _ => true,
        };
        begins_before_end && ends_after_start
    }
}

/// A stream's budget and what has been spent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrivacyLedger {
    pub version: u32,
    pub budget: f64,
    pub spends: Vec<Spend>,
}

/// Why a release was refused.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    pub needed: f64,
    pub remaining: f64,
}

impl PrivacyLedger {
    pub fn new(budget: f64) -> Self {
        PrivacyLedger {
            version: LEDGER_VERSION,
            budget,
            spends: Vec::new(),
        }
    }

    /// The largest total ε any single report in `[start, end)` has been charged.
    fn worst_charge(&self, start: Option<i64>, end: Option<i64>) -> f64 {
        let overlapping: Vec<&Spend> = self
            .spends
            .iter()
            .filter(|s| s.overlaps(start, end))
            .collect();
        // The charge is piecewise constant and changes only where a window starts, so the
        // maximum is attained at the window's own start or at one of those starts.
        let mut points: Vec<Option<i64>> = vec![start];
        points.extend(overlapping.iter().map(|s| s.start).filter(|p| p.is_some()));
        points
            .into_iter()
            .filter(|p| match (p, start, end) {
                (Some(t), s, e) => s.is_none_or(|s| s <= *t) && e.is_none_or(|e| *t < e),
                (None, _, _) => true,
            })
            .map(|p| {
                overlapping
                    .iter()
                    .filter(|s| match p {
                        Some(t) => s.contains(t),
                        None => s.start.is_none(),
                    })
                    .map(|s| s.epsilon)
                    .sum::<f64>()
            })
            .fold(0.0, f64::max)
    }

    /// The budget left for a release over `[start, end)`.
    pub fn remaining(&self, start: Option<i64>, end: Option<i64>) -> f64 {
        (self.budget - self.worst_charge(start, end)).max(0.0)
    }

    /// The budget left for a release over all time (what the metric shows).
    pub fn remaining_overall(&self) -> f64 {
        self.remaining(None, None)
    }

    /// Records the release if the budget covers it; refuses it (and records nothing)
    /// otherwise.
    pub fn try_spend(
        &mut self,
        start: Option<i64>,
        end: Option<i64>,
        epsilon: f64,
        label: &str,
    ) -> Result<(), Refused> {
        let remaining = self.remaining(start, end);
        // A relative slack absorbs rounding when a budget is spent in exact fractions.
        if epsilon > remaining + 1e-12 * self.budget {
            return Err(Refused {
                needed: epsilon,
                remaining,
            });
        }
        self.spends.push(Spend {
            start,
            end,
            epsilon,
            label: label.to_string(),
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000;

    /// Sliding 1-hour windows every 15 minutes, ε = 0.5 each, budget 2: each report sits
    /// in 4 windows, so the 4th overlapping release is the last one allowed, and disjoint
    /// windows later on have their own budget.
    #[test]
    fn sliding_windows_spend_down_to_refusal() {
        let mut ledger = PrivacyLedger::new(2.0);
        let quarter = HOUR / 4;
        for k in 0..4 {
            let start = k * quarter;
            ledger
                .try_spend(Some(start), Some(start + HOUR), 0.5, "w")
                .unwrap();
        }
        // [45m, 1h45m) overlaps the first four windows at t in [45m, 1h): charge 2.0 there.
        let refused = ledger.try_spend(
            Some(4 * quarter - quarter),
            Some(4 * quarter - quarter + HOUR),
            0.5,
            "w",
        );
        assert!(refused.is_err(), "{ledger:?}");
        // [1h, 2h) overlaps windows 2..4 only at most 3 deep: allowed.
        ledger
            .try_spend(Some(HOUR), Some(2 * HOUR), 0.5, "w")
            .unwrap();
        assert!((ledger.remaining(Some(HOUR), Some(HOUR + 1)) - 0.0).abs() < 1e-12);
        // Parallel composition: a disjoint window far later has the whole budget.
        assert_eq!(ledger.remaining(Some(10 * HOUR), Some(11 * HOUR)), 2.0);
        // A global release overlaps everything and sees the worst point.
        assert!(ledger.try_spend(None, None, 0.1, "global").is_err());
        assert_eq!(ledger.remaining_overall(), 0.0);
    }

    #[test]
    fn global_releases_compose_sequentially() {
        let mut ledger = PrivacyLedger::new(1.0);
        ledger.try_spend(None, None, 0.4, "a").unwrap();
        ledger.try_spend(None, None, 0.6, "b").unwrap();
        let r = ledger.try_spend(None, None, 0.01, "c").unwrap_err();
        assert!(r.remaining < 1e-9);
    }
}
