//! The per-stream privacy-budget ledger: every release spends ε over its window; the loss
//! of any one report is the sum of ε over the releases whose windows contain it
//! (sequential composition over overlapping windows, parallel over disjoint ones), and a
//! release that would push any report past the budget is refused.
//!
//! A release may also be confined to one group (its values of the stream's `group_by`
//! columns). A report belongs to exactly one group, so releases over disjoint groups of one
//! window compose in parallel: G groups cost max, not the sum, of their ε.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The reports a release covers: column → value (None for a null key). No group (None)
/// means every report of the window.
pub type Group = BTreeMap<String, Option<String>>;

/// True for the overflow group: every column `"__other__"` (the key past `max_groups`).
///
/// Which reports it holds is not a function of the data and config: it depends on
/// `max_groups`, on which keys a batch saw first and on restarts. A spend on it may have
/// charged the reports of any group, so it counts against every group (see
/// [`PrivacyLedger::try_spend_in`], which refuses new ones).
pub fn is_overflow(group: &Group) -> bool {
    !group.is_empty()
        && group
            .values()
            .all(|v| v.as_deref() == Some(crate::window::OTHER_GROUP))
}

/// True when no report can be in both groups: they give different values to one column.
/// The overflow group is disjoint from none.
fn disjoint(a: Option<&Group>, b: Option<&Group>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) if is_overflow(a) || is_overflow(b) => false,
        (Some(a), Some(b)) => a.iter().any(|(k, v)| b.get(k).is_some_and(|w| w != v)),
        _ => false,
    }
}

/// Version of the ledger's JSON form.
pub const LEDGER_VERSION: u32 = 1;

