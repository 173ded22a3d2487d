//! Independence tests on an r×c table flattened row-major (docs/STATISTICS.md §4). Degrees of
//! freedom are (r−1)(c−1) for every χ² test here; seed 002's Alg. 7 says d−1, a typo.

use super::bilinear_fit::{
    into_open_simplex, margins, outer, BilinearProblem, Fit, FIT_MAX_ITERATIONS,
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

/// The reports' signal about the marginals, in reports' worth: n·α² for bit flipping
/// (a bit's mean moves by α per unit of probability against a variance under ¼) and
/// n/σ² for Gaussian noise. Below 1 the plug-in marginals are noise with a standard error
/// above 1, the projected statistic is no longer near its χ² law (at ε = 1e-9 and
/// n = 2000, 30% of null tables rejected at α = 0.05), and the result is inconclusive.
pub fn marginal_information(mechanism: &crate::mechanism::Mechanism, n: u64) -> Option<f64> {
    match mechanism {
        crate::mechanism::Mechanism::BitFlip(m) => Some(n as f64 * m.alpha() * m.alpha()),
        crate::mechanism::Mechanism::Noise(m) => Some(n as f64 / m.variance()),
        _ => None,
    }
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
    let g = GenrrTable::new(epsilon, rows, cols, counts);
    let model = ProductLikelihood {
        freq: &g.freq,
        rows,
        cols,
        rho: g.beta,
        gamma: g.signal,
    };
    let (pi1, pi2) = g.plug_in();
    let fit = genrr_product_mle(&model, g.n, pi1, pi2);
    let decision = g.pearson(&fit.theta1, &fit.theta2);
    IndependenceOutcome {
        decision,
        min_expected: min_expected(g.n, &fit.theta1, &fit.theta2),
        fit: Some(fit),
    }
}

/// Seed 002's `LocalExpIND` as published: Pearson's χ² against the moment-estimate
/// (plug-in) marginals of eq. 11, clipped into the open simplex. Not used by the engine
/// (see [`local_exp_ind`]: it rejects about 6–7% of null tables at α = 0.05); kept so that
/// the size test can show it would fail where the maximum-likelihood version passes.
#[cfg(test)]
pub fn local_exp_ind_plug_in(epsilon: f64, rows: usize, cols: usize, counts: &[u64]) -> Decision {
    let g = GenrrTable::new(epsilon, rows, cols, counts);
    let (pi1, pi2) = g.plug_in();
    g.pearson(&pi1, &pi2)
}

/// A GenRR report table of an r×c domain, with the channel's constants.
struct GenrrTable<'a> {
    counts: &'a [u64],
    rows: usize,
    cols: usize,
    n: f64,
    freq: Vec<f64>,
    /// β = 1/(e^ε + rc − 1), the probability of each wrong cell.
    beta: f64,
    /// β(e^ε − 1), how much of a report's law is signal.
    signal: f64,
}

impl<'a> GenrrTable<'a> {
    fn new(epsilon: f64, rows: usize, cols: usize, counts: &'a [u64]) -> Self {
        let n = counts.iter().sum::<u64>() as f64;
        // β and β(e^ε − 1) in forms that neither overflow nor cancel.
        let tail = (rows * cols) as f64 - 1.0;
        let decay = (-epsilon).exp();
        GenrrTable {
            counts,
            rows,
            cols,
            n,
            freq: counts.iter().map(|&h| h as f64 / n).collect(),
            beta: decay / (1.0 + tail * decay),
            signal: -(-epsilon).exp_m1() / (1.0 + tail * decay),
        }
    }

    /// The moment estimates of the marginals (seed 002 eq. 11), in the open simplex.
    fn plug_in(&self) -> (Vec<f64>, Vec<f64>) {
        let (row_sums, col_sums) = margins(&self.freq, self.rows, self.cols);
        let debias = |sums: &[f64], other: usize| -> Vec<f64> {
            let raw: Vec<f64> = sums
                .iter()
                .map(|h| (h - other as f64 * self.beta) / self.signal)
                .collect();
            into_open_simplex(&raw, MARGINAL_FLOOR)
        };
        (debias(&row_sums, self.cols), debias(&col_sums, self.rows))
    }

