//! The simulated null statistics of a Monte Carlo GOF p-value (docs/STATISTICS.md §6).
//!
//! At 10⁵ small groups, 999 null tables each, this is most of a grouped `batch` (issue 45).
//! A count table whose statistic is a Pearson walk (GenRR's LocalExpGOF and ChannelGOF,
//! raw PearsonGOF, a channel's ChannelGOF) is drawn into one reused buffer and walked
//! there, without a table, a sketch and a walk of its cells allocated per draw; and, at
//! the small n a simulation is used at, each cell's term `(h − n·q_j)²/(n·q_j)` is
//! computed once per count h instead of once per draw. The draws are the same, and each
//! statistic adds the same terms (the same doubles, from the same operations) in the same
//! order as the walk of the drawn sketch, so every simulated statistic, and every record,
//! keeps its bits (the GOF tests' `fast_simulation_is_the_sketch_walk`).

use ldpstream_config::TestMethod;
use rand::rngs::StdRng;
use rand::SeedableRng;

use super::monte_carlo::NullSampler;
use crate::error::EngineError;
use crate::mechanism::Mechanism;
use crate::sketch::Sketch;

/// The most (cell, count) terms kept per simulated p-value; beyond it (large n, where a
/// simulation is rare) each draw computes its terms.
const MAX_KEPT_TERMS: usize = 1 << 13;

/// The probabilities a count table's Pearson statistic is walked against, where that walk
/// is the test's statistic; None for the other statistics.
pub(crate) fn pearson_cells(
    mechanism: &Mechanism,
    method: TestMethod,
    p0: &[f64],
) -> Option<Vec<f64>> {
    match (method, mechanism.channel()) {
        (TestMethod::LocalExpGOF | TestMethod::ChannelGOF, Mechanism::Grr(m)) => {
            Some(m.report_law_cells(p0).collect())
        }
        (TestMethod::PearsonGOF, Mechanism::Raw { .. }) => Some(p0.to_vec()),
        (TestMethod::ChannelGOF, Mechanism::Channel(m)) => Some(m.signal_law(p0)),
        _ => None,
    }
}

/// What a simulated p-value draws: `samples` null sketches of `sketch`'s law under `p0`,
/// from the generator seeded with `seed`.
pub(crate) struct Simulation<'a> {
    pub mechanism: &'a Mechanism,
    pub method: TestMethod,
    pub sketch: &'a Sketch,
    pub p0: &'a [f64],
    pub samples: u32,
    pub seed: u64,
}

/// The statistics of the simulation's null sketches, in draw order. `statistic_of` is the
/// test's statistic of one drawn sketch, used where the Pearson walk of a count table is
/// not the statistic.
pub(crate) fn simulate_statistics(
    sim: &Simulation,
    statistic_of: impl Fn(&Sketch) -> Result<f64, EngineError>,
) -> Result<Vec<f64>, EngineError> {
    let mut rng = StdRng::seed_from_u64(sim.seed);
    let draws = sim.samples as usize;
    let mut simulated = Vec::with_capacity(draws);
    let mut null_law = NullSampler::new(sim.mechanism, sim.sketch, sim.p0);
    let cells = pearson_cells(sim.mechanism, sim.method, sim.p0);
    if let (Some(cells), Some(counts)) = (cells, null_law.counts_mut()) {
        let terms = PearsonTerms::new(sim.sketch.n(), cells);
        let mut table = Vec::with_capacity(terms.cells.len());
        for _ in 0..draws {
            counts.sample_into(&mut rng, &mut table)?;
            simulated.push(terms.statistic(&table));
        }
        return Ok(simulated);
    }
    for _ in 0..draws {
        let null = null_law.sample(&mut rng)?;
        simulated.push(statistic_of(&null)?);
    }
    Ok(simulated)
}

/// Pearson's statistic of tables of `n` reports against fixed cell probabilities, as the
/// walk over a sketch's cells computes it: `T = Σ (h_j − n·q_j)²/(n·q_j)` over the cells
/// with `q_j > 0`, in cell order, infinite when a cell with `q_j = 0` holds a report.
struct PearsonTerms {
    cells: Vec<f64>,
    expected: Vec<f64>,
    /// `terms[j·(n+1) + h]`, cell j's term at count h, when the table is small (empty
    /// otherwise).
    terms: Vec<f64>,
    row: usize,
}

impl PearsonTerms {
    fn new(n: u64, cells: Vec<f64>) -> Self {
        let nf = n as f64;
        let expected: Vec<f64> = cells.iter().map(|&q| nf * q).collect();
        let row = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_add(1))
            .filter(|&row| row.saturating_mul(cells.len()) <= MAX_KEPT_TERMS)
            .unwrap_or(0);
        let terms = if row == 0 {
            Vec::new()
        } else {
            expected
                .iter()
                .flat_map(|&e| (0..row).map(move |h| term(h as u64, e)))
                .collect()
        };
        PearsonTerms {
            cells,
            expected,
            terms,
            row,
        }
    }

    /// The statistic of `counts` (one per cell, summing to n).
    fn statistic(&self, counts: &[u64]) -> f64 {
        let mut statistic = 0.0;
        if self.terms.is_empty() {
            for ((&h, &q), &e) in counts.iter().zip(&self.cells).zip(&self.expected) {
                if q > 0.0 {
                    statistic += term(h, e);
                } else if h > 0 {
                    statistic = f64::INFINITY;
                }
            }
            return statistic;
        }
        for ((&h, &q), cell) in counts
            .iter()
            .zip(&self.cells)
            .zip(self.terms.chunks_exact(self.row))
        {
            if q > 0.0 {
                // h ≤ n: a count of n reports.
                statistic += cell[h as usize];
            } else if h > 0 {
                statistic = f64::INFINITY;
            }
        }
        statistic
    }
}

/// One cell's Pearson term at count `h` and expected count `e`, as the walk computes it.
fn term(h: u64, e: f64) -> f64 {
    let diff = h as f64 - e;
    diff * diff / e
}
