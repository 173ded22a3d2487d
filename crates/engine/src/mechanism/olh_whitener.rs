//! The null covariance of OLH's support counts given the pool rows, factored once per
//! (pool, p0): the sequential test's whitened statistic on the d − 1 directions an
//! alternative can move (docs/STATISTICS.md §3.3, §10.1).
//!
//! A report (i, y) adds the support vector `z_v = [y = h_i(v)]` to the support counts.
//! Given its row i, under H0 `E[z | i] = m_i`, `m_i[v] = P_i(h_i v)`, and
//! `Cov(z | i) = A_i (diag P_i − P_i P_iᵀ) A_iᵀ` (A_i the d × g bucket assignment of row i).
//! So `C − E`, with `E_v = Σ_i n_i P_i(h_i v)` the conditional null mean OlhSupportGOF also
//! uses, is a sum of martingale differences whatever rule picks the rows (given the rows
//! the buckets are independent), and with rows drawn uniformly, as every client draws
//! them, its covariance per report is
//!
//! ```text
//! Σ̄ = (1/S) Σ_i Cov(z | i) = B − (1/S) Σ_i m_i m_iᵀ,   B[v, w] = (1/S) Σ_i [h_i v = h_i w] P_i(h_i v).
//! ```
//!
//! Conditioning on the rows removes the between-row spread of `m_i` from the noise (it is
//! ancillary) and keeps the mean exact for any row rule. An alternative `p1 = p0 + Δ`
//! (`1ᵀΔ = 0`) moves the drift by `(p − q)·CΔ`, which lies in the hyperplane `u⊥`,
//! `u = C⁻¹1`: the sum-to-one direction carries noise and no signal. The statistic is the
//! likelihood ratio's for a Gaussian mean in that hyperplane,
//!
//! ```text
//! T = xᵀΣ̄⁻¹x − (uᵀx)²/(uᵀΣ̄u),   x = (C − E)/√n,
//! ```
//!
//! asymptotically χ²_{d−1} under H0 (d − 1 directions, not the pool's S·g cells). Σ̄ depends
//! on (pool, g, ε, p0) only, so its Cholesky factor is built once and a snapshot costs one
//! triangular solve, O(d²), beside the O(S·d) gather of `C − E`.

use nalgebra::{Cholesky, DMatrix, DVector};

use super::olh_solver::{bucket_members, row_buckets, PoolChannel};

/// A pivot of Σ̄'s factor (a squared diagonal entry) below this share of Σ̄'s largest
/// diagonal entry says the support counts are (nearly) confined to fewer than d
/// directions: at `d = S(g − 1) + 1` exactly, for one, Σ̄ has rank d − 1.
const MIN_RELATIVE_PIVOT: f64 = 1e-10;

/// The factored null covariance of one (pool, p0).
pub struct SupportWhitener {
    d: usize,
    /// Σ̄'s lower Cholesky factor L, column-major d × d (the strict upper part is not read).
    factor: Vec<f64>,
    /// `P_i(y)`, row-major S × g.
    laws: Vec<f64>,
    /// `u = C⁻¹1`, the direction no alternative moves.
    u: Vec<f64>,
    /// `uᵀΣ̄u`.
    u_variance: f64,
}

impl std::fmt::Debug for SupportWhitener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SupportWhitener")
            .field("d", &self.d)
            .field("u_variance", &self.u_variance)
            .finish()
    }
}

