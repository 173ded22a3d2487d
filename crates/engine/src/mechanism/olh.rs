use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use rand::Rng;

use super::cohort::splitmix64;
use super::olh_solver::{PoolChannel, PoolSolver};
use super::olh_whitener::SupportWhitener;
use super::{Estimate, Grr};
use crate::error::EngineError;

/// SplitMix64's increment (Vigna's reference `splitmix64.c`): output k of the stream
/// started at `seed` is `splitmix64(seed + k·GOLDEN)` with the finalizer of
/// [`splitmix64`], which adds the first increment itself.
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// Optimized local hashing (Wang, Blocki, Li & Jha, USENIX Security 2017, §4.4) with a
/// fixed public pool of S hash functions (docs/STATISTICS.md §1.8).
///
/// A user draws a pool index i uniformly from [S], hashes x to `b = h_i(x) ∈ [g]` and
/// reports (i, y) with y generalized randomized response over the g buckets: `y = b` with
/// probability `p = e^ε/(e^ε+g−1)`, else one of the other g − 1 buckets uniformly. The
/// randomization over buckets is [`Grr`]'s, draw for draw, so it inherits its exact
/// Bernoulli and its unbiased rejection-sampled uniform.
///
/// The hash family is multiply-add-shift from 32-bit keys (strongly universal onto 32
/// bits), mapped onto [g] by a multiply-high:
/// `h_i(v) = ((((a_i·v + b_i) mod 2⁶⁴) >> 32)·g) >> 32`, with `a_i = next() | 1`,
/// `b_i = next()` from a SplitMix64 stream started at the pool seed, in the order
/// i = 0, 1, … (pinned by golden values in the tests).
#[derive(Debug, Clone)]
pub struct Olh {
    grr: Grr,
    domain: u32,
    pool_seed: u64,
    /// `(a_i, b_i)` per pool entry.
    pool: Vec<(u64, u64)>,
    /// The pool's collision inverse, a pure function of the fields above: built on first
    /// use (or by [`Olh::prepare`]) and shared by clones, so a stream pays for it once.
    solver: Arc<OnceLock<Result<PoolSolver, String>>>,
    /// The sequential test's factored null covariance, one per null `p0` (by its bits):
    /// built on first use and shared by clones, so each (config, p0) pays once. A stream's
    /// nulls are its tests', so the list stays as short as the config.
    whiteners: Arc<Mutex<Vec<NullFactor>>>,
}

/// A null's factor, built once by whichever thread asks first (the others wait for it).
type Whitener = OnceLock<Result<SupportWhitener, String>>;
/// A null (the bits of its p0) and its factor.
type NullFactor = (Vec<u64>, Arc<Whitener>);

/// Two mechanisms are equal when their parameters are: the solver follows from them.
impl PartialEq for Olh {
    fn eq(&self, other: &Self) -> bool {
        self.grr == other.grr
            && self.domain == other.domain
            && self.pool_seed == other.pool_seed
            && self.pool == other.pool
    }
}

/// The pool of `size` (a, b) pairs drawn from the SplitMix64 stream started at `seed`.
pub fn olh_pool(seed: u64, size: u32) -> Vec<(u64, u64)> {
    (0..u64::from(size))
        .map(|i| {
            let next = |k: u64| splitmix64(seed.wrapping_add(k.wrapping_mul(GOLDEN)));
            (next(2 * i) | 1, next(2 * i + 1))
        })
        .collect()
}

/// `h(v) = ((((a·v + b) mod 2⁶⁴) >> 32)·g) >> 32`.
#[inline(always)]
pub fn olh_bucket(a: u64, b: u64, g: u32, v: u32) -> u32 {
    let mixed = a.wrapping_mul(u64::from(v)).wrapping_add(b) >> 32;
    ((mixed * u64::from(g)) >> 32) as u32
}

