//! Finite-sample calibration (docs/STATISTICS.md §6): the null law of any statistic is simulated
//! from the sketch's own law, without generating events.

use rand::Rng;
use rand_distr::{Binomial, Distribution, Gamma, Normal, Poisson};

use super::multinomial::MultinomialSampler;
use crate::error::EngineError;
use crate::mechanism::{Mechanism, Noise, NoiseKind, Subset};
use crate::sketch::{BitSketch, CountSketch, PoolSketch, SignedSketch, Sketch, SumSketch};

fn binomial<R: Rng + ?Sized>(rng: &mut R, n: u64, p: f64) -> Result<u64, EngineError> {
    if n == 0 || p <= 0.0 {
        return Ok(0);
    }
    if p >= 1.0 {
        return Ok(n);
    }
    Binomial::new(n, p).map(|b| b.sample(rng)).map_err(|e| {
        EngineError::invalid("binomial probability", p, "a probability").with_detail(e)
    })
}

/// The sum of `n` draws of one coordinate's noise, O(1) per coordinate.
///
/// Discrete Laplace: one draw is the difference of two geometric variables with ratio
/// q = e^(−1/t), so the sum is the difference of two negative binomials NB(n, q), each drawn
/// exactly as a Gamma–Poisson mixture. Discrete Gaussian: N(0, n·Var); a sum of discrete
/// Gaussians is not one, but at the ≥ 10⁴ grid steps per σ every valid ρ gives, its law and
/// the normal's differ far below what a simulated p-value resolves.
fn noise_sum<R: Rng + ?Sized>(rng: &mut R, m: &Noise, n: u64) -> Result<f64, EngineError> {
    if n == 0 {
        return Ok(0.0);
    }
    let nf = n as f64;
    match m.kind() {
        NoiseKind::Gauss { rho } => Normal::new(0.0, (nf * m.variance()).sqrt())
            .map(|d| d.sample(rng))
            .map_err(|e| EngineError::invalid("rho", rho, "a positive number").with_detail(e)),
        NoiseKind::Laplace { epsilon } => {
            let theta = 1.0 / (1.0 / m.grid_scale() as f64).exp_m1();
            let bad = |e: String| {
                EngineError::invalid("epsilon", epsilon, "a positive number").with_detail(e)
            };
            let gamma = Gamma::new(nf, theta).map_err(|e| bad(e.to_string()))?;
            let mut negative_binomial = || -> Result<f64, EngineError> {
                let lambda: f64 = gamma.sample(rng);
                if lambda <= 0.0 {
                    return Ok(0.0);
                }
                Poisson::new(lambda)
                    .map(|p| p.sample(rng))
                    .map_err(|e| bad(e.to_string()))
            };
            let steps = negative_binomial()? - negative_binomial()?;
            Ok(steps * m.grid_step())
        }
    }
}

/// `Multinomial(n, probs)` by sequential conditional binomials: O(d) draws. To draw the
/// same law many times, keep a [`MultinomialSampler`].
pub fn sample_multinomial<R: Rng + ?Sized>(
    rng: &mut R,
    n: u64,
    probs: &[f64],
) -> Result<Vec<u64>, EngineError> {
    MultinomialSampler::once(n, probs).sample(rng)
}

/// The item counts of n reports drawn exactly from the mechanism under `p0`: true values
/// from Multinomial(n, p0), then each one randomized. O(n k), for Monte Carlo calibration
/// and simulation.
pub fn sample_subset_counts<R: Rng + ?Sized>(
    m: &Subset,
    p0: &[f64],
    n: u64,
    rng: &mut R,
) -> Result<Vec<u64>, EngineError> {
    if p0.len() != m.domain() as usize {
        return Err(EngineError::invalid(
            "null distribution length",
            p0.len(),
            "the mechanism's domain",
        ));
    }
    let truths = sample_multinomial(rng, n, p0)?;
    let mut counts = vec![0u64; p0.len()];
    let mut report = Vec::with_capacity(m.k() as usize);
    for (x, &times) in truths.iter().enumerate() {
        for _ in 0..times {
            m.randomize_into(x as u32, rng, &mut report);
            for &j in &report {
                counts[j as usize] += 1;
            }
        }
    }
    Ok(counts)
}

