//! The running state of sequential tests across looks. An e-value is a function of the
//! window's sketch, so every look recomputes it exactly; what a monitor must remember is
//! the running maximum and the rejection latch (Ville's inequality bounds the chance that
//! *any* look crosses 1/α, so a rejection, once reached, stands).

use std::collections::{BTreeMap, BTreeSet};

use ldpstream_config::{StreamConfig, WindowConfig};
use serde::{Deserialize, Serialize};

use crate::eprocess::{anytime_p_value, SequentialState};
use crate::error::EngineError;
use crate::record::TestRecord;
use crate::stats::bh_q_values;

/// The group as the record carries it: column → value, a null value apart from `""`.
type GroupKey = Option<BTreeMap<String, Option<String>>>;

/// One window's running state, as a checkpoint keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatchEntry {
    pub test: String,
    /// None for a cumulative or global window (see [`SequentialLatches::for_stream`]).
    pub window_start: Option<String>,
    pub group: GroupKey,
    pub max_e: f64,
    pub rejected: bool,
}

/// One e-process per (test, window, group) of a stream. Keyed by the structured group,
/// never its `k=v` label, which writes a null group and `""` alike (and
/// `("x,b=y", "z")` like `("x", "y,b=z")`): two groups sharing one running maximum would
/// let one group's e-values reject the other.
#[derive(Debug, Default, Clone)]
pub struct SequentialLatches {
    states: BTreeMap<(String, Option<String>, GroupKey), SequentialState>,
    /// Tests whose one window grows from the first report (cumulative, global): keyed
    /// without a window start, which moves earlier when a late report opens an earlier
    /// pane, and would otherwise start the window's state afresh.
    open_ended: BTreeSet<String>,
}

impl SequentialLatches {
    /// The latches of `stream`'s tests.
    pub fn for_stream(stream: &StreamConfig) -> Self {
        SequentialLatches {
            states: BTreeMap::new(),
            open_ended: stream
                .tests
                .iter()
                .filter(|t| matches!(t.window, WindowConfig::Cumulative | WindowConfig::Global))
                .map(|t| t.name.clone())
                .collect(),
        }
    }

    fn key(&self, r: &TestRecord) -> (String, Option<String>, GroupKey) {
        let window = if self.open_ended.contains(&r.test) {
            None
        } else {
            r.window_start.clone()
        };
        (r.test.clone(), window, r.group.clone())
    }

    /// Every open window's state, for a checkpoint.
    pub fn entries(&self) -> Vec<LatchEntry> {
        self.states
            .iter()
            .map(|((test, window_start, group), s)| LatchEntry {
                test: test.clone(),
                window_start: window_start.clone(),
                group: group.clone(),
                max_e: s.max_e,
                rejected: s.rejected,
            })
            .collect()
    }

    /// Restores checkpointed states: a restart must not forget a rejection, nor let a
    /// window's anytime p-value rise. A state no e-process can reach (a running maximum
    /// below 1 or not finite, a rejection without one) is refused as corrupt.
    pub fn restore(&mut self, entries: Vec<LatchEntry>) -> Result<(), EngineError> {
        for e in entries {
            if !(e.max_e.is_finite() && e.max_e >= 1.0) {
                return Err(EngineError::Corrupt(format!(
                    "sequential state of test {:?}: running maximum e-value {} (an \
                     e-process's maximum is finite and at least 1)",
                    e.test, e.max_e
                )));
            }
            self.states.insert(
                (e.test, e.window_start, e.group),
                SequentialState {
                    max_e: e.max_e,
                    rejected: e.rejected,
                },
            );
        }
        Ok(())
    }

    /// Folds each sequential record's look into its window's state and sets the record's
    /// `anytime_p_value` and `reject` from the running maximum. A final record's state is
    /// dropped: its window gets no more looks.
    ///
    /// An inconclusive look (too little information for the statistic's law, say) holds
    /// e = 1 and is not folded: skipping looks keeps Ville's bound, while folding its
    /// e-value let a look the record itself called undecidable latch a rejection that
    /// every later look then reported.
    pub fn observe(&mut self, records: &mut [TestRecord]) {
        for r in records.iter_mut() {
            self.observe_one(r);
        }
        adjust_across_groups(records);
    }

