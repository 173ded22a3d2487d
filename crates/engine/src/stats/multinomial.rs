//! `Multinomial(n, probs)` by sequential conditional binomials, with the binomial laws
//! kept across draws. A Monte Carlo p-value draws the same multinomial hundreds of times,
//! and each `Binomial::new` of the inversion method computes `q^n` (a `powf`): at 10⁵
//! small groups that setup was about a third of the whole run (benches/RESULTS.md,
//! issue 45). A law built once samples exactly as one built afresh, so the draws, and the
//! records, are unchanged.

use std::collections::HashMap;

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
    /// `Binomial(left, conditional[j])` by `(j, left)`: few distinct ones at small n,
    /// where simulation is used.
    laws: HashMap<(usize, u64), Binomial>,
}

/// A sampler whose cache outgrows this many laws stops adding to it: at large n the
/// remaining counts rarely repeat, and BTPE's setup is cheap anyway.
const MAX_CACHED_LAWS: usize = 1 << 14;

impl MultinomialSampler {
    pub(crate) fn new(n: u64, probs: &[f64]) -> Self {
        let mut mass_left = 1.0;
        let conditional = probs
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
            laws: HashMap::new(),
        }
    }

    /// One draw: the counts of the cells, in order. Consumes the generator exactly as
    /// drawing each conditional binomial with a fresh `Binomial::new` would.
    pub(crate) fn sample<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Result<Vec<u64>, EngineError> {
        let mut left = self.n;
        let mut out = Vec::with_capacity(self.conditional.len() + 1);
        for (j, &q) in self.conditional.iter().enumerate() {
            let k = if left == 0 || q <= 0.0 {
                0
            } else if q >= 1.0 {
                left
            } else {
                law(&mut self.laws, j, left, q)?.sample(rng)
            };
            out.push(k);
            left -= k;
        }
        // The last cell takes the rest; no cells, no counts.
        if self.cells > 0 {
            out.push(left);
        }
        Ok(out)
    }
}

/// `Binomial(left, q)` for cell `j`: kept from an earlier draw, or built and kept.
fn law(
    laws: &mut HashMap<(usize, u64), Binomial>,
    j: usize,
    left: u64,
    q: f64,
) -> Result<Binomial, EngineError> {
    if let Some(law) = laws.get(&(j, left)) {
        return Ok(*law);
    }
    let law = Binomial::new(left, q).map_err(|e| {
        EngineError::invalid("binomial probability", q, "a probability").with_detail(e)
    })?;
    if laws.len() < MAX_CACHED_LAWS {
        laws.insert((j, left), law);
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
                }
                // Both generators are at the same point afterwards.
                assert_eq!(a.random::<u64>(), b.random::<u64>());
            }
        }
    }

    #[test]
    fn the_cache_stops_growing_at_its_bound() {
        let mut sampler = MultinomialSampler::new(1 << 30, &[0.25; 4]);
        let mut rng = StdRng::seed_from_u64(3);
        for _ in 0..20_000 {
            sampler.sample(&mut rng).unwrap();
        }
        assert!(sampler.laws.len() <= MAX_CACHED_LAWS);
    }
}
