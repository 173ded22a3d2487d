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
use super::GofResult;
use crate::error::EngineError;
use crate::mechanism::Olh;
use crate::sketch::PoolSketch;

/// The most `mc_samples × S × (d + g)` (hashes and binomial draws) one simulated p-value
/// may cost; beyond it the record is inconclusive and says why. 2^32 take a few seconds.
pub const MAX_OLH_MONTE_CARLO_WORK: u64 = 1 << 32;

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
    for _ in 0..mc_samples {
        simulated.push(null.statistic(m, &null.sample_table(g, &mut rng)?));
    }
    let (p, tau) = monte_carlo_p_value(statistic, &mut simulated, alpha);
    result.p_value = Some(p);
    result.mc_p_value = Some(p);
    result.critical_value = Some(tau);
    result.reject = p <= alpha;
    Ok(result)
}
