use rand::Rng;

use super::row_strata::RowMeans;
use super::Estimate;
use crate::error::EngineError;
use crate::sketch::SignedSketch;

/// Hadamard response (Bassily et al. 2017, Sheffet §4): each user draws a public row
/// `j ∈ [K]` (K the smallest power of two ≥ d) and reports `y = H[j, x]` with probability
/// `e^ε/(1+e^ε)`, else `−H[j, x]`, where `H[j, x] = (−1)^{popcount(j & x)}`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hadamard {
    epsilon: f64,
    domain: u32,
    rows: u32,
}

impl Hadamard {
    pub fn new(epsilon: f64, domain: u32) -> Result<Self, EngineError> {
        super::check_epsilon(epsilon)?;
        super::check_domain(domain)?;
        Ok(Hadamard {
            epsilon,
            domain,
            rows: domain.next_power_of_two(),
        })
    }

    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    pub fn domain(&self) -> u32 {
        self.domain
    }

    /// K, the number of public rows.
    pub fn rows(&self) -> u32 {
        self.rows
    }

    /// `H[j, x]`.
    #[inline]
    pub fn entry(j: u32, x: u32) -> i8 {
        if (j & x).count_ones().is_multiple_of(2) {
            1
        } else {
            -1
        }
    }

    /// `η = (e^ε−1)/(2(e^ε+1)) = tanh(ε/2)/2`: `E[θ] = 2η p`.
    pub fn eta(&self) -> f64 {
        super::sign_eta(self.epsilon)
    }

    /// `1 − 2η`, the sign's lie probability times two, without the cancellation that
    /// makes `1 − 2η` exactly 0 in f64 from ε ≈ 37.
    pub fn one_minus_two_eta(&self) -> f64 {
        2.0 * super::sign_lie(self.epsilon)
    }

    /// Privatizes `x` with the thread's generator (tests only: rand 0.9 does not reseed it
    /// on fork; real reports draw from [`super::client_rng`]): (row, ±1).
    #[cfg(test)]
    pub fn randomize(&self, x: u32) -> Result<(u32, i8), EngineError> {
        self.randomize_with(x, &mut rand::rng())
    }

    /// Privatizes `x` with a caller-supplied generator (seeded only for simulation).
    pub fn randomize_with<R: Rng + ?Sized>(
        &self,
        x: u32,
        rng: &mut R,
    ) -> Result<(u32, i8), EngineError> {
        super::check_input(x, self.domain)?;
        let j = rng.random_range(0..self.rows);
        let truth = Self::entry(j, x);
        // Exact, so that the lie stays possible (and the report ε-LDP) at large ε.
        let keep = !super::bernoulli_exact(rng, super::sign_lie(self.epsilon));
        Ok((j, if keep { truth } else { -truth }))
    }

    /// `θ = (1/n) Hᵀ signed`, restricted to the first d coordinates: one fast
    /// Walsh–Hadamard transform.
    pub fn theta(&self, signed: &[f64], n: u64) -> Vec<f64> {
        let mut v = signed.to_vec();
        fwht(&mut v);
        let nf = (n as f64).max(1.0);
        v.truncate(self.domain as usize);
        v.iter_mut().for_each(|t| *t /= nf);
        v
    }

    /// `p̂ = θ/(2η)`, with standard error `sqrt((1 − θ²)/n)/(2η)`: each report adds a ±1
    /// term with mean θ to every coordinate.
    pub fn estimate(&self, signed: &[f64], n: u64) -> Estimate {
        if n == 0 {
            return Estimate::default();
        }
        let theta = self.theta(signed, n);
        let two_eta = 2.0 * self.eta();
        let nf = n as f64;
        let (estimate, std_error) = theta
            .iter()
            .map(|&t| (t / two_eta, ((1.0 - t * t).max(0.0) / nf).sqrt() / two_eta))
            .unzip();
        Estimate {
            estimate,
            std_error,
        }
    }
}

impl Hadamard {
    /// The estimate from each row's own sign mean (`super::row_strata`), unbiased however
    /// the rows were drawn: `p̂ = (1/(2ηK)) (H m)_{0..d}` with one standard error for every
    /// category, `√(Σ_r v_r)/(2ηK)`. Falls back to [`Hadamard::estimate`] while a row has no
    /// report.
    pub fn estimate_by_rows(&self, sketch: &SignedSketch) -> Estimate {
        let rows = RowMeans::of(sketch.plus(), sketch.minus())
            .filter(|r| r.means.len() == self.rows() as usize);
        let Some(rows) = rows else {
            return self.estimate(&sketch.signed(), sketch.n());
        };
        let k = rows.means.len() as f64;
        let two_eta_k = 2.0 * self.eta() * k;
        let mut v = rows.means;
        fwht(&mut v);
        v.truncate(self.domain as usize);
        let se = rows.variances.iter().sum::<f64>().sqrt() / two_eta_k;
        Estimate {
            std_error: vec![se; v.len()],
            estimate: v.iter().map(|t| t / two_eta_k).collect(),
        }
    }
}

/// In-place unnormalized fast Walsh–Hadamard transform (`v ← H v`, H symmetric, entries
/// ±1); `v.len()` must be a power of two.
pub fn fwht(v: &mut [f64]) {
    let n = v.len();
    let mut h = 1;
    while h < n {
        for block in v.chunks_exact_mut(2 * h) {
            let (a, b) = block.split_at_mut(h);
            for (x, y) in a.iter_mut().zip(b.iter_mut()) {
                let (s, t) = (*x + *y, *x - *y);
                *x = s;
                *y = t;
            }
        }
        h *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fwht_matches_dense() {
        let v: Vec<f64> = (0..8).map(|i| (i * i) as f64 - 3.0).collect();
        let mut fast = v.clone();
        fwht(&mut fast);
        for (j, f) in fast.iter().enumerate() {
            let dense: f64 = (0..8)
                .map(|x| f64::from(Hadamard::entry(j as u32, x as u32)) * v[x])
                .sum();
            assert_eq!(*f, dense);
        }
    }
}
