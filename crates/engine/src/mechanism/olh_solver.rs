//! OLH's exactly unbiased pool estimate and its exact covariance (docs/STATISTICS.md §1.8).
//!
//! With a fixed pool, `E[C_v/n] = q + (p − q)(Cπ)_v`, C[v, x] the share of pool entries
//! where `h_i(v) = h_i(x)`. The plain estimate `(C_v/n − 1/g)/(p − 1/g)` treats C as its
//! fresh-hash mean `(1 − 1/g)I + 11ᵀ/g`, and is biased by a term that does not shrink with
//! n. Solving with the pool's own C removes it: `π̂ = C⁻¹(f − q1)/(p − q)`, `f = C/n`, has
//! `E[π̂] = π` at every n. C depends on the pool alone (seed, S, g, d), never on the data,
//! so it is factored once per config and kept as `W = C⁻¹`; a snapshot is then one d × d
//! product. Nothing here is persisted: recomputing it is exact.

use nalgebra::{Cholesky, DMatrix};

use super::Estimate;

/// What the solver reads of an OLH mechanism: its hash pool and its GRR's probabilities.
/// A trait (implemented by [`super::olh::Olh`]) so that the mechanism, which holds its
/// solver, and the solver do not depend on each other.
pub trait PoolChannel {
    fn domain(&self) -> u32;
    /// The hash range g.
    fn g(&self) -> u32;
    fn pool(&self) -> &[(u64, u64)];
    fn pool_seed(&self) -> u64;
    /// The probability of a given wrong bucket.
    fn q(&self) -> f64;
    fn p_minus_q(&self) -> f64;
}

/// The most `2·S·d²` steps the exact variance table M may cost once per config (a few
/// seconds on one core); above it the standard errors use the fresh-hash variance scaled
/// by the pool's own `W_vv` (within 0.98–1.04 of exact at d ≥ 256).
pub const OLH_EXACT_VARIANCE_WORK: u64 = 1 << 33;

/// A Cholesky pivot (a squared diagonal entry of C's factor) below this says the pool
/// does not identify the frequencies (an empty bucket lowers the rank below S(g − 1) + 1),
/// or so barely that the estimate's variance would be useless.
const MIN_PIVOT: f64 = 1e-10;

/// The pool's collision inverse and what a snapshot needs from it.
pub struct PoolSolver {
    d: usize,
    /// `W = C⁻¹`, d × d (symmetric; row v is W's row v).
    w: Vec<f64>,
    /// `u = W·1`.
    u: Vec<f64>,
    /// `M[v, x] = (1/S) Σ_i G_i[v, h_i(x)]²` with `G_i[v, y] = Σ_{w: h_i(w) = y} W[v, w]`:
    /// `(Mπ)_v` is the `Σ_x π_x (W D_x W)_vv` term of the exact variance. None above
    /// [`OLH_EXACT_VARIANCE_WORK`].
    m: Option<Vec<f64>>,
    /// `g/(g − 1)·max_{x≠v} |C[v, x] − 1/g|`: a bound on the plain estimate's bias.
    bias_bound: f64,
    /// `mean_v W_vv / W̄_vv`: the estimate's variance against fresh hashes at a uniform π.
    variance_factor: f64,
}

impl std::fmt::Debug for PoolSolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolSolver")
            .field("d", &self.d)
            .field("exact_variance", &self.m.is_some())
            .field("bias_bound", &self.bias_bound)
            .field("variance_factor", &self.variance_factor)
            .finish()
    }
}

/// Every v's bucket under one pool entry, by the support loop's incremental key.
pub(super) fn row_buckets(a: u64, b: u64, g: u32, out: &mut [u32]) {
    let g = u64::from(g);
    let mut key = b;
    for bucket in out.iter_mut() {
        *bucket = (((key >> 32) * g) >> 32) as u32;
        key = key.wrapping_add(a);
    }
}

/// The categories of each bucket, in order: `members[start[y]..start[y + 1]]`.
pub(super) fn bucket_members(buckets: &[u32], g: usize, start: &mut [usize], members: &mut [u32]) {
    start.iter_mut().for_each(|s| *s = 0);
    for &y in buckets {
        start[y as usize + 1] += 1;
    }
    for y in 0..g {
        start[y + 1] += start[y];
    }
    let mut next = start[..g].to_vec();
    for (v, &y) in buckets.iter().enumerate() {
        members[next[y as usize]] = v as u32;
        next[y as usize] += 1;
    }
}

