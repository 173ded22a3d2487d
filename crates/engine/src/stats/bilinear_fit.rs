//! The minimisation inside the bit-flip and noise independence statistics:
//! `min_{θ1 ∈ Δ_r, θ2 ∈ Δ_c} uᵀ Π S⁻¹ Π u` with `u = h − a·vec(θ1θ2ᵀ) − c0` and
//! `S = k·Diag(q) + c·I − k·qqᵀ` with q a distribution (diagonal minus rank one, so each
//! evaluation is O(rc)).
//! Solved by projected gradient descent with Armijo backtracking.

use super::rank_one::center;
use crate::mle::project_to_simplex;

/// Stop when a full projected-gradient step moves no coordinate by more than this.
pub const FIT_TOLERANCE: f64 = 1e-13;
pub const FIT_MAX_ITERATIONS: u32 = 100_000;

/// The fixed parts of the objective.
#[derive(Debug, Clone)]
pub struct BilinearProblem {
    pub rows: usize,
    pub cols: usize,
    /// Observed means h (length rc, row-major).
    pub target: Vec<f64>,
    /// a: how much of the mean is signal.
    pub scale: f64,
    /// c0: the mean's constant part.
    pub offset: f64,
    /// S = rank_coef·(Diag(rank_vec) − rank_vec·rank_vecᵀ) + ridge·I; rank_vec sums to 1.
    pub rank_coef: f64,
    pub rank_vec: Vec<f64>,
    pub ridge: f64,
}

/// A minimiser and how it was reached.
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    pub value: f64,
    pub theta1: Vec<f64>,
    pub theta2: Vec<f64>,
    pub iterations: u32,
    pub converged: bool,
}

impl BilinearProblem {
    fn residual(&self, t1: &[f64], t2: &[f64]) -> Vec<f64> {
        let mut u = Vec::with_capacity(self.rows * self.cols);
        for (i, &a) in t1.iter().enumerate() {
            for (j, &b) in t2.iter().enumerate() {
                u.push(self.target[i * self.cols + j] - self.scale * a * b - self.offset);
            }
        }
        u
    }

    /// `S⁻¹ v` for v ⟂ 1, by Sherman–Morrison in a form that stays exact as the ridge c
    /// vanishes (bit flip at large ε: c = b rounds below k·q). With `D = k·Diag(q) + cI`,
    /// `s = 1/diag(D)`, `Σq = 1` and `Σv = 0`: `S⁻¹v = D⁻¹v + f·D⁻¹q` with
    /// `f = k·qᵀD⁻¹v / (1 − k·qᵀD⁻¹q)`. The textbook denominator cancels to
    /// `c·Σ q_j s_j`, and for c ≤ k the numerator to `−c·Σ s_j v_j` (both exact
    /// identities under the two sums); computed as written they are 0/0 in f64 once
    /// c ≲ 1e-16·k, and the statistic came out NaN at ε = 700.
    fn solve(&self, v: &[f64]) -> Vec<f64> {
        let (k, c) = (self.rank_coef, self.ridge);
        let (mut qs, mut qsv, mut sv) = (0.0, 0.0, 0.0);
        let s: Vec<f64> = self.rank_vec.iter().map(|&q| 1.0 / (k * q + c)).collect();
        for ((&sj, &q), &x) in s.iter().zip(&self.rank_vec).zip(v) {
            qs += q * sj;
            qsv += q * sj * x;
            sv += sj * x;
        }
        let numerator = if c <= k { -c * sv } else { k * qsv };
        let factor = numerator / (c * qs);
        v.iter()
            .zip(&s)
            .zip(&self.rank_vec)
            .map(|((&x, &sj), &q)| (x + factor * q) * sj)
            .collect()
    }

    /// The objective and `W u` (W = ΠS⁻¹Π).
    fn evaluate(&self, t1: &[f64], t2: &[f64]) -> (f64, Vec<f64>) {
        let u = center(&self.residual(t1, t2));
        let x = self.solve(&u);
        let value = u.iter().zip(&x).map(|(a, b)| a * b).sum();
        (value, center(&x))
    }