/// One release: its window as `[start, end)` in ms since the epoch (None = unbounded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    pub start: Option<i64>,
    pub end: Option<i64>,
    pub epsilon: f64,
    pub label: String,
    /// The group the release was confined to; absent for a release over all reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<Group>,
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

    /// An upper bound on the total ε any single report of `group` in `[start, end)` has
    /// been charged (exact when all groups use the same columns). Every spend that charged
    /// such a report is one whose group is not disjoint from `group`; for a release over
    /// all reports (`group` None), every report sits in some spend's group or in none.
    fn worst_charge(&self, start: Option<i64>, end: Option<i64>, group: Option<&Group>) -> f64 {
        let overlapping: Vec<&Spend> = self
            .spends
            .iter()
            .filter(|s| s.overlaps(start, end))
            .collect();
        // The charge is piecewise constant and changes only where a window starts, so the
        // maximum is attained at the window's own start or at one of those starts.
        let mut points: Vec<Option<i64>> = vec![start];
        points.extend(overlapping.iter().map(|s| s.start).filter(|p| p.is_some()));
        // The groups whose reports can be worst off: the release's own, or, for a release
        // over all reports, every group charged so far and the reports of none of them.
        let mut candidates: Vec<Option<&Group>> = vec![group];
        if group.is_none() {
            candidates.extend(
                overlapping
                    .iter()
                    .filter_map(|s| s.group.as_ref())
                    .filter(|g| !is_overflow(g))
                    .map(Some),
            );
        }
        // A spend over all reports, or on the overflow group (which may have held any
        // report), charges every candidate.
        let covers_all = |s: &Spend| s.group.as_ref().is_none_or(is_overflow);
        let in_candidate = |s: &Spend, candidate: Option<&Group>| match candidate {
            Some(g) => !disjoint(s.group.as_ref(), Some(g)),
            None => covers_all(s),
        };
        points
            .into_iter()
            .filter(|p| match (p, start, end) {
                (Some(t), s, e) => s.is_none_or(|s| s <= *t) && e.is_none_or(|e| *t < e),
                (None, _, _) => true,
            })
            .flat_map(|p| candidates.iter().map(move |c| (p, *c)))
            .map(|(p, candidate)| {
                overlapping
                    .iter()
                    .filter(|s| match p {
                        Some(t) => s.contains(t),
                        None => s.start.is_none(),
                    })
                    .filter(|s| in_candidate(s, candidate))
                    .map(|s| s.epsilon)
                    .sum::<f64>()
            })
            .fold(0.0, f64::max)
    }

    /// The budget left for a release over `[start, end)`.
    pub fn remaining(&self, start: Option<i64>, end: Option<i64>) -> f64 {
        self.remaining_in(start, end, None)
    }

    /// The budget left for a release over the reports of `group` in `[start, end)`.
    pub fn remaining_in(&self, start: Option<i64>, end: Option<i64>, group: Option<&Group>) -> f64 {
        (self.budget - self.worst_charge(start, end, group)).max(0.0)
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
        self.try_spend_in(start, end, epsilon, label, None)
    }

    /// [`Self::try_spend`] for a release confined to the reports of `group`. A release on
    /// the overflow group ([`is_overflow`]) is always refused: nothing says which reports
    /// it would charge, so no group's budget could be kept.
    pub fn try_spend_in(
        &mut self,
        start: Option<i64>,
        end: Option<i64>,
        epsilon: f64,
        label: &str,
        group: Option<&Group>,
    ) -> Result<(), Refused> {
        let remaining = self.remaining_in(start, end, group);
        if group.is_some_and(is_overflow) {
            return Err(Refused {
                needed: epsilon,
                remaining,
            });
        }
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
            group: group.cloned(),
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

    fn group(pairs: &[(&str, &str)]) -> Group {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Some(v.to_string())))
            .collect()
    }

    /// 50 disjoint groups of one window under a budget that covers one release: all 50 get
    /// their release (parallel composition), a second release in any group is refused, and
    /// a release over all reports sees the worst group.
    #[test]
    fn disjoint_groups_of_a_window_compose_in_parallel() {
        let mut ledger = PrivacyLedger::new(1.0);
        let w = (Some(0), Some(HOUR));
        for g in 0..50 {
            let key = group(&[("country", &format!("c{g}"))]);
            ledger
                .try_spend_in(w.0, w.1, 1.0, "t", Some(&key))
                .unwrap_or_else(|r| panic!("group {g} refused: {r:?}"));
        }
        let key = group(&[("country", "c7")]);
        assert!(ledger.try_spend_in(w.0, w.1, 0.1, "t", Some(&key)).is_err());
        assert_eq!(ledger.remaining(w.0, w.1), 0.0);
        assert!(ledger.try_spend(w.0, w.1, 0.1, "all").is_err());
        // A group no release has touched still has the whole budget.
        let fresh = group(&[("country", "c99")]);
        assert_eq!(ledger.remaining_in(w.0, w.1, Some(&fresh)), 1.0);
    }

    /// Groups over other columns may share reports: they compose sequentially, and a
    /// release over all reports charges every group.
    #[test]
    fn overlapping_groups_compose_sequentially() {
        let mut ledger = PrivacyLedger::new(1.0);
        let fr = group(&[("country", "fr")]);
        let ios = group(&[("os", "ios")]);
        ledger
            .try_spend_in(None, None, 0.6, "a", Some(&fr))
            .unwrap();
        assert!(ledger
            .try_spend_in(None, None, 0.6, "b", Some(&ios))
            .is_err());
        ledger.try_spend(None, None, 0.3, "all").unwrap();
        let de = group(&[("country", "de")]);
        assert!((ledger.remaining_in(None, None, Some(&de)) - 0.7).abs() < 1e-12);
        assert!((ledger.remaining_in(None, None, Some(&fr)) - 0.1).abs() < 1e-12);
    }

    /// Issue 43 (ledger_other): a spend on `__other__` (from a run whose `max_groups` sent
    /// group c there) counts against c, so a run that keeps c apart cannot spend its
    /// budget again; and no new spend on the overflow group is recorded.
    #[test]
    fn an_overflow_spend_counts_against_every_group() {
        let mut ledger = PrivacyLedger::new(1.0);
        let w = (Some(0), Some(HOUR));
        let other = group(&[("g", "__other__")]);
        // As an older build recorded it.
        ledger.spends.push(Spend {
            start: w.0,
            end: w.1,
            epsilon: 0.6,
            label: "r/u".into(),
            group: Some(other.clone()),
        });
        let c = group(&[("g", "c")]);
        assert!((ledger.remaining_in(w.0, w.1, Some(&c)) - 0.4).abs() < 1e-12);
        assert!(ledger.try_spend_in(w.0, w.1, 0.6, "r/u", Some(&c)).is_err());
        assert!((ledger.remaining(w.0, w.1) - 0.4).abs() < 1e-12);
        // A window the overflow spend does not overlap keeps its budget.
        assert_eq!(
            ledger.remaining_in(Some(HOUR), Some(2 * HOUR), Some(&c)),
            1.0
        );
        let before = ledger.spends.len();
        assert!(ledger
            .try_spend_in(Some(HOUR), Some(2 * HOUR), 0.1, "r/u", Some(&other))
            .is_err());
        assert_eq!(ledger.spends.len(), before);
        assert!(is_overflow(&group(&[
            ("a", "__other__"),
            ("b", "__other__")
        ])));
        assert!(!is_overflow(&group(&[("a", "__other__"), ("b", "x")])));
        assert!(!is_overflow(&Group::new()));
    }

    /// Ledgers written before groups existed still load, as releases over all reports.
    #[test]
    fn reads_ledgers_without_groups() {
        let text = r#"{"version":1,"budget":2.0,"spends":[{"start":0,"end":10,"epsilon":0.5,"label":"x"}]}"#;
        let ledger: PrivacyLedger = serde_json::from_str(text).unwrap();
        assert_eq!(ledger.spends[0].group, None);
        assert_eq!(ledger.remaining(Some(0), Some(10)), 1.5);
    }
}
