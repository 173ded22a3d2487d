//! Maximum-likelihood estimates over the probability simplex (Sheffet Thms 1 and 9,
//! Cor. 2). Each is solved to a stated tolerance and reports its iterations and whether it
//! converged. `norm_sub` is the consistent (non-negative, summing to 1) post-processing of
//! the unbiased estimate; `ibu` is the iterative Bayesian update, the consistent
//! alternative multi-freq-ldpy computes.

mod em;
mod grr;
mod ibu;
mod norm_sub;
mod simplex;

#[cfg(test)]
pub use em::EM_MAX_CELL_UPDATES;
pub use em::{em, EmOperator};
pub use grr::grr_mle;
pub use ibu::{ibu, IBU_MAX_DOMAIN};
pub use norm_sub::norm_sub;
pub use simplex::{bitflip_composite_mle, project_to_simplex};

use serde::{Deserialize, Serialize};

/// Stop when the Frank–Wolfe gap `max_x r_x − 1` of the per-report log-likelihood is below
/// this (it bounds how far the likelihood is from its maximum).
pub const MLE_TOLERANCE: f64 = 1e-13;
/// Iteration cap; a result that hits it says `converged: false`.
pub const MLE_MAX_ITERATIONS: u32 = 200_000;

/// A maximum-likelihood estimate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mle {
    pub p: Vec<f64>,
    pub iterations: u32,
    pub converged: bool,
}

/// Why an EM maximum-likelihood estimate over `d` categories from `n` reports is not
/// computed, if it is not: with fewer reports than categories (n < d) most categories are
/// estimated at 0, the maximiser lies on a low face of the simplex, and EM approaches it
/// sublinearly at O(d) per step (one group at d = 2^20 with 2,000 reports took 25 s). The
/// unbiased `estimate` is still reported.
pub fn mle_omitted_reason(n: u64, d: usize) -> Option<String> {
    (n > 0 && n < d as u64).then(|| {
        format!(
            "n = {n} reports < d = {d} categories: the EM maximum-likelihood estimate is \
             not computed (the unbiased estimate is reported)"
        )
    })
}