    /// Pearson's χ² against `n(β + β(e^ε−1) θ1_i θ2_j)`, χ²_{(r−1)(c−1)}.
    fn pearson(&self, t1: &[f64], t2: &[f64]) -> Decision {
        let statistic: f64 = outer(t1, t2)
            .iter()
            .zip(self.counts)
            .map(|(&p, &h)| {
                let expected = self.n * (self.beta + self.signal * p);
                let diff = h as f64 - expected;
                diff * diff / expected
            })
            .sum();
        let df = df(self.rows, self.cols);
        Decision::chi2(statistic, df, chi2_sf(df, statistic))
    }
}

/// Stop the product-law EM when the Frank–Wolfe gap of the log-likelihood of the whole
/// sample (n times the per-report gap) is below this: the likelihood can then gain no more
/// than this by moving either marginal, and the statistic is within about 1e-7 of its
/// value at the exact maximum (numpy, ε = 0.25, 4×5, n = 10⁵: 96 EM steps to this
/// tolerance, 3 047 to 1e-9, about 2·10⁶ for plain EM).
pub const LIKELIHOOD_GAP_TOLERANCE: f64 = 1e-6;

/// The product-law likelihood of GenRR report frequencies `f` (row-major r×c):
/// `ℓ(θ) = Σ f_ij ln(ρ + γ θ1_i θ2_j)` per report, with θ = (θ1, θ2) one vector.
struct ProductLikelihood<'a> {
    freq: &'a [f64],
    rows: usize,
    cols: usize,
    rho: f64,
    gamma: f64,
}

impl ProductLikelihood<'_> {
    fn report_law(&self, t: &[f64]) -> Vec<f64> {
        let (t1, t2) = t.split_at(self.rows);
        outer(t1, t2)
            .into_iter()
            .map(|x| self.rho + self.gamma * x)
            .collect()
    }

    fn log_likelihood(&self, t: &[f64]) -> f64 {
        self.freq
            .iter()
            .zip(self.report_law(t))
            .filter(|(f, _)| **f > 0.0)
            .map(|(f, q)| f * q.ln())
            .sum()
    }

    /// One EM step: the E-step spreads each report over the true cells, the M-step takes
    /// the margins of the result.
    fn em(&self, t: &[f64]) -> Vec<f64> {
        let (t1, t2) = t.split_at(self.rows);
        let p = outer(t1, t2);
        let q = self.report_law(t);
        let spread: f64 = self.freq.iter().zip(&q).map(|(f, q)| f / q).sum::<f64>() * self.rho;
        let expected: Vec<f64> = p
            .iter()
            .zip(self.freq.iter().zip(&q))
            .map(|(&x, (&f, &qx))| x * (spread + self.gamma * f / qx))
            .collect();
        let (n1, n2) = margins(&expected, self.rows, self.cols);
        let s1: f64 = n1.iter().sum();
        let s2: f64 = n2.iter().sum();
        n1.iter()
            .map(|x| x / s1)
            .chain(n2.iter().map(|x| x / s2))
            .collect()
    }

    /// The Frank–Wolfe gap `Σ_blocks (max_k g_k − Σ_k θ_k g_k)` of the per-report
    /// log-likelihood: zero exactly at a KKT point over the two simplices, and an upper
    /// bound on what either marginal alone can still gain (ℓ is concave in each block).
    fn kkt_gap(&self, t: &[f64]) -> f64 {
        let (t1, t2) = t.split_at(self.rows);
        let q = self.report_law(t);
        let mut g1 = vec![0.0; self.rows];
        let mut g2 = vec![0.0; self.cols];
        for i in 0..self.rows {
            for j in 0..self.cols {
                let w = self.gamma * self.freq[i * self.cols + j] / q[i * self.cols + j];
                g1[i] += w * t2[j];
                g2[j] += w * t1[i];
            }
        }
        let block = |g: &[f64], t: &[f64]| {
            let best = g.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let mean: f64 = g.iter().zip(t).map(|(a, b)| a * b).sum();
            (best - mean).max(0.0)
        };
        block(&g1, t1) + block(&g2, t2)
    }
}

