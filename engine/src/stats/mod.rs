//! Hypothesis tests on sketch snapshots. Every p-value comes from a survival function,
//! never `1 - cdf`, so that tiny p-values keep their precision.

mod chi2;
mod local_exp_gof;

pub use chi2::chi2_sf;
pub use local_exp_gof::local_exp_gof;

/// A test's statistic, its χ² degrees of freedom and p-value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TestOutcome {
    pub statistic: f64,
    pub df: u32,
    pub p_value: f64,
}
