//! `Multinomial(n, probs)` by sequential conditional binomials, with the binomial laws
//! kept across draws. A Monte Carlo p-value draws the same multinomial hundreds of times,
//! and each `Binomial::new` of the inversion method computes `q^n` (a `powf`): at 10⁵
//! small groups that setup was about a third of the whole run (benches/RESULTS.md,
//! issue 45). A law built once samples exactly as one built afresh, so the draws, and the
//! records, are unchanged.
//!
//! A kept law that rand_distr would draw by inversion (BINV: `n·p < 10`, the common case
//! at the small n a simulated p-value is used at) is drawn here by the same algorithm with
//! its terms `r_x` computed once: rand_distr recomputes `r_x = r_{x−1}·(a/x − s)`, a
//! division, at every step of every draw. The terms are the same doubles computed by the
//! same operations in the same order, and the uniform is drawn as rand_distr draws it, so
//! every draw is bit for bit rand_distr's (`kept_laws_draw_exactly_as_fresh_ones`; the
//! crate's version is pinned by Cargo.lock, and the test fails if a new version draws
//! otherwise).

use rand::Rng;
use rand_distr::{Binomial, Distribution};

use crate::error::EngineError;

/// The laws of one `Multinomial(n, probs)`, drawn again and again.
pub(crate) struct MultinomialSampler {
    n: u64,
    cells: usize,
    /// Cell j's conditional probability given the cells before it (the last cell takes
    /// what is left, so it has none).
    conditional: Vec<f64>,
    /// `Binomial(left, conditional[j])` at `j·(n+1) + left`, built at its first use. Kept
    /// only while the table is small ([`MAX_KEPT_LAWS`]): a simulated p-value is used at
    /// small n, where the remaining counts repeat; at large n they rarely do.
    laws: Vec<Option<Law>>,
}

/// Above this many (cell, remaining count) pairs the laws are built per draw, as before.
const MAX_KEPT_LAWS: usize = 1 << 12;

/// rand_distr 0.5's switch from inversion (BINV) to BTPE: `n·min(p, 1 − p)` below it.
const BINV_THRESHOLD: f64 = 10.0;

/// rand_distr 0.5's BINV restarts with a new uniform past this many steps.
const BINV_MAX_X: usize = 110;

/// One kept `Binomial(n, p)`.
#[derive(Clone)]
enum Law {
    Inversion(Inversion),
    /// BTPE, or Knuth's Poisson when `1 − p` rounds to 1: drawn by rand_distr itself.
    Other(Binomial),
}

/// rand_distr's BINV for `Binomial(n, p)`, `p` already folded to `min(p, 1 − p)`.
#[derive(Clone)]
struct Inversion {
    n: u64,
    flipped: bool,
    s: f64,
    a: f64,
    /// `r_0 = q^n`, `r_x = r_{x−1}·(a/x − s)`, extended as draws reach further.
    terms: Vec<f64>,
}

impl Law {
    /// The law rand_distr's `Binomial::new(n, p)` builds, for `0 < p < 1`.
    fn new(n: u64, p: f64) -> Result<Self, EngineError> {
        let binomial = Binomial::new(n, p).map_err(|e| {
            EngineError::invalid("binomial probability", p, "a probability").with_detail(e)
        })?;
        // The branch rand_distr takes, with its own expressions.
        let flipped = p > 0.5;
        let p = if flipped { 1.0 - p } else { p };
        let np = n as f64 * p;
        let q = 1.0 - p;
        if np >= BINV_THRESHOLD || q == 1.0 || p == 0.0 {
            return Ok(Law::Other(binomial));
        }
        let s = p / q;
        let mut terms = Vec::with_capacity(8);
        terms.push(q.powf(n as f64));
        Ok(Law::Inversion(Inversion {
            n,
            flipped,
            s,
            a: (n as f64 + 1.0) * s,
            terms,
        }))
    }

    fn sample<R: Rng + ?Sized>(&mut self, rng: &mut R) -> u64 {
        match self {
            Law::Inversion(inv) => inv.sample(rng),
            Law::Other(b) => b.sample(rng),
        }
    }
}

