use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::mechanism::Privacy;

/// One test result: one JSON line per (stream, test, window, group). Fields are only ever
/// added, never renamed, so downstream parsers keep working.
/// The widest domain whose per-category estimate a record carries: beyond it one record
/// would hold two lists of d numbers (2 × 128 MiB at d = 2^24) and the snapshot would
/// build them for every group.
pub const MAX_RECORDED_CATEGORIES: usize = 65_536;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestRecord {
    pub stream: String,
    pub test: String,
    /// The concrete test, e.g. `"LocalExpGOF"`.
    pub method: String,
    /// The mechanism kind of the stream, e.g. `"grr"`.
    pub mechanism: String,
    /// Group column → value (null for a null key), or null when the stream is not grouped.
    pub group: Option<BTreeMap<String, Option<String>>>,
    /// RFC 3339, or null for a global window.
    pub window_start: Option<String>,
    pub window_end: Option<String>,
    /// Reports folded into the sketch the test ran on (both samples, for two-sample tests).
    /// Null for curator-model (private) tests: an exact count of raw reports is not
    /// differentially private, so it is never released.
    pub n: Option<u64>,
    /// Two-sample tests: the reports in sample `a` and in sample `b` (null, like `n`, for
    /// curator-model tests).
    pub n1: Option<u64>,
    pub n2: Option<u64>,
    /// Null when the test could not run (see `inconclusive_reason`).
    pub statistic: Option<f64>,
    /// χ² degrees of freedom of the asymptotic law; null for decision rules without a χ²
    /// law (SheffetTV) and where the p-value is only simulated (Laplace noise, SheffetQ).
    pub df: Option<u32>,
    /// The p-value the decision uses: the Monte Carlo one when `calibration` is
    /// `"monte_carlo"`, else the asymptotic one.
    pub p_value: Option<f64>,
    /// Benjamini–Hochberg adjusted p-value across the groups of the same stream, test and
    /// window.
    pub q_value: Option<f64>,
    pub reject: bool,
    pub alpha: f64,
    /// Debiased (unbiased) frequency estimate, one entry per category.
    pub estimate: Vec<f64>,
    /// Standard error of each entry of `estimate`.
    pub std_error: Vec<f64>,
    /// The consistent estimate: `estimate` post-processed by Norm-Sub (Wang et al., NDSS
    /// 2020), non-negative and summing to 1, biased where `estimate` has negative
    /// entries. Empty with `estimate`.
    #[serde(default)]
    pub estimate_norm_sub: Vec<f64>,
    /// The other consistent estimate, for grr, bitflip, oue, subset and olh: the iterative
    /// Bayesian update (Agrawal & Aggarwal, PODS 2001) on the sketch's per-category
    /// counts, with multi-freq-ldpy's matrix, start, tolerance and stopping rule
    /// (docs/STATISTICS.md §2.2), so it equals that library's `*_Aggregator_IBU`.
    /// Non-negative and summing to 1 even when capped. Empty for the other mechanisms,
    /// above 1,024 categories, and with `estimate`.
    #[serde(default)]
    pub estimate_ibu: Vec<f64>,
    /// The IBU's iterations, and whether it met its tolerance before its cap
    /// (`min(10,000, 2¹⁴/d)` iterations: 256 at d = 64; no IBU above d = 1,024). Null without
    /// `estimate_ibu`.
    #[serde(default)]
    pub ibu_iterations: Option<u32>,
    #[serde(default)]
    pub ibu_converged: Option<bool>,
    /// Per category, the lower and upper ends of the time-uniform (1 − alpha) confidence
    /// sequence for its frequency: it covers the true frequency at every look of the
    /// window at once (asymptotically; per category, d·alpha over all d at once), so it may
    /// be read at every snapshot. [0, 1] before 1,000 reports; empty with `estimate`.
    #[serde(default)]
    pub cs_lower: Vec<f64>,
    #[serde(default)]
    pub cs_upper: Vec<f64>,
    /// Why `estimate`, `std_error` and `mle` are empty: a domain wider than
    /// [`MAX_RECORDED_CATEGORIES`] (the lists would hold millions of numbers per record),
    /// or, for `olh`, a pool whose exactly unbiased estimate is not computed (more than
    /// 4,096 categories, or a pool that does not identify them; `estimate_plain` is then
    /// still given). The statistic and p-value still cover every category. Null otherwise.
    #[serde(default)]
    pub estimate_omitted: Option<String>,
    /// `olh` only: the plain estimate `(C_v/n − 1/g)/(p − 1/g)` of Wang et al., which
    /// treats the fixed pool as fresh hashes. The pool biases it by an amount that does
    /// not shrink with n (docs/STATISTICS.md §1.8); `estimate` is the pool's exactly
    /// unbiased one. Absent for other mechanisms.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub estimate_plain: Vec<f64>,
    /// `olh` only: a bound on every category's bias in `estimate_plain`,
    /// `g/(g − 1)·max_{x≠v} |C[v, x] − 1/g|` (C the pool's collision shares). Absent where
    /// `estimate` is omitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate_plain_bias_bound: Option<f64>,
    /// Maximum-likelihood estimate over the simplex.
    pub mle: Vec<f64>,
    pub mle_converged: bool,
    pub mle_iterations: u32,
    /// Why `mle` is empty although the window has reports: EM over d categories from
    /// n < d reports (see `ldpstream_engine::mle::mle_omitted_reason`). Null otherwise.
    #[serde(default)]
    pub mle_omitted: Option<String>,
    /// The local privacy each report had.
    pub privacy: Privacy,
    /// `"asymptotic"` or `"monte_carlo"`.
    pub calibration: String,
    /// Monte Carlo p-value from simulated null sketches, when computed.
    pub mc_p_value: Option<f64>,
    /// Monte Carlo critical value (reject iff statistic exceeds it), when computed.
    pub critical_value: Option<f64>,
    /// SheffetTV: total-variation distance between the estimate and the null.
    pub tv_distance: Option<f64>,
    /// Independence tests that minimise their statistic: the solver's iterations and
    /// whether it met its tolerance.
    pub fit_iterations: Option<u32>,
    pub fit_converged: Option<bool>,
    /// Curator-model tests: `"privacy budget exhausted"` when the ledger refused the
    /// release (nothing about the data is then released).
    pub refused: Option<String>,
    /// Curator-model tests: the ε this release spent, and the budget left afterwards for
    /// this window.
    pub epsilon_spent: Option<f64>,
    pub budget_remaining: Option<f64>,
    /// SubsampleAndAggregate: the number of blocks m, the block size, and the block used.
    pub blocks: Option<u64>,
    pub block_size: Option<u64>,
    pub block: Option<u64>,
    /// Reports seen but not folded, by reason.
    pub rejected_reports: BTreeMap<String, u64>,
    /// True when the data cannot support a decision; `reject` is then false by fiat, not
    /// by evidence.
    pub inconclusive: bool,
    pub inconclusive_reason: Option<String>,
    /// True for a window's last result: the window closed (the watermark passed its end,
    /// or a bounded input ended). `serve` also emits provisional results (false) for open
    /// windows; every `batch` result is final.
    #[serde(rename = "final", default)]
    pub is_final: bool,
    /// Reports of the stream not folded because they arrived after their pane had closed,
    /// up to this result. Per stream, not per group. (A report without event time is not
    /// late: the global and cumulative windows count it.)
    #[serde(default)]
    pub late_reports: u64,
    /// Sequential tests: the e-value of the test's e-process at this snapshot (capped at
    /// the largest f64); `reject` is `e_value >= 1/alpha`. Null for fixed-n tests.
    #[serde(default)]
    pub e_value: Option<f64>,
    /// Sequential tests: `min(1, 1/max e-value so far)`, valid however many snapshots of
    /// the window are looked at. Null for fixed-n tests.
    #[serde(default)]
    pub anytime_p_value: Option<f64>,
    /// Sequential tests: `"exact"` when P(ever reject | H0) ≤ alpha holds at every n (the
    /// Dirichlet mixtures of GOF on count and ±1 mechanisms), `"asymptotic"` when it holds
    /// as n grows, from the start the construction states (the Gaussian mixtures: bit-flip
    /// and noise GOF, independence, two-sample; README, "Sequential"). Null for fixed-n.
    #[serde(default)]
    pub validity: Option<String>,
    /// Sequential tests: the Benjamini–Hochberg adjusted `anytime_p_value` across the
    /// groups of the same test, window and look. A group whose `anytime_q_value ≤ alpha`
    /// is a discovery with the false discovery rate across groups at most alpha (the
    /// anytime p-values are valid p-values at every look, by Ville's inequality; groups
    /// are disjoint sets of reports, so independent). Null for fixed-n tests.
    #[serde(default)]
    pub anytime_q_value: Option<f64>,
    /// The asymptotic (χ²) p-value when `p_value` is a Monte Carlo one
    /// (`calibration = "monte_carlo"`), kept for comparison only: `reject` and `q_value`
    /// come from `p_value`. Null otherwise, and for statistics without a usable χ² law.
    #[serde(default)]
    pub asymptotic_p_value: Option<f64>,
    /// Why `calibration` is `"monte_carlo"` although the test asked for `"asymptotic"`:
    /// fewer than 5 expected reports in the rarest category under the null (see
    /// `ldpstream_engine::stats::MIN_EXPECTED_PER_CATEGORY`). Sequential tests: why the
    /// fixed-n p-value is missing. Null otherwise.
    #[serde(default)]
    pub calibration_reason: Option<String>,
    /// A look (the window key `looks`): the event time this record covers the reports
    /// before (RFC 3339). Null for a window's final record and for `serve`'s
    /// processing-time snapshots.
    #[serde(default)]
    pub look_end: Option<String>,
}

impl TestRecord {
    /// The record's group as `k=v,k2=v2` (empty for an ungrouped stream), part of its Kafka
    /// message key. Not injective (null and `""` look alike, and so can values holding `,`
    /// or `=`): anything that must keep groups apart uses `group` itself.
    pub fn group_label(&self) -> String {
        self.group.as_ref().map_or_else(String::new, |g| {
            g.iter()
                .map(|(k, v)| format!("{k}={}", v.as_deref().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        })
    }
}
