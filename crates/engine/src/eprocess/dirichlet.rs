//! The Dirichlet–multinomial mixture likelihood ratio (Lindon & Malek, *Anytime-Valid
//! Inference for Multinomial Count Data*, NeurIPS 2022): an **exact** e-process for a
//! categorical report law `q0` that is known completely under H0.
//!
//! Reports `Y_1, Y_2, …` are i.i.d. categorical on K cells. Under H0 their law is `q0`.
//! The alternative is a mixture: draw `q ~ Dirichlet(κ q0)` once, then reports i.i.d. from
//! `q`. The ratio of the two sequence likelihoods after n reports with cell counts `c`,
//!
//! ```text
//! E_n(κ) = Γ(κ)/Γ(κ+n) · Π_k Γ(κ q0_k + c_k)/Γ(κ q0_k)  /  Π_k q0_k^{c_k},
//! ```
//!
//! is a non-negative martingale with `E_0 = 1` under H0 (a likelihood ratio against the
//! true law), so by Ville's inequality `P(∃n: E_n ≥ 1/α) ≤ α`. It depends on the reports
//! only through `c`, so it is a pure function of the count sketch: merges, restarts and
//! any split over partitions give the same value.
//!
//! κ sets the scale of effect the test is tuned to (large κ: a prior concentrated near q0,
//! small effects, large n). An equal-weight average of martingales over a grid of κ is
//! again a martingale with mean 1, and it loses at most `ln(grid size)` nats against the
//! best κ in hindsight, so it is robust across effect sizes.
//!
//! Everything is computed in log space with `ln Γ`, so counts up to 2^53 stay finite.

use statrs::function::gamma::ln_gamma;

use super::design::Mixture;
#[cfg(test)]
use crate::sketch::nonzero_cells;

/// The concentrations averaged over: powers of four from 4 to 4^12 ≈ 1.7·10^7, which puts
/// the best-tuned component within a factor of two of the optimum for detection times from
/// tens to tens of millions of reports.
pub const KAPPA_GRID: [f64; 12] = [
    4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0,
];

/// Counts up to this are summed as `Σ ln(a+i)`: `ln Γ(a+c) − ln Γ(a)` as a difference
/// loses `ε·ln Γ(a)` absolute precision, which is 10⁻⁸ at a ≈ 10⁷.
const RISING_BY_SUM: u64 = 16;

/// `ln Γ(a+c) − ln Γ(a)`, the log of the rising factorial `a(a+1)…(a+c−1)`.
pub(crate) fn ln_rising(a: f64, c: u64) -> f64 {
    if c <= RISING_BY_SUM {
        (0..c).map(|i| (a + i as f64).ln()).sum()
    } else {
        ln_gamma(a + c as f64) - ln_gamma(a)
    }
}

/// The occupied cells as distinct `(q0_k, c_k)` pairs with their multiplicities. Under a
/// uniform (or piecewise-constant) null, d cells with counts near n/d take only a few
/// hundred distinct values, so the ln Γ work per κ falls from d to that.
#[cfg(test)]
fn distinct_cells(counts: &[u64], q0: &[f64]) -> Vec<(f64, u64, u64)> {
    distinct_of_nonzero(nonzero_cells(counts), q0)
}

/// [`distinct_cells`] from the non-zero cells `(k, c_k)` alone, so that a sparse table is
/// never expanded to its d counts; cells past `q0` are left out as the dense zip does.
fn distinct_of_nonzero(
    nonzero: impl IntoIterator<Item = (usize, u64)>,
    q0: &[f64],
) -> Vec<(f64, u64, u64)> {
    let mut cells: Vec<(u64, u64)> = nonzero
        .into_iter()
        .filter_map(|(k, c)| q0.get(k).map(|q| (q.to_bits(), c)))
        .collect();
    cells.sort_unstable();
    let mut out: Vec<(f64, u64, u64)> = Vec::new();
    for (q, c) in cells {
        match out.last_mut() {
            Some(last) if last.0.to_bits() == q && last.1 == c => last.2 += 1,
            _ => out.push((f64::from_bits(q), c, 1)),
        }
    }
    out
}

/// `ln E_n(κ)` on distinct cells; `+∞` when a cell with `q0_k = 0` has a count (the null
/// is then refuted with certainty).
fn log_e_cells(cells: &[(f64, u64, u64)], n: u64, kappa: f64) -> f64 {
    let mut log_e = -ln_rising(kappa, n);
    for &(q, c, times) in cells {
        if q <= 0.0 {
            return f64::INFINITY;
        }
        // Γ(a + 0)/Γ(a) = 1 and q^0 = 1: empty cells were left out.
        log_e += times as f64 * (ln_rising(kappa * q, c) - c as f64 * q.ln());
    }
    log_e
}