/// `a = 1 − 1/g`, `c = b/(a + b·d)` with `b = 1/g`: fresh hashes' `C̄ = aI + b11ᵀ` has
/// `C̄⁻¹ = (I − c11ᵀ)/a`.
fn fresh_inverse(g: f64, d: f64) -> (f64, f64) {
    let (a, b) = (1.0 - 1.0 / g, 1.0 / g);
    (a, b / (a + b * d))
}

impl PoolSolver {
    /// Builds C from bucket pairs (S·d²/g additions), factors it, and keeps `W = C⁻¹`, its
    /// row sums, and the exact variance table when affordable. Err: why the pool cannot
    /// give the estimate (for the record's `estimate_omitted`).
    pub fn new(olh: &impl PoolChannel) -> Result<Self, String> {
        let d = olh.domain() as usize;
        let (g, s) = (olh.g() as usize, olh.pool().len());
        let limit = ldpstream_config::OLH_MAX_DENSE_DOMAIN;
        if olh.domain() > limit {
            return Err(format!(
                "d = {d} categories > {limit}: the pool's exactly unbiased estimate needs its \
                 d × d collision inverse ({} MiB); `estimate_plain` carries the plain \
                 estimate, which the pool biases (docs/STATISTICS.md §1.8)",
                (d * d * 8) >> 20
            ));
        }
        // The config refuses such pools; mechanisms built directly (plan, audit, clients'
        // conformance) may still have them, and only lose the estimate.
        let identifiable = ldpstream_config::olh_identifiable_domain(olh.g(), s as u32);
        if d as u64 > identifiable {
            return Err(format!(
                "pool_size {s} × (g − 1 = {}) + 1 = {identifiable} < domain {d}: the pool \
                 cannot tell the categories' frequencies apart (docs/STATISTICS.md §1.8)",
                g - 1
            ));
        }
        let mut counts = DMatrix::<f64>::zeros(d, d);
        let (mut buckets, mut start, mut members) =
            (vec![0u32; d], vec![0usize; g + 1], vec![0u32; d]);
        for &(a, b) in olh.pool() {
            row_buckets(a, b, olh.g(), &mut buckets);
            bucket_members(&buckets, g, &mut start, &mut members);
            let cells = counts.as_mut_slice();
            for y in 0..g {
                let bucket = &members[start[y]..start[y + 1]];
                for &v in bucket {
                    let row = &mut cells[v as usize * d..(v as usize + 1) * d];
                    for &x in bucket {
                        row[x as usize] += 1.0;
                    }
                }
            }
        }
        let scale = 1.0 / s as f64;
        let inv_g = 1.0 / g as f64;
        let mut worst = 0.0f64;
        for (k, c) in counts.as_mut_slice().iter_mut().enumerate() {
            *c *= scale;
            if k / d != k % d {
                worst = worst.max((*c - inv_g).abs());
            }
        }
        let bias_bound = worst * g as f64 / (g as f64 - 1.0);
        let singular = || {
            format!(
                "the pool (pool_seed {}, pool_size {s}, g = {g}) does not identify {d} \
                 categories: its collision matrix is singular (some bucket of some pool entry \
                 is empty); choose another pool_seed or a larger pool_size",
                olh.pool_seed()
            )
        };
        let cholesky = Cholesky::new(counts).ok_or_else(singular)?;
        let smallest = (0..d)
            .map(|v| cholesky.l_dirty()[(v, v)].powi(2))
            .fold(f64::INFINITY, f64::min);
        if smallest.is_nan() || smallest < MIN_PIVOT {
            return Err(singular());
        }
        // C is symmetric, so its inverse's column-major storage is also row-major.
        let w = cholesky.inverse().as_slice().to_vec();
        let u: Vec<f64> = w.chunks_exact(d).map(|row| row.iter().sum()).collect();
        let (a, c) = fresh_inverse(g as f64, d as f64);
        let fresh_diag = (1.0 - c) / a;
        let variance_factor = (0..d).map(|v| w[v * d + v]).sum::<f64>() / (d as f64 * fresh_diag);
        let work = 2u64.saturating_mul(s as u64).saturating_mul((d * d) as u64);
        let m = (work <= OLH_EXACT_VARIANCE_WORK).then(|| variance_table(olh, &w));
        Ok(PoolSolver {
            d,
            w,
            u,
            m,
            bias_bound,
            variance_factor,
        })
    }

