use nalgebra::DMatrix;
use rand::Rng;

use super::Estimate;
use crate::error::EngineError;

/// A generic symmetric signalling scheme (Sheffet §3): any column-stochastic |S|×d matrix
/// G with `G[s][x] = P(signal s | type x)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Channel {
    g: DMatrix<f64>,
    /// Moore–Penrose pseudo-inverse (d×|S|): `p̂ = G⁺ q` is unbiased when G has full
    /// column rank, and the minimum-norm least-squares fit otherwise.
    pinv: DMatrix<f64>,
    /// Per type, the cumulative column, for sampling.
    cumulative: Vec<Vec<f64>>,
}

impl Channel {
    /// `rows[s][x]`; the config validated that every column sums to 1.
    pub fn new(rows: &[Vec<f64>]) -> Result<Self, EngineError> {
        let s = rows.len();
        let d = rows.first().map_or(0, Vec::len);
        if s == 0 || d < 2 || rows.iter().any(|r| r.len() != d) {
            return Err(EngineError::invalid(
                "matrix",
                format!("{s} rows"),
                "a rectangular matrix with at least one row and two columns",
            ));
        }
        let g = DMatrix::from_fn(s, d, |i, j| rows[i][j]);
        let pinv = g
            .clone()
            .pseudo_inverse(1e-12)
            .map_err(|e| EngineError::invalid("matrix", e, "a matrix with a pseudo-inverse"))?;
        let cumulative = (0..d)
            .map(|x| {
                let mut acc = 0.0;
                (0..s)
                    .map(|si| {
                        acc += g[(si, x)];
                        acc
                    })
                    .collect()
            })
            .collect();
        Ok(Channel {
            g,
            pinv,
            cumulative,
        })
    }

    pub fn signals(&self) -> usize {
        self.g.nrows()
    }

    pub fn domain(&self) -> u32 {
        self.g.ncols() as u32
    }

    pub fn entry(&self, s: usize, x: usize) -> f64 {
        self.g[(s, x)]
    }

    /// The local privacy the channel gives: `max_s max_{x,x'} ln G[s][x]/G[s][x']`
    /// (infinite when a signal is possible for one type and impossible for another).
    pub fn epsilon(&self) -> f64 {
        let mut worst: f64 = 0.0;
        for row in self.g.row_iter() {
            let (lo, hi) = row.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &v| {
                (lo.min(v), hi.max(v))
            });
            if hi > 0.0 {
                worst = worst.max((hi / lo).ln());
            }
        }
        worst
    }

    /// Privatizes `x` with the thread's generator (tests only: rand 0.9 does not reseed it
    /// on fork; real reports draw from [`super::client_rng`]).
    #[cfg(test)]
    pub fn randomize(&self, x: u32) -> Result<u32, EngineError> {
        self.randomize_with(x, &mut rand::rng())
    }

    /// Privatizes `x` with a caller-supplied generator (seeded only for simulation).
    pub fn randomize_with<R: Rng + ?Sized>(&self, x: u32, rng: &mut R) -> Result<u32, EngineError> {
        super::check_input(x, self.domain())?;
        let u: f64 = rng.random();
        let column = &self.cumulative[x as usize];
        // Rounding can leave the last cumulative entry a hair under 1: fall back to the
        // last signal with positive probability.
        let s = column.iter().position(|&c| u < c).unwrap_or_else(|| {
            (0..self.signals())
                .rev()
                .find(|&s| self.g[(s, x as usize)] > 0.0)
                .unwrap_or(0)
        });
        Ok(s as u32)
    }

    /// `G p`: the signal law under type law p.
    pub fn signal_law(&self, p: &[f64]) -> Vec<f64> {
        (&self.g * nalgebra::DVector::from_column_slice(p))
            .iter()
            .copied()
            .collect()
    }

    /// `Gᵀ w`.
    pub fn adjoint(&self, w: &[f64]) -> Vec<f64> {
        (self.g.transpose() * nalgebra::DVector::from_column_slice(w))
            .iter()
            .copied()
            .collect()
    }

    /// `p̂ = G⁺ q` with `q = counts/n`; standard errors from
    /// `Cov(p̂) = G⁺ (Diag(q) − qqᵀ) G⁺ᵀ / n`.
    pub fn estimate(&self, counts: &[u64], n: u64) -> Estimate {
        if n == 0 {
            return Estimate::default();
        }
        let nf = n as f64;
        let q =
            nalgebra::DVector::from_iterator(counts.len(), counts.iter().map(|&c| c as f64 / nf));
        let p = &self.pinv * &q;
        let std_error = (0..self.pinv.nrows())
            .map(|x| {
                let second: f64 = (0..q.len()).map(|s| self.pinv[(x, s)].powi(2) * q[s]).sum();
                ((second - p[x] * p[x]).max(0.0) / nf).sqrt()
            })
            .collect();
        Estimate {
            estimate: p.iter().copied().collect(),
            std_error,
        }
    }
}