/// `ln E_n(κ)` for one concentration.
#[cfg(test)]
pub fn log_e_single(counts: &[u64], q0: &[f64], kappa: f64) -> f64 {
    let n: u64 = counts.iter().sum();
    log_e_cells(&distinct_cells(counts, q0), n, kappa)
}

/// `ln` of the equal-weight mixture `(1/|grid|) Σ_κ E_n(κ)`, by log-sum-exp.
#[cfg(test)]
pub fn log_e_mixture(counts: &[u64], q0: &[f64], grid: &[f64]) -> f64 {
    log_e_mixture_cells(nonzero_cells(counts), counts.iter().sum(), q0, grid)
}

/// [`log_e_mixture`] from the non-zero cells `(k, c_k)` and their sum `n`.
#[cfg(test)]
pub fn log_e_mixture_cells(
    nonzero: impl IntoIterator<Item = (usize, u64)>,
    n: u64,
    q0: &[f64],
    grid: &[f64],
) -> f64 {
    log_e_tuned_cells(nonzero, n, q0, Mixture::uniform(grid))
}

/// [`log_e_mixture_cells`] over `mixture`'s concentrations (a planned sample size may tune
/// one, [`super::design`]).
pub fn log_e_tuned_cells(
    nonzero: impl IntoIterator<Item = (usize, u64)>,
    n: u64,
    q0: &[f64],
    mixture: Mixture,
) -> f64 {
    let cells = distinct_of_nonzero(nonzero, q0);
    mixture.log_e(|k| log_e_cells(&cells, n, k))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With no reports every component is exactly 1.
    #[test]
    fn empty_sketch_is_one() {
        assert_eq!(
            log_e_mixture(&[0, 0, 0], &[0.2, 0.3, 0.5], &KAPPA_GRID),
            0.0
        );
    }

    /// One report: the Dirichlet predictive of the first report is q0 itself, so E_1 = 1.
    #[test]
    fn first_report_carries_no_evidence() {
        for kappa in KAPPA_GRID {
            let l = log_e_single(&[0, 1, 0], &[0.2, 0.3, 0.5], kappa);
            assert!(l.abs() < 1e-12, "κ = {kappa}: {l}");
        }
    }

    /// A report in a cell the null gives probability 0 refutes it.
    #[test]
    fn impossible_cell_is_infinite() {
        assert_eq!(
            log_e_mixture(&[3, 1], &[1.0, 0.0], &KAPPA_GRID),
            f64::INFINITY
        );
    }

    /// Grouping equal cells changes nothing but the cost.
    #[test]
    fn grouped_cells_equal_the_cell_by_cell_sum() {
        let counts = [3u64, 0, 3, 7, 3, 7, 40];
        let q0 = [0.1, 0.1, 0.1, 0.1, 0.1, 0.2, 0.3];
        for kappa in [2.0, 300.0] {
            let mut direct = -ln_rising(kappa, counts.iter().sum());
            for (&c, &q) in counts.iter().zip(&q0) {
                direct += ln_rising(kappa * q, c) - c as f64 * q.ln();
            }
            let grouped = log_e_single(&counts, &q0, kappa);
            assert!((grouped - direct).abs() < 1e-12, "{grouped} vs {direct}");
        }
        assert_eq!(distinct_cells(&counts, &q0).len(), 4);
    }

    /// Exact expectation under H0 at small n: Σ over all count vectors of
    /// Multinomial(c; n, q0)·E_n(κ) = 1, computed by enumeration.
    #[test]
    fn martingale_has_mean_one_by_enumeration() {
        let q0 = [0.2f64, 0.3, 0.5];
        let n = 12u64;
        for kappa in [0.5, 4.0, 64.0] {
            let mut total = 0.0;
            for a in 0..=n {
                for b in 0..=n - a {
                    let c = [a, b, n - a - b];
                    let log_multinomial = ln_gamma(n as f64 + 1.0)
                        - c.iter().map(|&x| ln_gamma(x as f64 + 1.0)).sum::<f64>()
                        + c.iter()
                            .zip(&q0)
                            .map(|(&x, q)| x as f64 * q.ln())
                            .sum::<f64>();
                    total += (log_multinomial + log_e_single(&c, &q0, kappa)).exp();
                }
            }
            assert!((total - 1.0).abs() < 1e-9, "κ = {kappa}: {total}");
        }
    }

    /// The summed and the ln Γ forms of the rising factorial agree where they meet.
    #[test]
    fn rising_factorial_forms_agree() {
        for a in [0.3, 7.0, 5000.0] {
            let sum: f64 = (0..40).map(|i| (a + f64::from(i)).ln()).sum();
            let rel = (ln_rising(a, 40) - sum).abs() / sum.abs();
            assert!(rel < 1e-12, "a = {a}: {rel}");
        }
    }
}