/// One sketch drawn from the mechanism's law under `p0`, with the observed sketch's `n`
/// (and, for ±1 families, its per-row report counts, which are ancillary).
pub fn sample_null_sketch<R: Rng + ?Sized>(
    mechanism: &Mechanism,
    observed: &Sketch,
    p0: &[f64],
    rng: &mut R,
) -> Result<Sketch, EngineError> {
    let mechanism = mechanism.channel();
    let n = observed.n();
    Ok(match (mechanism, observed) {
        (Mechanism::Grr(m), Sketch::Counts(_)) => Sketch::Counts(CountSketch::from_counts(
            sample_multinomial(rng, n, &m.report_law(p0))?,
        )),
        (Mechanism::Channel(m), Sketch::Counts(_)) => Sketch::Counts(CountSketch::from_counts(
            sample_multinomial(rng, n, &m.signal_law(p0))?,
        )),
        (Mechanism::Raw { .. }, Sketch::Counts(_)) => {
            Sketch::Counts(CountSketch::from_counts(sample_multinomial(rng, n, p0)?))
        }
        (Mechanism::BitFlip(m), Sketch::Bits(_)) => {
            let truth = sample_multinomial(rng, n, p0)?;
            // Drawn through the drop and flip probabilities themselves: 1 − keep is 0 in
            // f64 at large ε.
            let (drop, flip) = (m.drop_probability(), m.flip());
            let bits = truth
                .iter()
                .map(|&nj| Ok(nj - binomial(rng, nj, drop)? + binomial(rng, n - nj, flip)?))
                .collect::<Result<Vec<u64>, EngineError>>()?;
            Sketch::Bits(BitSketch::from_counts(bits, n)?)
        }
        // Exact: every simulated report is drawn by the randomizer itself, O(n k) per sketch
        // (the item counts are dependent, with no cheap closed-form joint law).
        (Mechanism::Subset(m), Sketch::Bits(_)) => Sketch::Bits(BitSketch::from_counts(
            sample_subset_counts(m, p0, n, rng)?,
            n,
        )?),
        (Mechanism::Noise(m), Sketch::Sums(_)) => {
            let truth = sample_multinomial(rng, n, p0)?;
            let sums = truth
                .iter()
                .map(|&nj| Ok(nj as f64 + noise_sum(rng, m, n)?))
                .collect::<Result<Vec<f64>, EngineError>>()?;
            Sketch::Sums(SumSketch::from_sums_f64(&sums, n))
        }
        (Mechanism::Hadamard(_) | Mechanism::Cohort(_), Sketch::Signed(s)) => {
            // Conditioned on the observed row counts, as the statistic is.
            let row_mean = super::sign_row_means(mechanism, p0);
            let (mut plus, mut minus) = (Vec::new(), Vec::new());
            for (j, (&pj, &mj)) in s.plus().iter().zip(s.minus()).enumerate() {
                let total = pj + mj;
                let eta = match mechanism {
                    Mechanism::Hadamard(h) => h.eta(),
                    Mechanism::Cohort(c) => c.eta(),
                    _ => 0.0,
                };
                let k = binomial(rng, total, 0.5 + eta * row_mean[j])?;
                plus.push(k);
                minus.push(total - k);
            }
            Sketch::Signed(SignedSketch::from_tables(plus, minus)?)
        }
        (Mechanism::Olh(m), Sketch::Pool(s)) => {
            // Rows drawn with the observed row totals (the pool index is ancillary).
            let null = super::OlhNull::new(m, p0, s.row_totals());
            Sketch::Pool(PoolSketch::from_table(
                s.g(),
                null.sample_table(s.g(), rng)?,
            )?)
        }
        _ => return Err(mechanism.sketch_mismatch(observed)),
    })
}

/// The null sketches of one observed sketch, drawn again and again for one simulated
/// p-value. A count table's law is built once (the report law and its binomials); the
/// other kinds draw through [`sample_null_sketch`]. Draws equal `sample_null_sketch`'s.
pub struct NullSampler<'a> {
    mechanism: &'a Mechanism,
    observed: &'a Sketch,
    p0: &'a [f64],
    counts: Option<MultinomialSampler>,
}

impl<'a> NullSampler<'a> {
    pub fn new(mechanism: &'a Mechanism, observed: &'a Sketch, p0: &'a [f64]) -> Self {
        let n = observed.n();
        let counts = match (mechanism.channel(), observed) {
            (Mechanism::Grr(m), Sketch::Counts(_)) => {
                Some(MultinomialSampler::new(n, &m.report_law(p0)))
            }
            (Mechanism::Channel(m), Sketch::Counts(_)) => {
                Some(MultinomialSampler::new(n, &m.signal_law(p0)))
            }
            (Mechanism::Raw { .. }, Sketch::Counts(_)) => Some(MultinomialSampler::new(n, p0)),
            _ => None,
        };
        Self {
            mechanism,
            observed,
            p0,
            counts,
        }
    }

    /// The kept multinomial of a count table's null (GenRR, channel, raw), which draws
    /// the cells [`sample`](Self::sample) puts in its sketch; None for the other kinds.
    pub(crate) fn counts_mut(&mut self) -> Option<&mut MultinomialSampler> {
        self.counts.as_mut()
    }

    pub fn sample<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Result<Sketch, EngineError> {
        match &mut self.counts {
            Some(law) => Ok(Sketch::Counts(CountSketch::from_counts(law.sample(rng)?))),
            None => sample_null_sketch(self.mechanism, self.observed, self.p0, rng),
        }
    }
}