impl Inversion {
    /// rand_distr 0.5's `binv`, step for step: subtract `r_x` from the uniform until it
    /// is at most `r_x`; past [`BINV_MAX_X`] steps, start again with a new uniform.
    fn sample<R: Rng + ?Sized>(&mut self, rng: &mut R) -> u64 {
        let x = 'outer: loop {
            let mut u: f64 = rng.random();
            let mut x = 0usize;
            let mut r = self.term(0);
            while u > r {
                u -= r;
                x += 1;
                if x > BINV_MAX_X {
                    continue 'outer;
                }
                r = self.term(x);
            }
            break x;
        } as u64;
        if self.flipped {
            self.n - x
        } else {
            x
        }
    }

    /// `r_x`, computed (once) from `r_{x−1}` as rand_distr computes it.
    fn term(&mut self, x: usize) -> f64 {
        while self.terms.len() <= x {
            let k = self.terms.len();
            let previous = self.terms[k - 1];
            self.terms.push(previous * (self.a / (k as f64) - self.s));
        }
        self.terms[x]
    }
}

impl MultinomialSampler {
    /// A sampler that keeps its laws, for many draws.
    pub(crate) fn new(n: u64, probs: &[f64]) -> Self {
        let mut sampler = Self::once(n, probs);
        let pairs = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_add(1))
            .and_then(|n| n.checked_mul(sampler.conditional.len()))
            .filter(|&pairs| pairs <= MAX_KEPT_LAWS)
            .unwrap_or(0);
        sampler.laws = vec![None; pairs];
        sampler
    }

    /// A sampler for one draw: it keeps no laws, so it allocates no table.
    pub(crate) fn once(n: u64, probs: &[f64]) -> Self {
        let mut mass_left = 1.0;
        let conditional: Vec<f64> = probs
            .iter()
            .take(probs.len().saturating_sub(1))
            .map(|&p| {
                let q = if mass_left > 0.0 {
                    (p / mass_left).clamp(0.0, 1.0)
                } else {
                    0.0
                };
                mass_left -= p;
                q
            })
            .collect();
        Self {
            n,
            cells: probs.len(),
            conditional,
            laws: Vec::new(),
        }
    }

    /// One draw: the counts of the cells, in order. Consumes the generator exactly as
    /// drawing each conditional binomial with a fresh `Binomial::new` would.
    pub(crate) fn sample<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Result<Vec<u64>, EngineError> {
        let mut out = Vec::with_capacity(self.cells);
        self.sample_into(rng, &mut out)?;
        Ok(out)
    }

    /// [`sample`](Self::sample) into `out` (cleared first), so that hundreds of draws
    /// reuse one buffer.
    pub(crate) fn sample_into<R: Rng + ?Sized>(
        &mut self,
        rng: &mut R,
        out: &mut Vec<u64>,
    ) -> Result<(), EngineError> {
        out.clear();
        let mut left = self.n;
        let row = usize::try_from(self.n).ok().and_then(|n| n.checked_add(1));
        for (j, &q) in self.conditional.iter().enumerate() {
            let k = if left == 0 || q <= 0.0 {
                0
            } else if q >= 1.0 {
                left
            } else {
                // `left ≤ n`, and the table, when not empty, has a slot for every (j, left).
                let slot = row
                    .and_then(|row| j.checked_mul(row))
                    .and_then(|s| s.checked_add(usize::try_from(left).ok()?))
                    .filter(|&slot| slot < self.laws.len());
                match slot {
                    Some(slot) => {
                        let law = match &mut self.laws[slot] {
                            Some(law) => law,
                            empty => empty.insert(Law::new(left, q)?),
                        };
                        law.sample(rng)
                    }
                    None => Binomial::new(left, q)
                        .map_err(|e| {
                            EngineError::invalid("binomial probability", q, "a probability")
                                .with_detail(e)
                        })?
                        .sample(rng),
                }
            };
            out.push(k);
            left -= k;
        }
        // The last cell takes the rest; no cells, no counts.
        if self.cells > 0 {
            out.push(left);
        }
        Ok(())
    }

    /// The (cell, remaining count) laws [`MultinomialSampler::new`] would keep.
    pub(crate) fn kept_laws(n: u64, cells: usize) -> u64 {
        n.saturating_add(1)
            .saturating_mul(cells.saturating_sub(1) as u64)
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    use super::*;

    /// The sampler as it was before the laws were kept: a fresh `Binomial::new` per cell
    /// and draw. The kept laws must consume the generator and return exactly as it did.
    fn reference(rng: &mut StdRng, n: u64, probs: &[f64]) -> Vec<u64> {
        let mut left = n;
        let mut mass_left = 1.0;
        let mut out = Vec::new();
        for (j, &p) in probs.iter().enumerate() {
            if j + 1 == probs.len() {
                out.push(left);
                break;
            }
            let q = if mass_left > 0.0 {
                (p / mass_left).clamp(0.0, 1.0)
            } else {
                0.0
            };
            let k = if left == 0 || q <= 0.0 {
                0
            } else if q >= 1.0 {
                left
            } else {
                Binomial::new(left, q).unwrap().sample(rng)
            };
            out.push(k);
            left -= k;
            mass_left -= p;
        }
        out
    }

    #[test]
    fn kept_laws_draw_exactly_as_fresh_ones() {
        let laws: [&[f64]; 7] = [
            &[],
            &[1.0],
            &[0.5, 0.5],
            &[0.0, 0.3, 0.0, 0.7],
            &[1.0, 0.0, 0.0],
            &[0.1; 10],
            &[0.9, 0.05, 0.03, 0.02],
        ];
        for (case, probs) in laws.iter().enumerate() {
            // Small n (inversion, the cached case), large n (BTPE) and past the cache.
            for n in [0u64, 1, 7, 40, 1_000, 1 << 20] {
                let seed = 1000 * case as u64 + n;
                let (mut a, mut b) = (StdRng::seed_from_u64(seed), StdRng::seed_from_u64(seed));
                let mut sampler = MultinomialSampler::new(n, probs);
                for _ in 0..300 {
                    assert_eq!(
                        sampler.sample(&mut a).unwrap(),
                        reference(&mut b, n, probs),
                        "n = {n}, probs = {probs:?}"
                    );
                    assert_eq!(
                        MultinomialSampler::once(n, probs).sample(&mut a).unwrap(),
                        reference(&mut b, n, probs),
                        "n = {n}, probs = {probs:?}, once"
                    );
                }
                // Both generators are at the same point afterwards.
                assert_eq!(a.random::<u64>(), b.random::<u64>());
            }
        }
    }

    /// A generator replaying fixed words, for the uniforms at the ends of [0, 1).
    struct Words(Vec<u64>, usize);

    impl rand::RngCore for Words {
        fn next_u32(&mut self) -> u32 {
            self.next_u64() as u32
        }
        fn next_u64(&mut self) -> u64 {
            self.1 += 1;
            self.0[(self.1 - 1) % self.0.len()]
        }
        fn fill_bytes(&mut self, dest: &mut [u8]) {
            rand::rand_core::impls::fill_bytes_via_next(self, dest)
        }
    }

    /// The kept inversion law draws as rand_distr's `Binomial` on every law it takes
    /// (both sides of the BINV/BTPE switch at n·p = 10, p folded above 1/2, p at the
    /// ends), and on uniforms at the very ends of [0, 1), where the walk runs longest.
    #[test]
    fn a_kept_law_is_rand_distrs_binomial() {
        let words = vec![
            0,
            1,
            u64::MAX,
            u64::MAX - (1 << 11),
            1 << 63,
            12345 << 20,
            3,
        ];
        for n in [1u64, 2, 5, 19, 20, 21, 40, 99, 1000, 1 << 30] {
            for p in [
                1e-300,
                1e-9,
                0.01,
                0.0625,
                0.3,
                0.5,
                0.5000001,
                0.7,
                0.99,
                1.0 - 1e-12,
            ] {
                let mut law = Law::new(n, p).unwrap();
                let reference = Binomial::new(n, p).unwrap();
                let (mut a, mut b) = (Words(words.clone(), 0), Words(words.clone(), 0));
                for _ in 0..3 * words.len() {
                    assert_eq!(
                        law.sample(&mut a),
                        reference.sample(&mut b),
                        "n = {n}, p = {p}"
                    );
                }
                assert_eq!(a.1, b.1, "n = {n}, p = {p}: words consumed");
                let (mut a, mut b) = (StdRng::seed_from_u64(n), StdRng::seed_from_u64(n));
                for _ in 0..2000 {
                    assert_eq!(
                        law.sample(&mut a),
                        reference.sample(&mut b),
                        "n = {n}, p = {p}"
                    );
                }
            }
        }
    }

    #[test]
    fn laws_are_kept_only_for_small_tables() {
        assert_eq!(MultinomialSampler::new(10, &[0.25; 4]).laws.len(), 33);
        assert!(MultinomialSampler::new(1 << 30, &[0.25; 4]).laws.is_empty());
        assert!(MultinomialSampler::new(u64::MAX, &[0.25; 4])
            .laws
            .is_empty());
    }
}