    #[cfg(test)]
    pub fn value(&self, t1: &[f64], t2: &[f64]) -> f64 {
        self.evaluate(t1, t2).0
    }

    /// Minimises from `(t1, t2)` (projected onto the simplices first).
    pub fn minimise(&self, t1: &[f64], t2: &[f64]) -> Fit {
        let mut t1 = project_to_simplex(t1);
        let mut t2 = project_to_simplex(t2);
        let (mut value, mut wu) = self.evaluate(&t1, &t2);
        let mut step = 1.0;
        for iteration in 1..=FIT_MAX_ITERATIONS {
            // ∂(uᵀWu)/∂θ1_i = −2a Σ_j (Wu)_ij θ2_j, and symmetrically for θ2.
            let g1: Vec<f64> = (0..self.rows)
                .map(|i| {
                    -2.0 * self.scale
                        * (0..self.cols)
                            .map(|j| wu[i * self.cols + j] * t2[j])
                            .sum::<f64>()
                })
                .collect();
            let g2: Vec<f64> = (0..self.cols)
                .map(|j| {
                    -2.0 * self.scale
                        * (0..self.rows)
                            .map(|i| wu[i * self.cols + j] * t1[i])
                            .sum::<f64>()
                })
                .collect();
            loop {
                let n1 = project_to_simplex(
                    &t1.iter()
                        .zip(&g1)
                        .map(|(x, g)| x - step * g)
                        .collect::<Vec<_>>(),
                );
                let n2 = project_to_simplex(
                    &t2.iter()
                        .zip(&g2)
                        .map(|(x, g)| x - step * g)
                        .collect::<Vec<_>>(),
                );
                let moved: f64 = n1
                    .iter()
                    .zip(&t1)
                    .chain(n2.iter().zip(&t2))
                    .map(|(a, b)| (a - b) * (a - b))
                    .sum();
                let largest = n1
                    .iter()
                    .zip(&t1)
                    .chain(n2.iter().zip(&t2))
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0, f64::max);
                let (new_value, new_wu) = self.evaluate(&n1, &n2);
                let stalled = largest < FIT_TOLERANCE * step.max(1.0);
                if new_value <= value - moved / (2.0 * step) || stalled {
                    let done = largest < FIT_TOLERANCE;
                    // A stalled step may not lower the value (rounding): then keep the
                    // point we have, so the value returned is the one attained at θ.
                    let improved = new_value <= value;
                    if improved {
                        t1 = n1;
                        t2 = n2;
                        value = new_value;
                        wu = new_wu;
                    }
                    step *= 1.5;
                    if done || !improved {
                        return Fit {
                            value,
                            theta1: t1,
                            theta2: t2,
                            iterations: iteration,
                            converged: true,
                        };
                    }
                    break;
                }
                step *= 0.5;
                if step < 1e-300 {
                    return Fit {
                        value,
                        theta1: t1,
                        theta2: t2,
                        iterations: iteration,
                        converged: false,
                    };
                }
            }
        }
        Fit {
            value,
            theta1: t1,
            theta2: t2,
            iterations: FIT_MAX_ITERATIONS,
            converged: false,
        }
    }
}

/// Row and column sums of a row-major r×c table.
pub fn margins(table: &[f64], rows: usize, cols: usize) -> (Vec<f64>, Vec<f64>) {
    let mut r = vec![0.0; rows];
    let mut c = vec![0.0; cols];
    for i in 0..rows {
        for j in 0..cols {
            r[i] += table[i * cols + j];
            c[j] += table[i * cols + j];
        }
    }
    (r, c)
}

/// Projects onto the simplex and keeps every entry at least `floor` (renormalised), so a
/// covariance built from it stays positive definite: "the open simplex" of seed 002.
pub fn into_open_simplex(v: &[f64], floor: f64) -> Vec<f64> {
    let p: Vec<f64> = project_to_simplex(v)
        .iter()
        .map(|&x| x.max(floor))
        .collect();
    let s: f64 = p.iter().sum();
    p.iter().map(|x| x / s).collect()
}

