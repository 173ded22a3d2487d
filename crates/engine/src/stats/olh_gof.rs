//! OlhSupportGOF: the identity test for OLH with a fixed seed pool (docs/STATISTICS.md
//! §3.3). Conditional on how many reports each pool index got (ancillary: the index is
//! uniform whatever x), row i of the table is Multinomial(n_i, P_i) under H0 with
//! `P_i(y) = q + (p − q)·Σ_x p0_x [h_i(x) = y]`. The statistic is the quadratic form
//! `T = Σ_v (C_v − E_v)²/V_v` in the support counts `C_v = Σ_i T[i, h_i(v)]`, with their
//! exact conditional null means and variances; its law is simulated by drawing the rows
//! exactly, so the test is exact for the fixed pool at every n.

use rand::rngs::StdRng;
use rand::SeedableRng;

use super::monte_carlo::{monte_carlo_p_value, sample_multinomial};
use super::multinomial::MultinomialSampler;
use super::GofResult;
use crate::error::EngineError;
use crate::mechanism::Olh;
use crate::sketch::PoolSketch;

/// The most `mc_samples × S × (d + g)` (hashes and binomial draws) one simulated p-value
/// may cost; beyond it the record is inconclusive and says why. 2^32 take a few seconds.
pub const MAX_OLH_MONTE_CARLO_WORK: u64 = 1 << 32;

/// The most (row, cell, remaining count) binomial laws a simulated p-value keeps across its
/// samples (a few MiB). Building a law computes a `powf`, and at small row totals the same
/// laws come back in every sample: they were a third of a sequential OLH batch over
/// many groups (benches/RESULTS.md, issue 44). Above it each draw builds its law.
const MAX_KEPT_OLH_LAWS: u64 = 1 << 16;

/// The exact conditional null moments of the support counts, given the row totals.
#[derive(Debug, Clone)]
pub struct OlhNull {
    /// `P_i(y)`, row-major S × g.
    pub laws: Vec<f64>,
    pub row_totals: Vec<u64>,
    /// `E_v = Σ_i n_i P_i(h_i(v))`.
    pub mean: Vec<f64>,
    /// `V_v = Σ_i n_i P_i(h_i(v))(1 − P_i(h_i(v)))` (the diagonal of the exact covariance).
    pub variance: Vec<f64>,
}

impl OlhNull {
    pub fn new(m: &Olh, p0: &[f64], row_totals: Vec<u64>) -> Self {
        let laws = m.row_laws(p0);
        let g = m.g() as usize;
        let scaled = |f: fn(f64) -> f64| -> Vec<f64> {
            laws.chunks_exact(g)
                .zip(&row_totals)
                .flat_map(|(row, &ni)| row.iter().map(move |&pr| ni as f64 * f(pr)))
                .collect()
        };
        let mean = m.gather(&scaled(|pr| pr));
        let variance = m.gather(&scaled(|pr| pr * (1.0 - pr)));
        OlhNull {
            laws,
            row_totals,
            mean,
            variance,
        }
    }

    /// `T = Σ_v (C_v − E_v)²/V_v` of one table.
    pub fn statistic(&self, m: &Olh, table: &[u64]) -> f64 {
        m.supports(table)
            .iter()
            .zip(self.mean.iter().zip(&self.variance))
            .map(|(&c, (&e, &v))| {
                if v > 0.0 {
                    (c as f64 - e).powi(2) / v
                } else {
                    0.0
                }
            })
            .sum()
    }

    /// Each non-empty row's sampler, keeping its laws when all of them fit in
    /// [`MAX_KEPT_OLH_LAWS`]. An empty row draws nothing, so leaving it out changes no draw.
    fn row_samplers(&self, g: usize) -> Vec<(usize, MultinomialSampler)> {
        let kept: u64 = self
            .row_totals
            .iter()
            .filter(|&&ni| ni > 0)
            .map(|&ni| MultinomialSampler::kept_laws(ni, g))
            .fold(0, u64::saturating_add);
        let keep = kept <= MAX_KEPT_OLH_LAWS;
        self.laws
            .chunks_exact(g)
            .zip(&self.row_totals)
            .enumerate()
            .filter(|(_, (_, &ni))| ni > 0)
            .map(|(i, (law, &ni))| {
                let sampler = if keep {
                    MultinomialSampler::new(ni, law)
                } else {
                    MultinomialSampler::once(ni, law)
                };
                (i, sampler)
            })
            .collect()
    }