    /// The plain estimate's bias bound, `g/(g − 1)·max_{x≠v} |C[v, x] − 1/g|`.
    pub fn bias_bound(&self) -> f64 {
        self.bias_bound
    }

    /// The pool estimate's variance against fresh hashes (mean over categories at a
    /// uniform π; docs/STATISTICS.md §1.8: about 1/(1 − γ)).
    pub fn variance_factor(&self) -> f64 {
        self.variance_factor
    }

    /// Whether the standard errors are exact (the M table was affordable).
    pub fn exact_variance(&self) -> bool {
        self.m.is_some()
    }

    /// The bytes this solver holds: W, and M when kept.
    pub fn heap_bytes(&self) -> u64 {
        let square = (self.d * self.d * 8) as u64;
        square * if self.m.is_some() { 2 } else { 1 }
    }

    /// `W·x`.
    pub fn apply(&self, x: &[f64]) -> Vec<f64> {
        self.w
            .chunks_exact(self.d)
            .map(|row| row.iter().zip(x).map(|(w, x)| w * x).sum())
            .collect()
    }

    /// `u = W·1 = C⁻¹1`.
    pub fn row_sums(&self) -> &[f64] {
        &self.u
    }

    /// The unbiased estimate `π̂ = W(f − q1)/(p − q)` from the support counts and its
    /// standard errors (see [`PoolSolver::report_variance`], π plugged in as π̂).
    pub fn estimate(&self, olh: &impl PoolChannel, supports: &[u64], n: u64) -> Estimate {
        if n == 0 {
            return Estimate::default();
        }
        let nf = n as f64;
        let (q, gap) = (olh.q(), olh.p_minus_q());
        let centred: Vec<f64> = supports.iter().map(|&c| c as f64 / nf - q).collect();
        let estimate: Vec<f64> = self.apply(&centred).iter().map(|x| x / gap).collect();
        let std_error = self
            .report_variance(olh, &estimate)
            .iter()
            .map(|&s| (s.max(0.0) / nf).sqrt())
            .collect();
        Estimate {
            estimate,
            std_error,
        }
    }

    /// `n·Var(π̂_v)` at type law π: exactly, `(q·W_vv + (p − q)(Mπ)_v − (q·u_v +
    /// (p − q)π_v)²)/(p − q)²` (docs/STATISTICS.md §1.8); π's negative entries (a plug-in
    /// estimate's) count as 0 in the M term, a sum of non-negative parts. Above the work
    /// bound, [`PoolSolver::scaled_fresh_variance`].
    pub fn report_variance(&self, olh: &impl PoolChannel, pi: &[f64]) -> Vec<f64> {
        let d = self.d;
        let (q, gap) = (olh.q(), olh.p_minus_q());
        let clipped: Vec<f64> = pi.iter().map(|&x| x.max(0.0)).collect();
        match &self.m {
            Some(m) => m
                .chunks_exact(d)
                .enumerate()
                .map(|(v, row)| {
                    let mpi: f64 = row.iter().zip(&clipped).map(|(m, p)| m * p).sum();
                    let wf = q * self.u[v] + gap * pi[v];
                    (q * self.w[v * d + v] + gap * mpi - wf * wf) / (gap * gap)
                })
                .collect(),
            None => self.scaled_fresh_variance(olh, &clipped),
        }
    }