impl Olh {
    /// `g` buckets (2 to 2¹⁶) and a pool of `pool_size` seeds (1 to 2¹⁶) drawn from
    /// `pool_seed`; ε and d as every mechanism's.
    pub fn new(
        epsilon: f64,
        domain: u32,
        g: u32,
        pool_size: u32,
        pool_seed: u64,
    ) -> Result<Self, EngineError> {
        super::check_epsilon(epsilon)?;
        super::check_domain(domain)?;
        if !(2..=ldpstream_config::OLH_MAX_G).contains(&g) {
            return Err(EngineError::invalid("g", g, "an integer from 2 to 65536"));
        }
        if !(1..=ldpstream_config::OLH_MAX_POOL_SIZE).contains(&pool_size) {
            return Err(EngineError::invalid(
                "pool_size",
                pool_size,
                "an integer from 1 to 65536",
            ));
        }
        let cells = u64::from(g) * u64::from(pool_size);
        if cells > ldpstream_config::MAX_OLH_TABLE_CELLS {
            return Err(EngineError::invalid(
                "pool_size",
                pool_size,
                "pool_size × g at most 2^24 cells",
            ));
        }
        Ok(Olh {
            grr: Grr::new(epsilon, g)?,
            domain,
            pool_seed,
            pool: olh_pool(pool_seed, pool_size),
            solver: Arc::default(),
            whiteners: Arc::default(),
        })
    }

    pub fn epsilon(&self) -> f64 {
        self.grr.epsilon()
    }

    pub fn domain(&self) -> u32 {
        self.domain
    }

    /// g, the number of hash buckets.
    pub fn g(&self) -> u32 {
        self.grr.domain()
    }

    /// S, the number of hash seeds in the pool.
    pub fn pool_size(&self) -> u32 {
        self.pool.len() as u32
    }

    pub fn pool_seed(&self) -> u64 {
        self.pool_seed
    }

    /// `(a_i, b_i)` of every pool entry.
    pub fn pool(&self) -> &[(u64, u64)] {
        &self.pool
    }

    /// The bucket of `v` under pool entry `i` (`i < S`).
    pub fn bucket(&self, i: u32, v: u32) -> u32 {
        let (a, b) = self.pool[i as usize];
        olh_bucket(a, b, self.g(), v)
    }

    /// The randomizer over buckets (its `lie_probability` is `(g−1)/(e^ε+g−1)`).
    pub fn bucket_rr(&self) -> &Grr {
        &self.grr
    }

    /// `q = 1/(e^ε+g−1)`: the probability of one given wrong bucket.
    pub fn q(&self) -> f64 {
        self.grr.rho()
    }

    /// `p − q = (e^ε−1)/(e^ε+g−1)`.
    pub fn p_minus_q(&self) -> f64 {
        self.grr.gamma()
    }

    /// `p − 1/g = (p − q)(g−1)/g`, the debiasing divisor (Wang et al.'s p* − q*),
    /// without the cancellation of forming p first.
    pub fn p_minus_one_over_g(&self) -> f64 {
        let g = f64::from(self.g());
        self.p_minus_q() * (g - 1.0) / g
    }

    /// Privatizes `x` with the thread's generator (tests only: rand 0.9 does not reseed it
    /// on fork; real reports draw from [`super::client_rng`]).
    #[cfg(test)]
    pub fn randomize(&self, x: u32) -> Result<(u32, u32), EngineError> {
        self.randomize_with(x, &mut rand::rng())
    }

    /// Privatizes `x` into (pool index, reported bucket) with a caller-supplied generator
    /// (seeded only for simulation): the index first, then [`Grr`]'s draws on the bucket.
    pub fn randomize_with<R: Rng + ?Sized>(
        &self,
        x: u32,
        rng: &mut R,
    ) -> Result<(u32, u32), EngineError> {
        super::check_input(x, self.domain)?;
        let i = rng.random_range(0..self.pool_size());
        let y = self.grr.randomize_with(self.bucket(i, x), rng)?;
        Ok((i, y))
    }