impl SupportWhitener {
    /// Builds Σ̄ for `p0` (S·d²/g additions for B, an S·d² product for the means) and
    /// factors it (d³/3). `u = C⁻¹1` is the pool solver's. Err: why Σ̄ cannot be factored.
    pub fn new(olh: &impl PoolChannel, u: &[f64], p0: &[f64]) -> Result<Self, String> {
        let d = olh.domain() as usize;
        let (g, s) = (olh.g() as usize, olh.pool().len());
        if p0.len() != d || u.len() != d {
            return Err(format!(
                "the null has {} categories and the pool {d}",
                p0.len()
            ));
        }
        let (q, gap) = (olh.q(), olh.p_minus_q());
        let mut laws = vec![0.0; s * g];
        // Column i holds m_i.
        let mut means = DMatrix::<f64>::zeros(d, s);
        let mut sigma = DMatrix::<f64>::zeros(d, d);
        let (mut buckets, mut start, mut members) =
            (vec![0u32; d], vec![0usize; g + 1], vec![0u32; d]);
        for (i, (&(a, b), law)) in olh.pool().iter().zip(laws.chunks_exact_mut(g)).enumerate() {
            row_buckets(a, b, olh.g(), &mut buckets);
            for (&y, &px) in buckets.iter().zip(p0) {
                law[y as usize] += px;
            }
            law.iter_mut().for_each(|l| *l = q + gap * *l);
            for (m, &y) in means.column_mut(i).iter_mut().zip(&buckets) {
                *m = law[y as usize];
            }
            bucket_members(&buckets, g, &mut start, &mut members);
            // B is symmetric, so column-major storage can be filled row by row.
            let cells = sigma.as_mut_slice();
            for (y, &weight) in law.iter().enumerate() {
                let bucket = &members[start[y]..start[y + 1]];
                for &v in bucket {
                    let row = &mut cells[v as usize * d..(v as usize + 1) * d];
                    for &x in bucket {
                        row[x as usize] += weight;
                    }
                }
            }
        }
        sigma.gemm(-1.0, &means, &means.transpose(), 1.0);
        sigma /= s as f64;
        let uv = DVector::from_column_slice(u);
        let u_variance = uv.dot(&(&sigma * &uv));
        let largest = (0..d).map(|v| sigma[(v, v)]).fold(0.0f64, f64::max);
        let degenerate = || {
            format!(
                "the support counts' null covariance is singular for this pool (pool_seed {}, \
                 pool_size {s}, g = {g}, d = {d}): the whitened sequential statistic needs \
                 d = {d} < pool_size × (g − 1) + 1",
                olh.pool_seed()
            )
        };
        let cholesky = Cholesky::new(sigma).ok_or_else(degenerate)?;
        let smallest = (0..d)
            .map(|v| cholesky.l_dirty()[(v, v)].powi(2))
            .fold(f64::INFINITY, f64::min);
        if smallest.is_nan()
            || smallest < MIN_RELATIVE_PIVOT * largest
            || !(u_variance > 0.0 && u_variance.is_finite())
        {
            return Err(degenerate());
        }
        Ok(SupportWhitener {
            d,
            factor: cholesky.unpack_dirty().as_slice().to_vec(),
            laws,
            u: u.to_vec(),
            u_variance,
        })
    }

    /// ν of the whitened statistic: d − 1.
    pub fn df(&self) -> u32 {
        u32::try_from(self.d - 1).unwrap_or(u32::MAX)
    }

    /// The bytes this factor holds: L (d² doubles), the S × g row laws and u.
    pub fn heap_bytes(&self) -> u64 {
        ((self.factor.len() + self.laws.len() + self.u.len()) * 8) as u64
    }

    /// `T[i, y] − n_i P_i(y)` of a table (row-major S × g): gathered over each v's bucket,
    /// it is `C_v − E_v`.
    pub fn residual_table(&self, table: &[u64], g: usize) -> Vec<f64> {
        let mut residual = Vec::with_capacity(table.len());
        for (row, law) in table.chunks_exact(g).zip(self.laws.chunks_exact(g)) {
            let total: u64 = row.iter().sum();
            let nf = total as f64;
            residual.extend(row.iter().zip(law).map(|(&c, &pr)| c as f64 - nf * pr));
        }
        residual
    }

    /// `T = xᵀΣ̄⁻¹x − (uᵀx)²/(uᵀΣ̄u)`, `x = (C − E)/√n`, from `C − E` (see
    /// [`SupportWhitener::residual_table`]); 0 for an empty window. A forward substitution
    /// through L gives `|L⁻¹x|² = xᵀΣ̄⁻¹x`.
    pub fn statistic(&self, residual: &[f64], n: u64) -> f64 {
        if n == 0 {
            return 0.0;
        }
        let d = self.d;
        let scale = 1.0 / (n as f64).sqrt();
        let mut y: Vec<f64> = residual.iter().map(|r| r * scale).collect();
        let along: f64 = self.u.iter().zip(&y).map(|(u, x)| u * x).sum();
        let mut whitened = 0.0;
        for (j, column) in self.factor.chunks_exact(d).enumerate() {
            let yj = y[j] / column[j];
            whitened += yj * yj;
            for (yk, &l) in y[j + 1..].iter_mut().zip(&column[j + 1..]) {
                *yk -= l * yj;
            }
        }
        (whitened - along * along / self.u_variance).max(0.0)
    }
}