    /// [`observe`](Self::observe)'s step for one record, without the anytime q-values
    /// (which need the record's whole family): records observed one by one, in order,
    /// then adjusted family by family, end as `observe` leaves them.
    pub(crate) fn observe_one(&mut self, r: &mut TestRecord) {
        let Some(e) = r.e_value else { return };
        let key = self.key(r);
        let state = self.states.entry(key.clone()).or_default();
        if r.inconclusive {
            r.e_value = Some(1.0);
            r.anytime_p_value = Some(anytime_p_value(state.max_e));
            r.reject = false;
        } else {
            let look = state.observe(e, r.alpha);
            r.anytime_p_value = Some(look.anytime_p_value);
            r.reject = look.reject;
        }
        if r.is_final {
            self.states.remove(&key);
        }
    }

    /// Windows with a running state (open windows of sequential tests).
    pub fn len(&self) -> usize {
        self.states.len()
    }

    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }
}

/// Sets every sequential record's `anytime_q_value`: Benjamini–Hochberg over the
/// anytime p-values of the records of one test, window and look (one family per
/// (test, window start, look end, final)).
fn adjust_across_groups(records: &mut [TestRecord]) {
    type Family = (String, Option<String>, Option<String>, bool);
    let mut families: BTreeMap<Family, Vec<usize>> = BTreeMap::new();
    for (i, r) in records.iter().enumerate() {
        if r.anytime_p_value.is_some() {
            let key = (
                r.test.clone(),
                r.window_start.clone(),
                r.look_end.clone(),
                r.is_final,
            );
            families.entry(key).or_default().push(i);
        }
    }
    for members in families.values() {
        let p: Vec<Option<f64>> = members
            .iter()
            .map(|&i| records[i].anytime_p_value)
            .collect();
        for (&i, q) in members.iter().zip(bh_q_values(&p)) {
            records[i].anytime_q_value = q;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn look(window: &str, e: f64, is_final: bool) -> TestRecord {
        serde_json::from_value(serde_json::json!({
            "stream": "s", "test": "t", "method": "LocalExpGOF", "mechanism": "grr",
            "group": null, "window_start": window, "window_end": null, "n": 5,
            "n1": null, "n2": null, "statistic": 1.0, "df": 3, "p_value": 0.5,
            "q_value": null, "reject": e >= 20.0, "alpha": 0.05, "estimate": [],
            "std_error": [], "mle": [], "mle_converged": true, "mle_iterations": 0,
            "privacy": {"kind": "grr", "epsilon": 1.0}, "calibration": "asymptotic",
            "mc_p_value": null, "critical_value": null, "tv_distance": null,
            "fit_iterations": null, "fit_converged": null, "refused": null,
            "epsilon_spent": null, "budget_remaining": null, "blocks": null,
            "block_size": null, "block": null, "rejected_reports": {},
            "inconclusive": false, "inconclusive_reason": null, "final": is_final,
            "late_reports": 0, "e_value": e, "anytime_p_value": null
        }))
        .unwrap()
    }

    #[test]
    fn a_window_that_rejected_stays_rejected_and_its_p_value_never_rises() {
        let mut latches = SequentialLatches::default();
        let mut looks = vec![look("w1", 4.0, false), look("w2", 30.0, false)];
        latches.observe(&mut looks);
        assert_eq!(looks[0].anytime_p_value, Some(0.25));
        assert!(!looks[0].reject);
        assert!(looks[1].reject);
        // The next look at w2 has a smaller e-value: the rejection and the running
        // maximum stand; w1's is its own.
        let mut later = vec![look("w1", 2.0, false), look("w2", 3.0, true)];
        latches.observe(&mut later);
        assert_eq!(later[0].anytime_p_value, Some(0.25));
        assert!(later[1].reject, "a rejected window stays rejected");
        assert_eq!(later[1].anytime_p_value, Some(1.0 / 30.0));
        // w2's final record ends its state; w1 is still open.
        assert_eq!(latches.len(), 1);
    }

    /// Issue 31 defect 1: a group crossed 1/α on a look marked inconclusive ("smallest
    /// expected cell 0.000"), and its final record, with e = 0.59, said reject: true. An
    /// inconclusive look now holds e = 1 and latches nothing.
    #[test]
    fn an_inconclusive_look_neither_rejects_nor_latches() {
        let mut latches = SequentialLatches::default();
        let mut first = look("w", 1e6, false);
        first.inconclusive = true;
        let mut looks = vec![first, look("w2", 4.0, false)];
        latches.observe(&mut looks);
        assert!(!looks[0].reject);
        assert_eq!(looks[0].e_value, Some(1.0));
        assert_eq!(looks[0].anytime_p_value, Some(1.0));
        let mut last = vec![look("w", 0.59, true)];
        latches.observe(&mut last);
        assert!(!last[0].reject, "the inconclusive look latched a rejection");
        assert_eq!(last[0].anytime_p_value, Some(1.0));
        // A conclusive look's rejection is kept in the state across a later inconclusive
        // look, whose own record does not reject but shows the running anytime p-value.
        let mut w2 = vec![look("w2", 30.0, false)];
        latches.observe(&mut w2);
        assert!(w2[0].reject);
        let mut after = look("w2", 2.0, false);
        after.inconclusive = true;
        let mut after = vec![after];
        latches.observe(&mut after);
        assert_eq!(after[0].anytime_p_value, Some(1.0 / 30.0));
    }

    /// Issue 31 defect 3: the state survives a checkpoint, and a cumulative window's
    /// state survives its first pane moving earlier.
    #[test]
    fn states_round_trip_and_cumulative_windows_ignore_their_start() {
        let stream = ldpstream_config::Config::from_toml_str(
            "[[stream]]\nname = \"s\"\nsource = { kind = \"parquet\", paths = [\"x\"] }\n\
             mechanism = { kind = \"grr\", epsilon = 1.0, domain = 4 }\n[[stream.test]]\n\
             name = \"t\"\nkind = \"gof\"\nnull = \"uniform\"\nsequential = true\n\
             window = { kind = \"cumulative\" }\n",
            "t",
        )
        .unwrap()
        .streams
        .remove(0);
        let mut latches = SequentialLatches::for_stream(&stream);
        let mut looks = vec![look("2026-01-01T00:05:00Z", 30.0, false)];
        latches.observe(&mut looks);
        assert!(looks[0].reject);
        let mut restarted = SequentialLatches::for_stream(&stream);
        restarted.restore(latches.entries()).unwrap();
        // A late report moved the window's first pane earlier: same window.
        let mut later = vec![look("2026-01-01T00:00:00Z", 2.0, false)];
        restarted.observe(&mut later);
        assert!(later[0].reject, "the restart forgot the rejection");
        assert_eq!(later[0].anytime_p_value, Some(1.0 / 30.0));
        let mut bad = latches.entries();
        bad[0].max_e = 0.5;
        assert!(restarted.restore(bad).is_err());
    }

    /// The anytime q-value is BH over the groups of one look: with anytime p-values
    /// 1/30, 1/4 and 1 (e = 30, 4, 0.5), q = (0.1, 0.375, 1):
    /// `scipy.stats.false_discovery_control([1/30, 0.25, 1.0])`.
    #[test]
    fn anytime_q_values_adjust_across_the_groups_of_a_look() {
        let mut latches = SequentialLatches::default();
        let mut looks = vec![
            grouped(Some("a"), 30.0),
            grouped(Some("b"), 4.0),
            grouped(Some("c"), 0.5),
        ];
        latches.observe(&mut looks);
        let q: Vec<f64> = looks.iter().map(|r| r.anytime_q_value.unwrap()).collect();
        let expected = [0.1, 0.375, 1.0];
        for (got, want) in q.iter().zip(expected) {
            assert!((got - want).abs() < 1e-15, "{q:?}");
        }
    }

    fn grouped(value: Option<&str>, e: f64) -> TestRecord {
        let mut r = look("w", e, false);
        r.group = Some(BTreeMap::from([(
            "g".to_string(),
            value.map(str::to_string),
        )]));
        r
    }

    // The probe's sequential_latch_group_collision: a skewed null group beside a uniform
    // "" group; both labelled `g=`, they shared one running maximum and the "" group
    // showed reject: true with its own e-values near 0.5.
    #[test]
    fn groups_whose_labels_look_alike_keep_their_own_state() {
        let mut latches = SequentialLatches::default();
        let mut looks = vec![grouped(None, 1e6), grouped(Some(""), 0.5)];
        assert_eq!(looks[0].group_label(), looks[1].group_label());
        latches.observe(&mut looks);
        assert!(looks[0].reject);
        assert!(
            !looks[1].reject,
            "the \"\" group took the null group's rejection"
        );
        assert_eq!(looks[1].anytime_p_value, Some(1.0));
        assert_eq!(latches.len(), 2);
    }
}