    /// The support counts `C_v = Σ_i T[i, h_i(v)]` of an S × g table (row-major): how
    /// many reports' buckets agree with v's hash. O(S·d) hashes, exact integers. An empty
    /// row adds nothing and is skipped: at small n most rows are (a Monte Carlo null draws
    /// its tables with the observed row totals, and computes this for each).
    pub fn supports(&self, table: &[u64]) -> Vec<u64> {
        let (g, d) = (self.g() as usize, self.domain as usize);
        let mut support = vec![0u64; d];
        for (&(a, b), row) in self.pool.iter().zip(table.chunks_exact(g)) {
            if row.iter().any(|&c| c > 0) {
                add_row_supports(a, b, self.g(), row, &mut support);
            }
        }
        support
    }

    /// `Σ_i rows[i, h_i(v)]` for every v, of any per-cell values (the null means and
    /// variances of the support counts). A row of zeros is skipped: adding ±0 leaves every
    /// sum as it was (a sum that starts at +0 never becomes −0), so the result is the same
    /// to the bit.
    pub fn gather(&self, rows: &[f64]) -> Vec<f64> {
        let g = self.g() as usize;
        let mut out = vec![0.0; self.domain as usize];
        for (&(a, b), row) in self.pool.iter().zip(rows.chunks_exact(g)) {
            if row.iter().any(|&x| x != 0.0) {
                add_row_supports(a, b, self.g(), row, &mut out);
            }
        }
        out
    }

    /// The pool's solver (its collision inverse), built on first use; Err says why the
    /// pool gives no unbiased estimate (too many categories for the dense factor, or a
    /// pool that does not identify them).
    pub fn solver(&self) -> Result<&PoolSolver, &str> {
        self.solver
            .get_or_init(|| PoolSolver::new(self))
            .as_ref()
            .map_err(String::as_str)
    }

    /// Builds the solver now (seconds at d = 4,096), so that a service's first snapshot
    /// round does not pay for it.
    pub fn prepare(&self) -> Result<(), String> {
        self.solver().map(|_| ()).map_err(str::to_string)
    }

    /// The factored null covariance of the support counts under `p0`, built on first use
    /// per distinct `p0` (40 s at d = 4,096 under load, benches/RESULTS.md); Err says why
    /// there is none (no pool solver, or a covariance that cannot be factored).
    fn whitener(&self, p0: &[f64]) -> Arc<Whitener> {
        let key: Vec<u64> = p0.iter().map(|x| x.to_bits()).collect();
        let mut list = self
            .whiteners
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((_, w)) = list.iter().find(|(k, _)| *k == key) {
            return Arc::clone(w);
        }
        let w = Arc::new(Whitener::new());
        list.push((key, Arc::clone(&w)));
        w
    }

    /// The sequential test's whitened statistic of a table under H0: p = `p0` and its
    /// degrees of freedom, `(T, d − 1)` (docs/STATISTICS.md §10.1; [`SupportWhitener`]).
    /// Err: why the pool gives none (the e-process then falls back on the table's cells).
    pub fn sequential_statistic(&self, table: &[u64], p0: &[f64]) -> Result<(f64, u32), String> {
        let cell = self.whitener(p0);
        let whitener = cell
            .get_or_init(|| {
                let solver = self.solver().map_err(str::to_string)?;
                SupportWhitener::new(self, solver.row_sums(), p0)
            })
            .as_ref()
            .map_err(String::clone)?;
        let residual = self.gather(&whitener.residual_table(table, self.g() as usize));
        let n = table.iter().sum();
        Ok((whitener.statistic(&residual, n), whitener.df()))
    }

    /// The unbiased pool estimate of a table (docs/STATISTICS.md §1.8), or the plain one
    /// where the pool gives none (see [`Olh::solver`]).
    pub fn estimate(&self, table: &[u64], n: u64) -> Estimate {
        let supports = self.supports(table);
        self.estimate_from_supports(&supports, n)
            .unwrap_or_else(|_| self.estimate_plain(&supports, n))
    }

    /// The exactly unbiased estimate `π̂ = C⁻¹(f − q1)/(p − q)` and its exact standard
    /// errors from support counts already computed; Err: why the pool gives none.
    pub fn estimate_from_supports(&self, supports: &[u64], n: u64) -> Result<Estimate, String> {
        Ok(self
            .solver()
            .map_err(str::to_string)?
            .estimate(self, supports, n))
    }

