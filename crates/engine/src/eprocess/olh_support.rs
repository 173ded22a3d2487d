//! OLH's sequential test: the Gaussian mixture ([`super::gaussian`]) on the support counts'
//! whitened χ²_{d−1} statistic given the pool rows ([`crate::mechanism::SupportWhitener`],
//! docs/STATISTICS.md §10.1), an **asymptotic** construction like bit flip's.
//!
//! The exact Dirichlet mixture on the pool's S·g (row, bucket) cells (what OLH used
//! before, and still uses where the pool has no whitened statistic) spreads its prior over
//! S·g − 1 directions (8,191 at S = 1,024, g = 8) of which d − 1 carry signal, and detected
//! at about 15× the fixed-n n; this one mixes over the d − 1 directions an alternative can
//! move, and conditions the mean on the rows as the fixed-n test does.

use super::{Design, EProcess};
use crate::error::EngineError;
use crate::mechanism::Mechanism;
use crate::sketch::Sketch;

/// The whitened e-process of H0: p = `p0` on an OLH pool table; None for other
/// mechanisms, and for a pool without the statistic (the caller falls back on the cells).
pub(super) fn olh_gof_e_process(
    mechanism: &Mechanism,
    sketch: &Sketch,
    p0: &[f64],
    design: Option<Design>,
) -> Result<Option<EProcess>, EngineError> {
    let Mechanism::Olh(m) = mechanism else {
        return Ok(None);
    };
    let Sketch::Pool(s) = sketch else {
        return Err(mechanism.sketch_mismatch(sketch));
    };
    if p0.len() != mechanism.domain() {
        return Err(EngineError::ShapeMismatch {
            expected: mechanism.domain(),
            found: p0.len(),
        });
    }
    if s.g() != m.g() as usize || s.pool_size() != m.pool_size() as usize {
        return Err(mechanism.sketch_mismatch(sketch));
    }
    let n: u64 = s.table().iter().sum();
    Ok(m.sequential_statistic(s.table(), p0)
        .ok()
        .map(|(statistic, df)| EProcess::asymptotic(statistic, df, n as f64, design)))
}