    /// Per report and over (p − q)², the fresh-hash variance of this estimator at π
    /// (`diag(W̄ S̄ W̄)` in closed form, O(d): `C̄ = aI + b11ᵀ`, the three-way collisions'
    /// mean `P̄`), times the pool's `W_vv/W̄_vv`. Within 0.98–1.04 of exact at d ≥ 256
    /// (0.98–1.08 at d = 16 with mass on one category).
    pub(crate) fn scaled_fresh_variance(&self, olh: &impl PoolChannel, pi: &[f64]) -> Vec<f64> {
        let (q, gap) = (olh.q(), olh.p_minus_q());
        let d = self.d;
        let (gf, df) = (f64::from(olh.g()), d as f64);
        let (a, c) = fresh_inverse(gf, df);
        let b = 1.0 / gf;
        let k = b - b * b;
        let s: f64 = pi.iter().sum();
        let mu: Vec<f64> = pi.iter().map(|&p| q + gap * (a * p + b * s)).collect();
        let mu_sum: f64 = mu.iter().sum();
        // S̄ = q·C̄ + (p − q)·P̄ − μ̄μ̄ᵀ: its diagonal and row sums.
        let (diag, rows): (Vec<f64>, Vec<f64>) = pi
            .iter()
            .zip(&mu)
            .map(|(&p, &m)| {
                let p_diag = p + (s - p) * b;
                let p_row = p_diag + k * ((df - 1.0) * p + s - p) + (df - 1.0) * s * b * b;
                (
                    q + gap * p_diag - m * m,
                    q * (a + b * df) + gap * p_row - m * mu_sum,
                )
            })
            .unzip();
        let total: f64 = rows.iter().sum();
        let fresh_diag = (1.0 - c) / a;
        (0..d)
            .map(|v| {
                let fresh = (diag[v] - 2.0 * c * rows[v] + c * c * total) / (a * a);
                fresh / (gap * gap) * self.w[v * d + v] / fresh_diag
            })
            .collect()
    }
}

/// M (see [`PoolSolver`]): for each pool entry, each row of W summed by bucket, then the
/// squares gathered back per category. 2·S·d² steps, d² doubles.
fn variance_table(olh: &impl PoolChannel, w: &[f64]) -> Vec<f64> {
    let d = olh.domain() as usize;
    let g = olh.g() as usize;
    let mut m = vec![0.0; d * d];
    let mut buckets = vec![0u32; d];
    let mut sums = vec![0.0; g];
    for &(a, b) in olh.pool() {
        row_buckets(a, b, olh.g(), &mut buckets);
        for (wrow, mrow) in w.chunks_exact(d).zip(m.chunks_exact_mut(d)) {
            sums.iter_mut().for_each(|s| *s = 0.0);
            for (&y, &x) in buckets.iter().zip(wrow) {
                sums[y as usize] += x;
            }
            for (&y, out) in buckets.iter().zip(mrow.iter_mut()) {
                let s = sums[y as usize];
                *out += s * s;
            }
        }
    }
    let scale = 1.0 / olh.pool().len() as f64;
    m.iter_mut().for_each(|x| *x *= scale);
    m
}

#[cfg(test)]
mod tests {
    use crate::mechanism::olh::Olh;

    /// d = 16, g = 4, S = 64, pool seed 3, ε = 1, the table `T[i, y] = 100 + (37i + 11y)
    /// mod 23`: π̂ and its exact standard errors against numpy/scipy
    /// (`scipy.linalg.cho_solve(cho_factor(C), I)` for W, and the variance from the
    /// three-way collision tensor `D_x` itself, `diag(W D_x W)`, not from bucket sums:
    /// `q·diag(W) + (p−q)·M·max(π̂, 0) − (q·W1 + (p−q)π̂)²` over `(p−q)²·n`).
    #[test]
    fn known_values() {
        let m = Olh::new(1.0, 16, 4, 64, 3).unwrap();
        let table: Vec<u64> = (0..64u64)
            .flat_map(|i| (0..4u64).map(move |y| 100 + (i * 37 + y * 11) % 23))
            .collect();
        let n: u64 = table.iter().sum();
        assert_eq!(n, 28_410);
        let e = m.estimate_from_supports(&m.supports(&table), n).unwrap();
        for (v, (got, want)) in e.estimate.iter().zip(PI_HAT).enumerate() {
            assert!((got - want).abs() < 1e-12, "π̂[{v}] {got} {want}");
        }
        for (v, (got, want)) in e.std_error.iter().zip(STD_ERROR).enumerate() {
            assert!((got / want - 1.0).abs() < 1e-10, "se[{v}] {got} {want}");
        }
        let bound = m.solver().unwrap().bias_bound();
        assert!((bound - 0.208_333_333_333_333_34).abs() < 1e-15, "{bound}");
    }

