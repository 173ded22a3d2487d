//! Independence tests on an r×c table flattened row-major (STATISTICS.md §4). Degrees of
//! freedom are (r−1)(c−1) for every χ² test here; seed 002's Alg. 7 says d−1, a typo.

use super::bilinear_fit::{
    into_open_simplex, margins, outer, BilinearProblem, Fit, FIT_MAX_ITERATIONS, FIT_TOLERANCE,
};
use super::{chi2_sf, tv_distance, Decision};
use crate::mechanism::{BitFlip, Noise};
use crate::mle::project_to_simplex;

/// Below this floor a plug-in marginal is lifted, to keep Σ invertible.
const MARGINAL_FLOOR: f64 = 1e-6;

/// An independence test's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct IndependenceOutcome {
    pub decision: Decision,
    /// The minimisation inside the statistic, when there is one.
    pub fit: Option<Fit>,
    /// The smallest `n π̂1_i π̂2_j` (seed 002 footnote 2: at or below 5 the test is
    /// inconclusive).
    pub min_expected: f64,
}

fn df(rows: usize, cols: usize) -> u32 {
    ((rows - 1) * (cols - 1)) as u32
}

fn min_expected(n: f64, r: &[f64], c: &[f64]) -> f64 {
    outer(r, c).into_iter().fold(f64::INFINITY, f64::min) * n
}

/// `LocalExpIND` (seed 002 eqs. 11–12): Pearson's χ² of the GenRR report counts against
/// `n p̌_ij`, `p̌_ij = β((e^ε−1) π1_i π2_j + 1)`, `β = 1/(e^ε + rc − 1)`.
///
/// Seed 002 plugs in the moment estimates of the marginals (eq. 11). Those are not
/// efficient, and the resulting test is liberal: at α = 0.05 it rejects about 6% of null
/// tables at every n we tried (5·10³ to 5·10⁵). The marginals here are the
/// maximum-likelihood estimates under independence (EM on the GenRR channel, started at
/// the plug-in), which restores the χ²_{(r−1)(c−1)} law of a Pearson statistic with
/// efficiently estimated parameters.
pub fn local_exp_ind(
    epsilon: f64,
    rows: usize,
    cols: usize,
    counts: &[u64],
) -> IndependenceOutcome {
    let n: u64 = counts.iter().sum();
    let nf = n as f64;
    let em1 = epsilon.exp_m1();
    let beta = 1.0 / (epsilon.exp() + (rows * cols) as f64 - 1.0);
    let freq: Vec<f64> = counts.iter().map(|&h| h as f64 / nf).collect();
    let (row_sums, col_sums) = margins(&freq, rows, cols);
    let pi1: Vec<f64> = row_sums
        .iter()
        .map(|h| (h - cols as f64 * beta) / (beta * em1))
        .collect();
    let pi2: Vec<f64> = col_sums
        .iter()
        .map(|h| (h - rows as f64 * beta) / (beta * em1))
        .collect();
    let fit = genrr_product_mle(
        &freq,
        rows,
        cols,
        beta,
        beta * em1,
        into_open_simplex(&pi1, MARGINAL_FLOOR),
        into_open_simplex(&pi2, MARGINAL_FLOOR),
    );
    let mut statistic = 0.0;
    for i in 0..rows {
        for j in 0..cols {
            let expected = nf * beta * (em1 * fit.theta1[i] * fit.theta2[j] + 1.0);
            let diff = counts[i * cols + j] as f64 - expected;
            statistic += diff * diff / expected;
        }
    }
    let df = df(rows, cols);
    IndependenceOutcome {
        decision: Decision::chi2(statistic, df, chi2_sf(df, statistic)),
        min_expected: min_expected(nf, &fit.theta1, &fit.theta2),
        fit: Some(fit),
    }
}

/// EM for the marginals of a product law seen through GenRR (`q = ρ + γ p`): the E-step
/// spreads each report over the true cells, the M-step takes the margins of the result.
fn genrr_product_mle(
    freq: &[f64],
    rows: usize,
    cols: usize,
    rho: f64,
    gamma: f64,
    mut t1: Vec<f64>,
    mut t2: Vec<f64>,
) -> Fit {
    let mut log_likelihood = f64::NEG_INFINITY;
    for iteration in 1..=FIT_MAX_ITERATIONS {
        let p = outer(&t1, &t2);
        let q: Vec<f64> = p.iter().map(|&x| rho + gamma * x).collect();
        let spread: f64 = freq.iter().zip(&q).map(|(f, q)| f / q).sum::<f64>() * rho;
        let expected: Vec<f64> = p
            .iter()
            .zip(freq.iter().zip(&q))
            .map(|(&x, (&f, &qx))| x * (spread + gamma * f / qx))
            .collect();
        let (n1, n2) = margins(&expected, rows, cols);
        let s1: f64 = n1.iter().sum();
        let s2: f64 = n2.iter().sum();
        let next1: Vec<f64> = n1.iter().map(|x| x / s1).collect();
        let next2: Vec<f64> = n2.iter().map(|x| x / s2).collect();
        // EM can crawl; stop on the parameters, not on the likelihood, which flattens first.
        let moved = next1
            .iter()
            .zip(&t1)
            .chain(next2.iter().zip(&t2))
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        t1 = next1;
        t2 = next2;
        log_likelihood = freq.iter().zip(&q).map(|(f, q)| f * q.ln()).sum();
        if moved < FIT_TOLERANCE {
            return Fit {
                value: -log_likelihood,
                theta1: t1,
                theta2: t2,
                iterations: iteration,
                converged: true,
            };
        }
    }
    Fit {
        value: -log_likelihood,
        theta1: t1,
        theta2: t2,
        iterations: FIT_MAX_ITERATIONS,
        converged: false,
    }
}