/// How far below the observed statistic a simulated one still counts as a tie, relative to
/// the observed one: R's `chisq.test` uses the same `1 − 64·ε`.
const TIE_TOLERANCE: f64 = 64.0 * f64::EPSILON;

/// `(1 + #{T_b ≥ T})/(m + 1)`, and the critical value τ, the ⌈(m+1)(1−α)⌉-th smallest
/// simulated statistic (reject iff T > τ).
///
/// A simulated table with the same counts as the observed one, in another order, gives a
/// statistic that differs in its last bits (the sum runs in another order). Such ties
/// must count as `≥`, or the p-value of a small-n table (few distinct tables, many ties)
/// drops by chance, and the exact test's size exceeds α: hence the relative tolerance.
pub fn monte_carlo_p_value(observed: f64, simulated: &mut [f64], alpha: f64) -> (f64, f64) {
    let m = simulated.len();
    let floor = observed - TIE_TOLERANCE * observed.abs();
    let exceed = simulated.iter().filter(|&&t| t >= floor).count();
    let p = (1 + exceed) as f64 / (m + 1) as f64;
    let rank = (((m + 1) as f64) * (1.0 - alpha)).ceil() as usize;
    // Selected, not sorted: the element a sort by `total_cmp` puts at this index, in
    // linear time (values equal under `total_cmp` have the same bits).
    let at = rank.saturating_sub(1).min(m.saturating_sub(1));
    let tau = if m == 0 {
        f64::INFINITY
    } else {
        *simulated
            .select_nth_unstable_by(at, |a, b| a.total_cmp(b))
            .1
    };
    (p, tau)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kept laws draw the null sketches `sample_null_sketch` draws, one by one from
    /// the same generator: simulated p-values are unchanged.
    #[test]
    fn null_sampler_draws_as_sample_null_sketch() {
        use crate::mechanism::Grr;
        use rand::rngs::StdRng;
        use rand::SeedableRng;
        let p0 = [0.1, 0.2, 0.3, 0.15, 0.25];
        for (seed, m) in [
            Mechanism::Grr(Grr::new(1.0, 5).unwrap()),
            Mechanism::Raw { domain: 5 },
        ]
        .into_iter()
        .enumerate()
        {
            for n in [0u64, 3, 37, 5_000] {
                let observed = Sketch::Counts(CountSketch::from_counts(vec![n, 0, 0, 0, 0]));
                let (mut a, mut b) = (
                    StdRng::seed_from_u64(seed as u64 + n),
                    StdRng::seed_from_u64(seed as u64 + n),
                );
                let mut sampler = NullSampler::new(&m, &observed, &p0);
                for _ in 0..200 {
                    assert_eq!(
                        sampler.sample(&mut a).unwrap(),
                        sample_null_sketch(&m, &observed, &p0, &mut b).unwrap()
                    );
                }
            }
        }
    }

    proptest::proptest! {
        /// The critical value is selected, not sorted: the same bits as the element a
        /// sort by `total_cmp` puts at the rank, with ties, zeros of both signs and
        /// infinities among the statistics, at every α and number of samples.
        #[test]
        fn the_selected_critical_value_is_the_sorted_one(
            values in proptest::collection::vec(0u8..12, 0..60),
            alpha in 0.001f64..0.999,
        ) {
            let pick = [0.0, -0.0, 1.0, 1.0, 2.5, 1e-300, f64::INFINITY, 7.25, 3.0, 0.5, 2.5, 9.0];
            let mut simulated: Vec<f64> = values.iter().map(|&v| pick[v as usize]).collect();
            let mut sorted = simulated.clone();
            sorted.sort_by(|a, b| a.total_cmp(b));
            let m = sorted.len();
            let rank = (((m + 1) as f64) * (1.0 - alpha)).ceil() as usize;
            let expected = sorted
                .get(rank.saturating_sub(1).min(m.saturating_sub(1)))
                .copied()
                .unwrap_or(f64::INFINITY);
            let (_, tau) = monte_carlo_p_value(2.5, &mut simulated, alpha);
            proptest::prop_assert_eq!(tau.to_bits(), expected.to_bits());
        }
    }

    /// Statistics equal but for the order of a float sum are ties: both count as `≥`.
    #[test]
    fn ties_up_to_rounding_count_as_at_least_the_observed() {
        let terms = [0.1, 0.2, 0.3];
        let forward: f64 = terms.iter().sum();
        let backward: f64 = terms.iter().rev().sum();
        assert_ne!(
            forward.to_bits(),
            backward.to_bits(),
            "the sums must differ in bits"
        );
        let (hi, lo) = (forward.max(backward), forward.min(backward));
        let (p, _) = monte_carlo_p_value(hi, &mut [lo, lo, 0.0], 0.05);
        assert_eq!(p, 3.0 / 4.0);
        // A real difference is not a tie.
        let (p, _) = monte_carlo_p_value(hi, &mut [hi * (1.0 - 1e-9), 0.0, 0.0], 0.05);
        assert_eq!(p, 1.0 / 4.0);
    }
}
