//! The goodness-of-fit e-process of the ±1 families (Hadamard, cohort), conditioned on
//! the rows: a product over rows of Beta–binomial mixture likelihood ratios on each row's
//! signs, an **exact** e-process whatever rule chose the rows.
//!
//! Report i picks a public row `R_i` and then a sign `S_i`. Under H0 the sign is
//! Bernoulli(`½ + η h_{R_i}`), `h = F p0`, given the row and everything before it; the row
//! itself may follow any law, non-uniform or drifting, as long as it is chosen before the
//! sign is drawn. Put a prior `q_j ~ Beta(κ' q0_j, κ'(1 − q0_j))` on each row's "+"
//! probability, independently across rows; the likelihood ratio of the signs given the
//! rows is
//!
//! ```text
//! E_n(κ') = Π_j B(κ' q0_j + plus_j, κ'(1 − q0_j) + minus_j) / B(κ' q0_j, κ'(1 − q0_j))
//!                / (q0_j^{plus_j} (1 − q0_j)^{minus_j}),
//! ```
//!
//! a non-negative martingale with mean 1 in the filtration that includes the row choices,
//! so Ville's inequality holds at every n. It is a function of the signed sketch alone.
//!
//! The Dirichlet mixture on the 2J (row, sign) cells that this replaces factors exactly,
//! by the Dirichlet's aggregation property, into a Dirichlet LR of the row totals against
//! the uniform row law (concentration κ) times this product with `κ' = κ/J`. The first
//! factor is a test of "rows are uniform", which is why non-uniform rows alone drove it
//! to 1.8e308 under a true null; the second is kept, with the same κ grid divided by J.

use super::design::Mixture;
use super::dirichlet::ln_rising;
use crate::stats::sign_spread;

/// One distinct row: `("+" probability, "−" probability, plus, minus, multiplicity)`.
type Row = (f64, f64, u64, u64, u64);

/// The rows with reports as distinct `(q+, q−, plus, minus)` with multiplicities: under a
/// uniform null most rows share h = 0, so the ln Γ work falls from J rows to far fewer.
fn distinct_rows(plus: &[u64], minus: &[u64], h: &[f64], eta: f64, complement: f64) -> Vec<Row> {
    let mut rows: Vec<(u64, u64, u64, u64)> = plus
        .iter()
        .zip(minus)
        .zip(h)
        .filter(|((&p, &m), _)| p + m > 0)
        .map(|((&p, &m), &hj)| {
            let (lower, upper) = sign_spread(hj, eta, complement);
            // q± = ½ ± ηh, the smaller one from the stable 1 − 2η|h|.
            let (up, down) = if hj >= 0.0 {
                (upper / 2.0, lower / 2.0)
            } else {
                (lower / 2.0, upper / 2.0)
            };
            (up.to_bits(), down.to_bits(), p, m)
        })
        .collect();
    rows.sort_unstable();
    let mut out: Vec<Row> = Vec::new();
    for (up, down, p, m) in rows {
        match out.last_mut() {
            Some(last)
                if (last.0.to_bits(), last.1.to_bits(), last.2, last.3) == (up, down, p, m) =>
            {
                last.4 += 1
            }
            _ => out.push((f64::from_bits(up), f64::from_bits(down), p, m, 1)),
        }
    }
    out
}

/// `ln` of one sign's factor `Γ(a + c)/Γ(a) / q^c` with `a = κ'q`; `+∞` for a report of a
/// sign the null makes impossible.
fn sign_term(kappa: f64, q: f64, count: u64) -> f64 {
    if count == 0 {
        return 0.0;
    }
    if q <= 0.0 {
        return f64::INFINITY;
    }
    ln_rising(kappa * q, count) - count as f64 * q.ln()
}

/// `ln E_n(κ')` on distinct rows.
fn log_e_rows(rows: &[Row], kappa: f64) -> f64 {
    rows.iter()
        .map(|&(up, down, p, m, times)| {
            let row = sign_term(kappa, up, p) + sign_term(kappa, down, m) - ln_rising(kappa, p + m);
            times as f64 * row
        })
        .sum()
}

/// `ln` of the mixture over the per-row concentrations `κ/J`, κ from `mixture` (equal
/// weights on a grid, or tuned to a planned sample size, [`super::design`]).
pub fn log_e_row_mixture(
    plus: &[u64],
    minus: &[u64],
    h: &[f64],
    eta: f64,
    complement: f64,
    mixture: Mixture,
) -> f64 {
    let rows = distinct_rows(plus, minus, h, eta, complement);
    let j = h.len().max(1) as f64;
    mixture.log_e(|k| log_e_rows(&rows, k / j))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eprocess::dirichlet;
    use statrs::function::gamma::ln_gamma;

    /// The Dirichlet mixture on the 2J cells is, κ by κ, the row-total Dirichlet LR against
    /// the uniform row law times this product at κ/J (the factorization the module rests
    /// on).
    #[test]
    fn the_cell_mixture_factors_into_rows_and_signs() {
        let (eta, h) = (0.23, [1.0, 0.4, -0.2, 0.0]);
        let (plus, minus) = ([30u64, 12, 7, 20], [5u64, 9, 14, 18]);
        let j = h.len() as f64;
        let q0: Vec<f64> = h
            .iter()
            .map(|x| (0.5 + eta * x) / j)
            .chain(h.iter().map(|x| (0.5 - eta * x) / j))
            .collect();
        let cells: Vec<u64> = plus.iter().chain(&minus).copied().collect();
        let totals: Vec<u64> = plus.iter().zip(&minus).map(|(a, b)| a + b).collect();
        for kappa in [4.0, 64.0, 4096.0] {
            let joint = dirichlet::log_e_single(&cells, &q0, kappa);
            let row_law = dirichlet::log_e_single(&totals, &[1.0 / j; 4], kappa);
            let rows = distinct_rows(&plus, &minus, &h, eta, 1.0 - 2.0 * eta);
            let signs = log_e_rows(&rows, kappa / j);
            assert!(
                (joint - row_law - signs).abs() < 1e-9,
                "κ = {kappa}: {joint} vs {row_law} + {signs}"
            );
        }
    }

    /// Exact mean 1 under H0 for one row at small n, by enumeration over the binomial.
    #[test]
    fn one_row_has_mean_one_by_enumeration() {
        let (eta, h, n) = (0.3f64, 0.5f64, 15u64);
        let q = 0.5 + eta * h;
        for kappa in [0.3, 5.0, 200.0] {
            let total: f64 = (0..=n)
                .map(|k| {
                    let log_binomial = ln_gamma(n as f64 + 1.0)
                        - ln_gamma(k as f64 + 1.0)
                        - ln_gamma((n - k) as f64 + 1.0)
                        + k as f64 * q.ln()
                        + (n - k) as f64 * (1.0 - q).ln();
                    let rows = distinct_rows(&[k], &[n - k], &[h], eta, 1.0 - 2.0 * eta);
                    (log_binomial + log_e_rows(&rows, kappa)).exp()
                })
                .sum();
            assert!((total - 1.0).abs() < 1e-9, "κ' = {kappa}: {total}");
        }
    }
}