    const PI_HAT: [f64; 16] = [
        0.049394499098717994,
        0.07218909698678166,
        0.060559388547911215,
        0.06903551992527092,
        0.03933792287653618,
        0.041608439928754,
        0.04761846141412242,
        0.04141188096285431,
        0.0463508799726219,
        0.03009833213413795,
        0.04541803431842029,
        0.03895088043272904,
        0.06759687811765748,
        0.05961962151476284,
        0.07038021995750544,
        0.0637472044556204,
    ];
    const STD_ERROR: [f64; 16] = [
        0.0113556480543672,
        0.011397531890981874,
        0.011773657945329485,
        0.011486895835365257,
        0.011140590458257769,
        0.011618941536457272,
        0.011650831466810911,
        0.011801966736516869,
        0.01160915622265276,
        0.011719136935627964,
        0.011666005883693919,
        0.011520100146637981,
        0.011741697384123631,
        0.01163937717301437,
        0.011334328033051747,
        0.01118480939948626,
    ];

    /// Exactly unbiased: fed the pool's exact mean of C_v/n for a skewed π (from the row
    /// laws, `(1/S) Σ_i P_i(h_i(v))`), the solve returns π itself.
    #[test]
    fn the_mean_of_the_supports_solves_to_pi() {
        for (epsilon, d, s) in [(1.0, 16u32, 64u32), (2.0, 100, 256), (0.5, 40, 1024)] {
            let m = Olh::new(epsilon, d, ldpstream_config::olh_default_g(epsilon), s, 7).unwrap();
            let total = f64::from(d * (d + 1) / 2);
            let pi: Vec<f64> = (0..d).map(|j| f64::from(d - j) / total).collect();
            let mu: Vec<f64> = m
                .gather(&m.row_laws(&pi))
                .iter()
                .map(|x| x / f64::from(s) - m.q())
                .collect();
            let solver = m.solver().unwrap();
            let back: Vec<f64> = solver
                .apply(&mu)
                .iter()
                .map(|x| x / m.p_minus_q())
                .collect();
            for (v, (b, p)) in back.iter().zip(&pi).enumerate() {
                assert!((b - p).abs() < 1e-11, "ε {epsilon} d {d}: π[{v}] {b} {p}");
            }
        }
    }

    /// Above the work bound the standard errors come from the fresh-hash variance scaled
    /// by `W_vv/W̄_vv`: at d = 256, g = 8, S = 1024 it is within 0.95–1.06 of the exact
    /// M-table value for uniform, Zipf and one-heavy-category laws (the notes measured
    /// 0.98–1.04). The variance factor at γ = 255/7168 ≈ 0.036 is about 1/(1 − γ).
    #[test]
    fn the_large_d_variance_tracks_the_exact_one() {
        let m = Olh::new(2.0, 256, 8, 1024, 0).unwrap();
        let solver = m.solver().unwrap();
        assert!(solver.exact_variance());
        let d = 256usize;
        let zipf: Vec<f64> = (1..=d).map(|k| (k as f64).powf(-1.1)).collect();
        let mut heavy = vec![1.0; d];
        heavy[0] = 50.0;
        for law in [vec![1.0; d], zipf, heavy] {
            let total: f64 = law.iter().sum();
            let pi: Vec<f64> = law.iter().map(|x| x / total).collect();
            let exact = solver.report_variance(&m, &pi);
            let approx = solver.scaled_fresh_variance(&m, &pi);
            for (v, (a, e)) in approx.iter().zip(&exact).enumerate() {
                let r = a / e;
                assert!((0.95..=1.06).contains(&r), "category {v}: {a} / {e} = {r}");
            }
        }
        let factor = solver.variance_factor();
        let mp = ldpstream_config::olh_variance_factor_estimate(256, 8, 1024);
        assert!((factor / mp - 1.0).abs() < 0.03, "{factor} {mp}");
    }

    /// A pool that passes the arithmetic rule (d = 10 ≤ 3 × 3 + 1) but leaves buckets empty
    /// (pool seed 0: rank 7) gives no estimate, and says why; seed 4 (full rank) does.
    #[test]
    fn a_singular_pool_gives_no_estimate() {
        let m = Olh::new(1.0, 10, 4, 3, 0).unwrap();
        let why = m.solver().unwrap_err();
        assert!(why.contains("does not identify 10 categories"), "{why}");
        assert!(Olh::new(1.0, 10, 4, 3, 4).unwrap().solver().is_ok());
    }
}