    /// The plain estimate `π̂_v = (C_v/n − 1/g)/(p − 1/g)` and its plug-in standard error
    /// `sqrt(f(1−f)/n)/(p − 1/g)`, `f = C_v/n`. Unbiased for fresh per-user hashes; a
    /// fixed pool adds the collision bias of STATISTICS.md §1.8, at most
    /// [`PoolSolver::bias_bound`].
    pub fn estimate_plain(&self, supports: &[u64], n: u64) -> Estimate {
        let inv_g = 1.0 / f64::from(self.g());
        let scale = self.p_minus_one_over_g();
        Estimate::from_frequencies(
            supports,
            n,
            |f| (f - inv_g) / scale,
            |f, nf| (f * (1.0 - f) / nf).sqrt() / scale,
        )
    }

    /// Row i's report law under type law `p0`: `P_i(y) = q + (p − q)·Σ_x p0_x [h_i(x) = y]`,
    /// for every row, row-major (S × g).
    pub fn row_laws(&self, p0: &[f64]) -> Vec<f64> {
        let g = self.g() as usize;
        let (q, gap) = (self.q(), self.p_minus_q());
        let mut laws = vec![0.0; self.pool.len() * g];
        for (&(a, b), row) in self.pool.iter().zip(laws.chunks_exact_mut(g)) {
            for (x, &px) in p0.iter().enumerate() {
                row[olh_bucket(a, b, self.g(), x as u32) as usize] += px;
            }
            row.iter_mut().for_each(|m| *m = q + gap * *m);
        }
        laws
    }
}

/// Adds one row's counts to the supports: `support[v] += row[h(v)]`. The key `a·v + b` is
/// advanced by one addition per v instead of a multiplication.
#[inline]
fn add_row_supports<T: Copy + std::ops::AddAssign>(
    a: u64,
    b: u64,
    g: u32,
    row: &[T],
    support: &mut [T],
) {
    let g = u64::from(g);
    let mut key = b;
    for s in support.iter_mut() {
        *s += row[(((key >> 32) * g) >> 32) as usize];
        key = key.wrapping_add(a);
    }
}