    /// One table drawn exactly under H0 with the observed row totals.
    pub fn sample_table<R: rand::Rng + ?Sized>(
        &self,
        g: usize,
        rng: &mut R,
    ) -> Result<Vec<u64>, EngineError> {
        let mut table = Vec::with_capacity(self.laws.len());
        for (law, &ni) in self.laws.chunks_exact(g).zip(&self.row_totals) {
            table.extend(sample_multinomial(rng, ni, law)?);
        }
        Ok(table)
    }
}

/// Runs OlhSupportGOF on a snapshot (`n > 0`), always Monte Carlo calibrated.
pub fn olh_gof(
    m: &Olh,
    sketch: &PoolSketch,
    p0: &[f64],
    mc_samples: u32,
    seed: u64,
    alpha: f64,
) -> Result<GofResult, EngineError> {
    let null = OlhNull::new(m, p0, sketch.row_totals());
    let statistic = null.statistic(m, sketch.table());
    let mut result = GofResult {
        statistic,
        df: None,
        p_value: None,
        asymptotic_p_value: None,
        reject: false,
        mc_p_value: None,
        critical_value: None,
        tv_distance: None,
        calibration_reason: None,
        inconclusive_reason: None,
    };
    let work = u64::from(mc_samples)
        .saturating_mul(u64::from(m.pool_size()))
        .saturating_mul(u64::from(m.domain()) + u64::from(m.g()));
    if work > MAX_OLH_MONTE_CARLO_WORK {
        result.inconclusive_reason = Some(format!(
            "simulating OlhSupportGOF's null ({mc_samples} samples × pool_size {} × \
             (domain {} + g {})) exceeds the {MAX_OLH_MONTE_CARLO_WORK} steps one snapshot \
             may cost: lower mc_samples or pool_size",
            m.pool_size(),
            m.domain(),
            m.g()
        ));
        return Ok(result);
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let g = m.g() as usize;
    let mut simulated = Vec::with_capacity(mc_samples as usize);
    // The draws of `sample_table`, row by row in order, into one reused table.
    let mut samplers = null.row_samplers(g);
    let mut table = vec![0u64; null.laws.len()];
    let mut row = Vec::with_capacity(g);
    for _ in 0..mc_samples {
        for (i, sampler) in &mut samplers {
            sampler.sample_into(&mut rng, &mut row)?;
            table[*i * g..(*i + 1) * g].copy_from_slice(&row);
        }
        simulated.push(null.statistic(m, &table));
    }
    let (p, tau) = monte_carlo_p_value(statistic, &mut simulated, alpha);
    result.p_value = Some(p);
    result.mc_p_value = Some(p);
    result.critical_value = Some(tau);
    result.reject = p <= alpha;
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Monte Carlo null as it was drawn before its row samplers were kept across
    /// samples (issue 44's speed work): a fresh `sample_table` per sample. The p-value,
    /// the critical value and so the records must not change, whether the laws are kept
    /// (small rows) or not (rows past `MAX_KEPT_OLH_LAWS`), with empty rows among them.
    #[test]
    fn kept_row_samplers_draw_the_same_null() {
        let m = Olh::new(1.0, 12, 4, 64, 9).unwrap();
        let p0 = vec![1.0 / 12.0; 12];
        for scale in [1u64, 3, 2_000] {
            let table: Vec<u64> = (0..64u64)
                .flat_map(|i| {
                    (0..4u64).map(move |y| {
                        if i % 5 == 0 {
                            0
                        } else {
                            (i * 7 + y * 3) % 5 * scale
                        }
                    })
                })
                .collect();
            let sketch = PoolSketch::from_table(4, table).unwrap();
            let got = olh_gof(&m, &sketch, &p0, 99, 17, 0.05).unwrap();
            let null = OlhNull::new(&m, &p0, sketch.row_totals());
            let mut rng = StdRng::seed_from_u64(17);
            let mut simulated: Vec<f64> = (0..99)
                .map(|_| null.statistic(&m, &null.sample_table(4, &mut rng).unwrap()))
                .collect();
            let (p, tau) =
                monte_carlo_p_value(null.statistic(&m, sketch.table()), &mut simulated, 0.05);
            assert_eq!(got.p_value, Some(p), "scale {scale}");
            assert_eq!(got.critical_value.map(f64::to_bits), Some(tau.to_bits()));
        }
    }
}
