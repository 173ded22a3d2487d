//! `Multinomial(n, probs)` by sequential conditional binomials, with the binomial laws
//! kept across draws. A Monte Carlo p-value draws the same multinomial hundreds of times,
//! and each `Binomial::new` of the inversion method computes `q^n` (a `powf`): at 10⁵
//! small groups that setup was about a third of the whole run (benches/RESULTS.md,
//! issue 45). A law built once samples exactly as one built afresh, so the draws, and the
//! records, are unchanged.

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
    laws: Vec<Option<Binomial>>,
}

/// Above this many (cell, remaining count) pairs the laws are built per draw, as before.
const MAX_KEPT_LAWS: usize = 1 << 12;

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
        let mut out = vec![0; self.cells];
        self.sample_into(rng, &mut out)?;
        Ok(out)
    }

    /// [`MultinomialSampler::sample`] into `out`, one count per cell (the same draws).
    pub(crate) fn sample_into<R: Rng + ?Sized>(
        &mut self,
        rng: &mut R,
        out: &mut [u64],
    ) -> Result<(), EngineError> {
        let mut left = self.n;
        for ((j, &q), slot) in self.conditional.iter().enumerate().zip(out.iter_mut()) {
            let k = if left == 0 || q <= 0.0 {
                0
            } else if q >= 1.0 {
                left
            } else {
                law(&mut self.laws, self.n, j, left, q)?.sample(rng)
            };
            *slot = k;
            left -= k;
        }
        // The last cell takes the rest; no cells, no counts.
        if let Some(last) = out
            .get_mut(self.conditional.len())
            .filter(|_| self.cells > 0)
        {
            *last = left;
        }
        Ok(())
    }

    /// The (cell, remaining count) laws [`MultinomialSampler::new`] would keep.
    pub(crate) fn kept_laws(n: u64, cells: usize) -> u64 {
        n.saturating_add(1)
            .saturating_mul(cells.saturating_sub(1) as u64)
    }
}

/// `Binomial(left, q)` for cell `j`: kept from an earlier draw, or built (and kept when
/// the table has room for the laws).
fn law(
    laws: &mut [Option<Binomial>],
    n: u64,
    j: usize,
    left: u64,
    q: f64,
) -> Result<Binomial, EngineError> {
    // `left ≤ n` and the table, when not empty, has a slot for every (j, left).
    let slot = (|| {
        let row = usize::try_from(n).ok()?.checked_add(1)?;
        j.checked_mul(row)?.checked_add(usize::try_from(left).ok()?)
    })()
    .filter(|&slot| slot < laws.len());
    if let Some(law) = slot.and_then(|slot| laws[slot]) {
        return Ok(law);
    }
    let law = Binomial::new(left, q).map_err(|e| {
        EngineError::invalid("binomial probability", q, "a probability").with_detail(e)
    })?;
    if let Some(slot) = slot {
        laws[slot] = Some(law);
    }
    Ok(law)
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

    #[test]
    fn laws_are_kept_only_for_small_tables() {
        assert_eq!(MultinomialSampler::new(10, &[0.25; 4]).laws.len(), 33);
        assert!(MultinomialSampler::new(1 << 30, &[0.25; 4]).laws.is_empty());
        assert!(MultinomialSampler::new(u64::MAX, &[0.25; 4])
            .laws
            .is_empty());
    }
}