/// Normalises each block of `t` onto its simplex, or None if a step left it.
fn feasible(t: &[f64], rows: usize) -> Option<Vec<f64>> {
    if t.iter().any(|x| !(x.is_finite() && *x >= 0.0)) {
        return None;
    }
    let (a, b) = t.split_at(rows);
    let (sa, sb): (f64, f64) = (a.iter().sum(), b.iter().sum());
    (sa > 0.0 && sb > 0.0).then(|| {
        a.iter()
            .map(|x| x / sa)
            .chain(b.iter().map(|x| x / sb))
            .collect()
    })
}

/// Maximum likelihood of the marginals of a product law seen through GenRR
/// (`q = ρ + γ p`): EM accelerated by SQUAREM (Varadhan & Roland 2008, scheme S3, with
/// step-halving back to the plain EM step and a monotone safeguard). It stops on the
/// likelihood's KKT gap, not on the change in the parameters, which can stall far from
/// tolerance where the likelihood is flat but the statistic already settled.
/// `iterations` counts EM steps.
fn genrr_product_mle(model: &ProductLikelihood, n: f64, t1: Vec<f64>, t2: Vec<f64>) -> Fit {
    let rows = model.rows;
    let mut t: Vec<f64> = t1.into_iter().chain(t2).collect();
    let mut value = model.log_likelihood(&t);
    let mut steps = 0u32;
    let done = |t: &[f64]| {
        let gap = model.kkt_gap(t);
        n * gap <= LIKELIHOOD_GAP_TOLERANCE || gap <= 64.0 * f64::EPSILON
    };
    let fit = |t: Vec<f64>, value: f64, steps: u32, converged: bool| Fit {
        value: -value,
        theta1: t[..rows].to_vec(),
        theta2: t[rows..].to_vec(),
        iterations: steps,
        converged,
    };
    while steps < FIT_MAX_ITERATIONS {
        if done(&t) {
            return fit(t, value, steps, true);
        }
        let e1 = model.em(&t);
        let e2 = model.em(&e1);
        steps += 2;
        let r: Vec<f64> = e1.iter().zip(&t).map(|(a, b)| a - b).collect();
        let v: Vec<f64> = e2
            .iter()
            .zip(&e1)
            .zip(&r)
            .map(|((b, a), r)| b - a - r)
            .collect();
        let (rr, vv): (f64, f64) = (r.iter().map(|x| x * x).sum(), v.iter().map(|x| x * x).sum());
        let plain = model.log_likelihood(&e2);
        let mut next = e2;
        if vv > 0.0 {
            // α ≤ −1; α = −1 is exactly the second EM step e2.
            let mut alpha = -(rr / vv).sqrt().max(1.0);
            while alpha < -1.0 {
                let jump: Vec<f64> = t
                    .iter()
                    .zip(&r)
                    .zip(&v)
                    .map(|((x, r), v)| x - 2.0 * alpha * r + alpha * alpha * v)
                    .collect();
                if let Some(jump) = feasible(&jump, rows) {
                    // One EM step from the extrapolated point stabilises it.
                    let stabilised = model.em(&jump);
                    steps += 1;
                    if model.log_likelihood(&stabilised) >= plain {
                        next = stabilised;
                        break;
                    }
                }
                alpha = (alpha - 1.0) / 2.0;
            }
        }
        // Plain EM never lowers the likelihood, and the accelerated point is kept only when
        // it does at least as well as plain EM: the sequence is monotone.
        value = model.log_likelihood(&next);
        t = next;
    }
    let converged = done(&t);
    fit(t, value, steps, converged)
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
        rank_coef: a2,
        rank_vec: p,
        ridge: m.b(),
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
        rank_coef: 1.0,
        rank_vec: p,
        ridge: m.variance(),
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