// Olh's own methods of the same names answer (inherent methods come first), so none of
// these calls itself.
impl PoolChannel for Olh {
    fn domain(&self) -> u32 {
        self.domain()
    }
    fn g(&self) -> u32 {
        self.g()
    }
    fn pool(&self) -> &[(u64, u64)] {
        self.pool()
    }
    fn pool_seed(&self) -> u64 {
        self.pool_seed()
    }
    fn q(&self) -> f64 {
        self.q()
    }
    fn p_minus_q(&self) -> f64 {
        self.p_minus_q()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// The hash family, pinned: clients must reproduce these buckets exactly.
    #[test]
    fn pool_and_buckets_golden_values() {
        // Vigna's splitmix64.c from state 0 outputs 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4,
        // 0x06c45d188009454f, 0xf88bb8a8724c81ec (computed independently in Python, as were the
        // buckets below).
        let pool = olh_pool(0, 2);
        assert_eq!(
            pool,
            vec![
                (0xe220_a839_7b1d_cdaf, 0x6e78_9e6a_a1b9_65f4),
                (0x06c4_5d18_8009_454f, 0xf88b_b8a8_724c_81ec),
            ]
        );
        let m = Olh::new(2.0, 1000, 8, 4, 0).unwrap();
        let buckets: Vec<u32> = (0..4)
            .flat_map(|i| [0, 1, 2, 999].map(|v| m.bucket(i, v)))
            .collect();
        assert_eq!(buckets, GOLDEN_BUCKETS);
        // The incremental key of the support loop equals the multiplication.
        let (a, b) = m.pool()[3];
        let mut support = vec![0u64; 1000];
        let row: Vec<u64> = (0..8).map(|k| 1u64 << (8 * k)).collect();
        add_row_supports(a, b, 8, &row, &mut support);
        for (v, &s) in support.iter().enumerate() {
            assert_eq!(s, row[olh_bucket(a, b, 8, v as u32) as usize]);
        }
    }

    /// Empty rows are skipped (issue 44's speed work): the supports and a gather of
    /// signed values (the sequential test's residuals) equal the sums over every row.
    #[test]
    fn supports_and_gather_skip_empty_rows_exactly() {
        let m = Olh::new(1.0, 40, 4, 16, 3).unwrap();
        let table: Vec<u64> = (0..16u64)
            .flat_map(|i| (0..4u64).map(move |y| if i % 3 == 0 { 0 } else { (i * 5 + y * 7) % 9 }))
            .collect();
        let signed: Vec<f64> = table
            .iter()
            .map(|&c| c as f64 * 0.37 - 1.1 * (c > 0) as u8 as f64)
            .collect();
        let (supports, gathered) = (m.supports(&table), m.gather(&signed));
        for v in 0..40u32 {
            let (mut want, mut sum) = (0u64, 0.0f64);
            for i in 0..16u32 {
                let cell = (i * 4 + m.bucket(i, v)) as usize;
                want += table[cell];
                sum += signed[cell];
            }
            assert_eq!(supports[v as usize], want, "v = {v}");
            assert_eq!(gathered[v as usize].to_bits(), sum.to_bits(), "v = {v}");
        }
    }

    /// Buckets of v = 0, 1, 2, 999 under pool entries 0..4 of seed 0, g = 8.
    const GOLDEN_BUCKETS: [u32; 16] = [3, 2, 1, 6, 7, 7, 0, 3, 2, 3, 4, 4, 6, 7, 0, 3];

    #[test]
    fn rejects_bad_parameters() {
        assert!(Olh::new(1.0, 4, 1, 4, 0).is_err());
        assert!(Olh::new(1.0, 4, 65537, 4, 0).is_err());
        assert!(Olh::new(1.0, 4, 4, 0, 0).is_err());
        assert!(Olh::new(1.0, 4, 65536, 65536, 0).is_err());
        assert!(Olh::new(0.0, 4, 4, 4, 0).is_err());
        let m = Olh::new(1.0, 4, 4, 4, 0).unwrap();
        assert!(matches!(
            m.randomize(4),
            Err(EngineError::InputOutOfDomain { value: 4, .. })
        ));
        let (i, y) = m.randomize(3).unwrap();
        assert!(i < 4 && y < 4);
    }

    /// A sketch of another pool shape is refused, even one with as many cells (S and g
    /// swapped), and the stream's own is accepted.
    #[test]
    fn check_sketch_compares_pool_and_g() {
        use crate::mechanism::Mechanism;
        use crate::sketch::{PoolSketch, Sketch};
        let m = Mechanism::Olh(Box::new(Olh::new(1.0, 10, 4, 6, 0).unwrap()));
        assert!(m.check_sketch(&Sketch::Pool(PoolSketch::new(6, 4))).is_ok());
        assert!(m
            .check_sketch(&Sketch::Pool(PoolSketch::new(4, 6)))
            .is_err());
        assert!(m
            .check_sketch(&Sketch::Pool(PoolSketch::new(6, 5)))
            .is_err());
    }

    /// Given the pool index, the reported bucket follows GenRR over g around h_i(x).
    #[test]
    fn reports_follow_the_row_law() {
        let m = Olh::new(1.5, 20, 5, 3, 11).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let n = 300_000u64;
        let mut table = vec![0u64; 15];
        for _ in 0..n {
            let (i, y) = m.randomize_with(7, &mut rng).unwrap();
            table[(i * 5 + y) as usize] += 1;
        }
        let mut p0 = vec![0.0; 20];
        p0[7] = 1.0;
        let laws = m.row_laws(&p0);
        for (row, law) in table.chunks(5).zip(laws.chunks(5)) {
            let ni: u64 = row.iter().sum();
            assert!(
                (ni as f64 / n as f64 - 1.0 / 3.0).abs() < 0.005,
                "{table:?}"
            );
            for (&c, &pr) in row.iter().zip(law) {
                let se = (pr * (1.0 - pr) / ni as f64).sqrt();
                assert!((c as f64 / ni as f64 - pr).abs() < 5.0 * se, "{table:?}");
            }
        }
    }
}