/// `vec(a bᵀ)`, row-major.
pub fn outer(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter()
        .flat_map(|&x| b.iter().map(move |&y| x * y))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// `uᵀS⁻¹u` for u ⟂ 1 against a dense nalgebra inverse at ordinary ridges, and against
    /// its exact limit `Σ u_j²/(k q_j)` as the ridge vanishes (the multinomial covariance's
    /// inverse on the sum-zero subspace), where the textbook Sherman–Morrison form was 0/0.
    #[test]
    fn solve_is_exact_from_large_to_vanishing_ridge() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(45);
        for case in 0..200 {
            let d = rng.random_range(2..21usize);
            let raw: Vec<f64> = (0..d).map(|_| rng.random::<f64>() + 0.01).collect();
            let total: f64 = raw.iter().sum();
            let q: Vec<f64> = raw.iter().map(|x| x / total).collect();
            let u = center(
                &(0..d)
                    .map(|_| rng.random::<f64>() - 0.5)
                    .collect::<Vec<_>>(),
            );
            let k = rng.random_range(1e-6..1.0);
            let problem = |ridge: f64| BilinearProblem {
                rows: 1,
                cols: d,
                target: vec![0.0; d],
                scale: 1.0,
                offset: 0.0,
                rank_coef: k,
                rank_vec: q.clone(),
                ridge,
            };
            let form = |ridge: f64| -> f64 {
                let x = problem(ridge).solve(&u);
                u.iter().zip(&x).map(|(a, b)| a * b).sum()
            };
            for ridge in [10.0, 0.2, 1e-3] {
                let qv = nalgebra::DVector::from_column_slice(&q);
                let s = nalgebra::DMatrix::from_diagonal(&qv.map(|x| k * x + ridge))
                    - &qv * qv.transpose() * k;
                let uv = nalgebra::DVector::from_column_slice(&u);
                let dense = uv.dot(&(s.try_inverse().unwrap() * &uv));
                let got = form(ridge);
                assert!(
                    (got - dense).abs() <= 1e-9 * dense.abs(),
                    "case {case}, ridge {ridge}: {got} vs dense {dense}"
                );
            }
            let limit: f64 = u.iter().zip(&q).map(|(a, p)| a * a / (k * p)).sum();
            for ridge in [1e-100, 1e-152, 1e-300] {
                let got = form(ridge);
                assert!(
                    (got - limit).abs() <= 1e-10 * limit,
                    "case {case}, ridge {ridge}: {got} vs limit {limit}"
                );
            }
        }
    }

    /// Random bit-flip-like problems (2×2 to 4×5, targets near and far from a product):
    /// the value returned must be the objective at the θ returned, bit for bit. A stalled
    /// step that raised the value used to move θ yet keep the old, smaller value.
    #[test]
    fn value_is_attained_at_the_returned_theta() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(44);
        for case in 0..300 {
            let (rows, cols) = (rng.random_range(2..5usize), rng.random_range(2..6usize));
            let d = rows * cols;
            let raw: Vec<f64> = (0..d).map(|_| rng.random::<f64>() + 0.05).collect();
            let total: f64 = raw.iter().sum();
            let p: Vec<f64> = raw.iter().map(|x| x / total).collect();
            let (scale, offset) = (rng.random_range(0.05..0.9), rng.random_range(0.05..0.4));
            let noise = if case % 3 == 0 { 1e-9 } else { 1e-2 };
            let target: Vec<f64> = p
                .iter()
                .map(|&x| scale * x + offset + noise * (rng.random::<f64>() - 0.5))
                .collect();
            let b = offset * (1.0 - offset);
            let problem = BilinearProblem {
                rows,
                cols,
                target,
                scale,
                offset,
                rank_coef: scale * scale,
                rank_vec: p,
                ridge: b,
            };
            let start1 = vec![1.0 / rows as f64; rows];
            let start2 = vec![1.0 / cols as f64; cols];
            let fit = problem.minimise(&start1, &start2);
            let at_theta = problem.value(&fit.theta1, &fit.theta2);
            assert_eq!(
                fit.value.to_bits(),
                at_theta.to_bits(),
                "case {case}: reported {} but θ attains {at_theta}",
                fit.value
            );
        }
    }
}
