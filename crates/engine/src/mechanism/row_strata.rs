//! The ±1 families' estimates from each row's own sign mean (post-stratified by row).
//!
//! A Hadamard or cohort report picks a public row, then a sign whose mean given row r is
//! `μ_r = 2η (F p)_r`. The plain estimate `θ = (1/n) Fᵀ(plus − minus)` weighs each row by
//! its share of the reports, so it is unbiased only when rows are drawn uniformly: with
//! rows 4–7 thinned by 20% it is off by the thinned rows' share of `Fᵀμ`, and the
//! confidence sequences built on it stop covering. Each row's own mean
//! `m_r = (plus_r − minus_r)/n_r` is unbiased for `μ_r` whatever the row counts, so
//! `θ_s = (1/J) Fᵀ m` is unbiased for `E[θ]` under uniform rows, with
//! `Cov(θ_s) = (1/J²) Fᵀ diag(v) F`, `v_r = (1 − m_r²)/n_r` (plug-in). With equal row counts
//! `θ_s = θ` exactly. A row without reports carries no mean, so the plain estimate is kept
//! until every row has one (docs/STATISTICS.md §1.4.1).

/// Each row's sign mean and the variance of that mean, when every row has reports.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RowMeans {
    pub(crate) means: Vec<f64>,
    pub(crate) variances: Vec<f64>,
}

impl RowMeans {
    /// None when some row has no report (or the tables disagree in length).
    pub(crate) fn of(plus: &[u64], minus: &[u64]) -> Option<RowMeans> {
        if plus.len() != minus.len() || plus.is_empty() {
            return None;
        }
        let mut means = Vec::with_capacity(plus.len());
        let mut variances = Vec::with_capacity(plus.len());
        for (&p, &m) in plus.iter().zip(minus) {
            let n = p.checked_add(m).filter(|&n| n > 0)? as f64;
            let mean = (p as f64 - m as f64) / n;
            means.push(mean);
            variances.push((1.0 - mean * mean).max(0.0) / n);
        }
        Some(RowMeans { means, variances })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_row_has_no_mean() {
        assert_eq!(RowMeans::of(&[3, 0], &[1, 0]), None);
        assert_eq!(RowMeans::of(&[], &[]), None);
        let r = RowMeans::of(&[3, 0], &[1, 2]).unwrap();
        assert_eq!(r.means, vec![0.5, -1.0]);
        assert_eq!(r.variances, vec![0.75 / 4.0, 0.0]);
    }
}
