//! Where a result sits. Its own module because both the tests ([`crate::hypothesis`]) and
//! the Monte Carlo seed each record's simulations draw from ([`crate::simulation_seed`])
//! are keyed by it.

use std::collections::BTreeMap;

/// Where a result sits: the group it covers and its window bounds (RFC 3339), if any.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    pub group: Option<BTreeMap<String, Option<String>>>,
    pub window_start: Option<String>,
    pub window_end: Option<String>,
    /// A provisional record of a sequential test (an event-time look, or serve's periodic
    /// snapshot): a look (docs/STATISTICS.md §10.1, "What a look record leaves out"). Its
    /// decision is the e-process's, and the reference quantities that cost far more than
    /// that decision (an EM MLE, OLH's simulated fixed-n p-value) are left to the window's
    /// final record. Not part of the simulation seed.
    pub look: bool,
}