/// `LocalBitFlipIND` (seed 002 eqs. 13–15): `min_θ n·uᵀ M̃ u`, `u = H̃/n − p̃(θ)`,
/// `p̃(θ) = α θ1θ2ᵀ + 1/(e^{ε/2}+1)`, `M̃ = Π Σ(π̃1π̃2ᵀ)⁻¹ Π` with the plug-in marginals
/// clipped into the open simplex.
pub fn local_bitflip_ind(
    m: &BitFlip,
    rows: usize,
    cols: usize,
    bit_counts: &[u64],
    n: u64,
) -> IndependenceOutcome {
    let nf = n as f64;
    let (alpha, flip) = (m.alpha(), m.flip());
    let target: Vec<f64> = bit_counts.iter().map(|&h| h as f64 / nf).collect();
    let (row_sums, col_sums) = margins(&target, rows, cols);
    let pi1: Vec<f64> = row_sums
        .iter()
        .map(|h| (h - cols as f64 * flip) / alpha)
        .collect();
    let pi2: Vec<f64> = col_sums
        .iter()
        .map(|h| (h - rows as f64 * flip) / alpha)
        .collect();
    let (p1, p2) = (
        into_open_simplex(&pi1, MARGINAL_FLOOR),
        into_open_simplex(&pi2, MARGINAL_FLOOR),
    );
    let p = outer(&p1, &p2);
    let a2 = alpha * alpha;
    let problem = BilinearProblem {
        rows,
        cols,
        target,
        scale: alpha,
        offset: flip,
        diag: p.iter().map(|&x| a2 * x + m.b()).collect(),
        rank_coef: a2,
        rank_vec: p,
    };
    fitted(problem, &p1, &p2, nf)
}

/// `LocalNoiseIND` (seed 002 eq. 10, Alg. 6), Gaussian noise: marginals from `Ĥ/n̂`
/// (n̂ = Σ Ĥ), `M̂ = Diag(p) − ppᵀ + σI` at their product, statistic
/// `min_π (1/n)(Ĥ − n p(π))ᵀ Π M̂⁻¹ Π (Ĥ − n p(π))`.
pub fn local_noise_ind(
    m: &Noise,
    rows: usize,
    cols: usize,
    sums: &[f64],
    n: u64,
) -> IndependenceOutcome {
    let nf = n as f64;
    let n_hat: f64 = sums.iter().sum();
    let (row_sums, col_sums) = margins(sums, rows, cols);
    let pi1: Vec<f64> = row_sums.iter().map(|h| h / n_hat).collect();
    let pi2: Vec<f64> = col_sums.iter().map(|h| h / n_hat).collect();
    let (p1, p2) = (
        into_open_simplex(&pi1, MARGINAL_FLOOR),
        into_open_simplex(&pi2, MARGINAL_FLOOR),
    );
    let p = outer(&p1, &p2);
    let problem = BilinearProblem {
        rows,
        cols,
        target: sums.iter().map(|s| s / nf).collect(),
        scale: 1.0,
        offset: 0.0,
        diag: p.iter().map(|&x| x + m.variance()).collect(),
        rank_coef: 1.0,
        rank_vec: p,
    };
    fitted(problem, &p1, &p2, nf)
}

fn fitted(problem: BilinearProblem, p1: &[f64], p2: &[f64], nf: f64) -> IndependenceOutcome {
    let (rows, cols) = (problem.rows, problem.cols);
    let fit = problem.minimise(p1, p2);
    let statistic = nf * fit.value;
    let df = df(rows, cols);
    IndependenceOutcome {
        decision: Decision::chi2(statistic, df, chi2_sf(df, statistic)),
        min_expected: min_expected(nf, p1, p2),
        fit: Some(fit),
    }
}

/// Sheffet's marginal-product comparison (seed 000 Thm 12/13) on a debiased estimate p̂ of
/// the joint law: the product θ̄ of its (simplex-projected) marginals, `d_TV(p̂, θ̄)` and
/// `Q = n Σ (p̂ − θ̄)²/θ̄`.
#[derive(Debug, Clone, PartialEq)]
pub struct MarginalProduct {
    pub product: Vec<f64>,
    pub tv: f64,
    pub q: f64,
}

pub fn marginal_product(estimate: &[f64], rows: usize, cols: usize, n: u64) -> MarginalProduct {
    let (r, c) = margins(estimate, rows, cols);
    let product = outer(&project_to_simplex(&r), &project_to_simplex(&c));
    let q = n as f64
        * estimate
            .iter()
            .zip(&product)
            .filter(|(_, &t)| t > 0.0)
            .map(|(&p, &t)| (p - t) * (p - t) / t)
            .sum::<f64>();
    MarginalProduct {
        tv: tv_distance(estimate, &product),
        product,
        q,
    }
}
