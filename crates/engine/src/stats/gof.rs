//! Identity (goodness-of-fit) tests: picks the statistic for the mechanism and method, and
//! calibrates it asymptotically or by Monte Carlo.

use ldpstream_config::{Calibration, TestMethod};

use super::bitflip_gof::local_bitflip_gof;
use super::gof_simulation::{simulate_statistics, Simulation};
use super::monte_carlo::monte_carlo_p_value;
use super::row_conditioned::row_conditioned_chi2;
use super::sheffet::tv_distance;
use super::subset_gof::subset_gof;
use super::{
    chi2_sf, local_exp_gof_cells, noise_statistic, pearson_gof, pearson_gof_cells,
    pearson_statistic_cells, Decision,
};
use crate::error::EngineError;
use crate::mechanism::{Mechanism, NoiseKind, Subset};
use crate::sketch::Sketch;

/// Below this many expected reports per category under the null (`n · min_j p0_j`), the χ²
/// law of a GOF statistic is not trusted and the p-value is simulated instead. It is
/// Cochran's rule (every expected cell count at least 5), the rule seed 002 applies to its
/// independence tests, stated on the true categories: for GenRR and bit flip every
/// privatized cell then expects at least as many reports (randomization moves each report
/// law towards uniform). Below it the asymptotic LocalExpGOF rejected a true uniform null
/// over 10 categories (ε = 1) 9.9% of the time at n = 2 and 8.6% at n = 5 (α = 0.05).
pub const MIN_EXPECTED_PER_CATEGORY: f64 = 5.0;

/// The most work (`mc_samples × d`, one simulated sketch of d cells per sample) an
/// automatic switch to Monte Carlo may cost; beyond it the record is inconclusive instead.
/// 2^24 cells take about a second.
pub const MAX_AUTO_MONTE_CARLO_CELLS: u64 = 1 << 24;

/// The most work a configured simulation (`calibration = "monte_carlo"`) may cost per
/// snapshot, in the same units: a k-subset null is drawn report by report, so without a
/// bound a large stream would hold its snapshot for hours (99 samples × 10⁸ reports ×
/// k). 2^32 take a few seconds, as for OLH ([`super::MAX_OLH_MONTE_CARLO_WORK`]).
pub const MAX_CONFIGURED_MONTE_CARLO_WORK: u64 = 1 << 32;

/// The work of one simulated null sketch, in cells: d, except for k-subset, whose null is
/// drawn report by report (n·k items; its item counts have no cheap joint law).
fn null_sample_cost(mechanism: &Mechanism, n: u64, d: usize) -> u64 {
    match mechanism {
        Mechanism::Subset(m) => n.saturating_mul(u64::from(m.k())).max(d as u64),
        _ => d as u64,
    }
}

/// What a GOF test needs beyond the sketch.
#[derive(Debug, Clone, Copy)]
pub struct GofParams<'a> {
    pub method: TestMethod,
    pub p0: &'a [f64],
    pub alpha: f64,
    pub calibration: Calibration,
    pub mc_samples: u32,
    pub seed: u64,
    /// SheffetTV's distance parameter.
    pub distance: Option<f64>,
}

/// The outcome of a GOF test.
#[derive(Debug, Clone, PartialEq)]
pub struct GofResult {
    pub statistic: f64,
    pub df: Option<u32>,
    /// The p-value the decision uses: the Monte Carlo one whenever null sketches were
    /// simulated (`calibration = "monte_carlo"`, or Laplace noise, which has no usable
    /// asymptotic law), else the asymptotic one. None for SheffetTV.
    pub p_value: Option<f64>,
    /// The asymptotic (χ²) p-value, kept beside a Monte Carlo `p_value` for comparison;
    /// None when the statistic has no asymptotic law (SheffetTV, Laplace noise).
    pub asymptotic_p_value: Option<f64>,
    pub reject: bool,
    /// The Monte Carlo p-value, when one was computed.
    pub mc_p_value: Option<f64>,
    /// The Monte Carlo critical value τ (reject iff statistic > τ), when computed.
    pub critical_value: Option<f64>,
    /// SheffetTV: d_TV between the debiased estimate and p0.
    pub tv_distance: Option<f64>,
    /// Why the p-value was simulated although the configured calibration is asymptotic
    /// (too few reports per category for the χ² law).
    pub calibration_reason: Option<String>,
    /// Why no decision was made (too few reports per category, and a simulation that
    /// could not be afforded or would be too coarse); `reject` is then false.
    pub inconclusive_reason: Option<String>,
}

/// Whether the χ² law of `method` at `n` reports is trusted; if not, why.
fn too_few_reports(
    mechanism: &Mechanism,
    method: TestMethod,
    n: u64,
    p0: &[f64],
) -> Option<String> {
    if method == TestMethod::SheffetTV {
        return None;
    }
    if let Mechanism::Subset(m) = mechanism {
        return too_few_subset_reports(m, n, p0);
    }
    let smallest = p0.iter().cloned().fold(f64::INFINITY, f64::min);
    let expected = n as f64 * smallest;
    (expected < MIN_EXPECTED_PER_CATEGORY).then(|| {
        format!(
            "n · min p0 = {expected:.3} expected reports in the rarest category, below \
             {MIN_EXPECTED_PER_CATEGORY}: the asymptotic χ² law is not reliable"
        )
    })
}

/// Cochran's rule on k-subset's item counts, each Binomial(n, f_j) with
/// `f_j = q + α p0_j`: both n·f_j and n·(1 − f_j) at least 5. A category with p0_j = 0 is
/// still held by about n·q reports, so an empty null category alone, which the rule on
/// p0 would send to a simulation drawn report by report at every n, does not.
fn too_few_subset_reports(m: &Subset, n: u64, p0: &[f64]) -> Option<String> {
    let tail = p0
        .iter()
        .map(|&p| {
            let f = m.q() + m.alpha() * p;
            f.min(1.0 - f)
        })
        .fold(f64::INFINITY, f64::min);
    let expected = n as f64 * tail;
    (expected < MIN_EXPECTED_PER_CATEGORY).then(|| {
        format!(
            "n · min(f, 1 − f) = {expected:.3} expected reports holding (or lacking) the \
             rarest item under the null, below {MIN_EXPECTED_PER_CATEGORY}: the asymptotic χ² \
             law is not reliable"
        )
    })
}

fn mismatch(method: TestMethod, mechanism: &Mechanism) -> EngineError {
    EngineError::InvalidParameter {
        name: "method",
        value: format!("{} on a {} stream", method.name(), mechanism.kind()),
        allowed: "a method that applies to the stream's mechanism",
    }
}

/// [`gof_statistic`]'s statistic of one simulated table, to the bit, without the χ² tail
/// the p-value is simulated in place of (the count tables' Pearson walk; the other kinds
/// go through [`gof_statistic`]).
fn simulated_statistic(
    mechanism: &Mechanism,
    method: TestMethod,
    sketch: &Sketch,
    p0: &[f64],
) -> Result<f64, EngineError> {
    Ok(match (method, mechanism.channel(), sketch) {
        (
            TestMethod::LocalExpGOF | TestMethod::ChannelGOF,
            Mechanism::Grr(m),
            Sketch::Counts(s),
        ) => pearson_statistic_cells(s.nonzero(), s.n(), m.report_law_cells(p0)).0,
        (TestMethod::PearsonGOF, Mechanism::Raw { .. }, Sketch::Counts(s)) => {
            pearson_statistic_cells(s.nonzero(), s.n(), p0.iter().copied()).0
        }
        _ => gof_statistic(mechanism, method, sketch, p0)?.statistic,
    })
}

/// The test statistic and its asymptotic law, without any simulation.
pub fn gof_statistic(
    mechanism: &Mechanism,
    method: TestMethod,
    sketch: &Sketch,
    p0: &[f64],
) -> Result<Decision, EngineError> {
    let mechanism = mechanism.channel();
    let d = p0.len() as u32;
    Ok(match (method, mechanism, sketch) {
        // The GenRR and raw tables may be sparse (d up to 2^24): walked by their non-zero
        // cells, never expanded.
        (
            TestMethod::LocalExpGOF | TestMethod::ChannelGOF,
            Mechanism::Grr(m),
            Sketch::Counts(s),
        ) => local_exp_gof_cells(m, s.nonzero(), s.n(), p0),
        (TestMethod::ChannelGOF, Mechanism::Channel(m), Sketch::Counts(s)) => {
            pearson_gof(&s.counts(), &m.signal_law(p0))
        }
        (TestMethod::PearsonGOF, Mechanism::Raw { .. }, Sketch::Counts(s)) => {
            pearson_gof_cells(s.nonzero(), s.n(), p0.iter().copied())
        }
        (TestMethod::LocalBitFlipGOF, Mechanism::BitFlip(m), Sketch::Bits(s)) => {
            local_bitflip_gof(m, s.bit_counts(), s.n(), p0)
        }
        (TestMethod::SubsetGOF, Mechanism::Subset(m), Sketch::Bits(s)) => {
            subset_gof(m, s.bit_counts(), s.n(), p0)
        }
        (TestMethod::LocalNoiseGOF, Mechanism::Noise(m), Sketch::Sums(s)) => {
            let t = noise_statistic(&s.sums_f64(), s.n(), p0, m.variance());
            let df = d.saturating_sub(1);
            Decision::chi2(t, df, chi2_sf(df, t))
        }
        // Conditioned on the rows' report counts (row_conditioned.rs): Sheffet's own θ
        // assumes rows drawn uniformly, and any other row choice rejected a true null.
        (
            TestMethod::SheffetChi2,
            Mechanism::Hadamard(_) | Mechanism::Cohort(_),
            Sketch::Signed(s),
        ) => {
            let (t, df) = row_conditioned_chi2(mechanism, s.plus(), s.minus(), p0)?;
            Decision::chi2(t, df, chi2_sf(df, t))
        }
        (TestMethod::OlhSupportGOF, Mechanism::Olh(m), Sketch::Pool(s)) => Decision {
            statistic: super::OlhNull::new(m, p0, s.row_totals()).statistic(m, s.table()),
            df: None,
            p_value: None,
        },
        (
            TestMethod::SheffetTV,
            Mechanism::Hadamard(_) | Mechanism::Cohort(_),
            Sketch::Signed(_),
        ) => {
            let estimate = mechanism.estimate(sketch)?.estimate;
            Decision {
                statistic: tv_distance(&estimate, p0),
                df: None,
                p_value: None,
            }
        }
        _ => return Err(mismatch(method, mechanism)),
    })
}

/// Runs a GOF test on a snapshot (`sketch.n() > 0`).
pub fn run_gof(
    mechanism: &Mechanism,
    sketch: &Sketch,
    params: &GofParams,
) -> Result<GofResult, EngineError> {
    let mechanism = mechanism.channel();
    // Always simulated, from the exact conditional null of the fixed pool.
    if let (TestMethod::OlhSupportGOF, Mechanism::Olh(m), Sketch::Pool(s)) =
        (params.method, mechanism, sketch)
    {
        return super::olh_gof(
            m,
            s,
            params.p0,
            params.mc_samples,
            params.seed,
            params.alpha,
        );
    }
    let asymptotic = gof_statistic(mechanism, params.method, sketch, params.p0)?;
    let statistic = asymptotic.statistic;
    let laplace =
        matches!(mechanism, Mechanism::Noise(m) if matches!(m.kind(), NoiseKind::Laplace { .. }));
    let configured = params.calibration == Calibration::MonteCarlo || laplace;
    let small = if configured {
        None
    } else {
        too_few_reports(mechanism, params.method, sketch.n(), params.p0)
    };
    let mut calibration_reason = None;
    let mut inconclusive_reason = None;
    let work = u64::from(params.mc_samples).saturating_mul(null_sample_cost(
        mechanism,
        sketch.n(),
        params.p0.len(),
    ));
    if configured && work > MAX_CONFIGURED_MONTE_CARLO_WORK {
        inconclusive_reason = Some(format!(
            "simulating the null ({} samples × {} cells or reports each) exceeds the \
             {MAX_CONFIGURED_MONTE_CARLO_WORK} steps one snapshot may cost: lower mc_samples, \
             or use calibration = \"asymptotic\" at this n",
            params.mc_samples,
            null_sample_cost(mechanism, sketch.n(), params.p0.len())
        ));
    }
    if let Some(why) = small {
        let cells = u64::from(params.mc_samples).saturating_mul(null_sample_cost(
            mechanism,
            sketch.n(),
            params.p0.len(),
        ));
        if f64::from(params.mc_samples) * params.alpha <= 1.0 {
            inconclusive_reason = Some(format!(
                "{why}, and mc_samples = {} is too few for a simulated p-value at alpha = {} \
                 (it must exceed 1/alpha)",
                params.mc_samples, params.alpha
            ));
        } else if cells > MAX_AUTO_MONTE_CARLO_CELLS {
            inconclusive_reason = Some(format!(
                "{why}, and simulating its null ({} samples × {} cells) exceeds the \
                 {MAX_AUTO_MONTE_CARLO_CELLS} cells an automatic simulation may cost",
                params.mc_samples,
                null_sample_cost(mechanism, sketch.n(), params.p0.len())
            ));
        } else {
            calibration_reason = Some(format!("{why}; the p-value is simulated"));
        }
    }
    let simulate = (configured && inconclusive_reason.is_none()) || calibration_reason.is_some();
    let (mc_p_value, critical_value) = if simulate && params.method != TestMethod::SheffetTV {
        let simulation = Simulation {
            mechanism,
            method: params.method,
            sketch,
            p0: params.p0,
            samples: params.mc_samples,
            seed: params.seed,
        };
        let mut simulated = simulate_statistics(&simulation, |null| {
            simulated_statistic(mechanism, params.method, null, params.p0)
        })?;
        let (p, tau) = monte_carlo_p_value(statistic, &mut simulated, params.alpha);
        (Some(p), Some(tau))
    } else {
        (None, None)
    };
    // The decision, the q-value and the record's p_value all come from one p-value: the
    // simulated one when there is one. `p ≤ α` is the same event as `T > τ` (no ties).
    let (p_value, reject) = match (params.method, mc_p_value) {
        (TestMethod::SheffetTV, _) => {
            let half = params.distance.unwrap_or(f64::INFINITY) / 2.0;
            (None, statistic > half)
        }
        (_, Some(p)) => (Some(p), p <= params.alpha),
        (_, None) if inconclusive_reason.is_some() => (None, false),
        (_, None) => (
            asymptotic.p_value,
            asymptotic.p_value.is_some_and(|p| p < params.alpha),
        ),
    };
    // Laplace's "asymptotic" χ² law is not valid (seed 002 §5.1): neither its p-value nor
    // its df are shown.
    let (asymptotic_p_value, df) = if laplace {
        (None, None)
    } else {
        (asymptotic.p_value, asymptotic.df)
    };
    Ok(GofResult {
        statistic,
        df,
        p_value,
        asymptotic_p_value,
        reject,
        mc_p_value,
        critical_value,
        tv_distance: (params.method == TestMethod::SheffetTV).then_some(statistic),
        calibration_reason,
        inconclusive_reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mechanism::Grr;
    use crate::stats::gof_simulation::pearson_cells;
    use crate::stats::local_exp_gof;
    use crate::stats::monte_carlo::NullSampler;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    proptest::proptest! {
        /// A simulated table's statistic, computed without the χ² tail, has the bits of
        /// the statistic `gof_statistic` gives the same table (so simulated p-values are
        /// unchanged), for GenRR and raw counts, empty cells and impossible ones included.
        #[test]
        fn simulated_statistic_is_gof_statistic(
            counts in proptest::collection::vec(0u64..30, 2..20),
            weights in proptest::collection::vec(0u32..4, 20),
            eps in 0.1f64..4.0,
        ) {
            let d = counts.len();
            let w: Vec<f64> = weights[..d].iter().map(|&x| f64::from(x) + 0.25 * f64::from(x % 2)).collect();
            let total: f64 = w.iter().sum();
            let p0: Vec<f64> = if total > 0.0 { w.iter().map(|x| x / total).collect() } else { vec![1.0 / d as f64; d] };
            let sketch = Sketch::Counts(crate::sketch::CountSketch::from_counts(counts));
            let cases = [
                (Mechanism::Grr(Grr::new(eps, d as u32).unwrap()), TestMethod::LocalExpGOF),
                (Mechanism::Grr(Grr::new(eps, d as u32).unwrap()), TestMethod::ChannelGOF),
                (Mechanism::Raw { domain: d as u32 }, TestMethod::PearsonGOF),
            ];
            for (m, method) in cases {
                let full = gof_statistic(&m, method, &sketch, &p0).unwrap().statistic;
                let fast = simulated_statistic(&m, method, &sketch, &p0).unwrap();
                proptest::prop_assert_eq!(full.to_bits(), fast.to_bits());
            }
        }
    }

    /// The simulated statistics drawn into one buffer (`simulate_statistics`) are, bit
    /// for bit and in order, those of drawing each null sketch and walking it: for every
    /// count table with a Pearson statistic (GenRR, raw, a channel), at the small n where
    /// the laws are kept and past the table of kept laws, with impossible null cells.
    #[test]
    fn fast_simulation_is_the_sketch_walk() {
        use crate::mechanism::Channel;
        let p0 = [0.1, 0.0, 0.3, 0.25, 0.35];
        let channel = Channel::new(&[
            vec![0.6, 0.1, 0.1, 0.1, 0.1],
            vec![0.1, 0.6, 0.1, 0.1, 0.1],
            vec![0.1, 0.1, 0.6, 0.1, 0.1],
            vec![0.1, 0.1, 0.1, 0.6, 0.1],
            vec![0.1, 0.1, 0.1, 0.1, 0.6],
        ])
        .unwrap();
        let cases = [
            (
                Mechanism::Grr(Grr::new(1.0, 5).unwrap()),
                TestMethod::LocalExpGOF,
            ),
            (
                Mechanism::Grr(Grr::new(0.5, 5).unwrap()),
                TestMethod::ChannelGOF,
            ),
            (Mechanism::Raw { domain: 5 }, TestMethod::PearsonGOF),
            (
                Mechanism::Channel(Box::new(channel)),
                TestMethod::ChannelGOF,
            ),
        ];
        for (case, (mechanism, method)) in cases.into_iter().enumerate() {
            for n in [1u64, 6, 37, 900, 5_000, 1 << 22] {
                let sketch =
                    Sketch::Counts(crate::sketch::CountSketch::from_counts(vec![n, 0, 0, 0, 0]));
                let params = GofParams {
                    method,
                    p0: &p0,
                    alpha: 0.05,
                    calibration: Calibration::MonteCarlo,
                    mc_samples: 199,
                    seed: 17 * case as u64 + n,
                    distance: None,
                };
                assert!(pearson_cells(&mechanism, method, &p0).is_some());
                let simulation = Simulation {
                    mechanism: &mechanism,
                    method,
                    sketch: &sketch,
                    p0: &p0,
                    samples: params.mc_samples,
                    seed: params.seed,
                };
                let fast = simulate_statistics(&simulation, |_| panic!("not walked")).unwrap();
                let mut rng = StdRng::seed_from_u64(params.seed);
                let mut null_law = NullSampler::new(&mechanism, &sketch, &p0);
                let walked: Vec<u64> = (0..params.mc_samples)
                    .map(|_| {
                        let null = null_law.sample(&mut rng).unwrap();
                        simulated_statistic(&mechanism, method, &null, &p0)
                            .unwrap()
                            .to_bits()
                    })
                    .collect();
                let fast: Vec<u64> = fast.iter().map(|t| t.to_bits()).collect();
                assert_eq!(fast, walked, "case {case}, n = {n}");
            }
        }
    }

    /// A sparse GenRR table (d = 2^17) is tested by its non-zero cells: the same statistic,
    /// to the bit, as the dense table of the same counts.
    #[test]
    fn a_sparse_table_tests_as_its_dense_counts() {
        let d = 1u32 << 17;
        let grr = Grr::new(1.0, d).unwrap();
        let mechanism = Mechanism::Grr(grr);
        let mut sketch = mechanism.new_sketch();
        let reports: Vec<u32> = (0..5000u32).map(|i| (i * 7919) % d).collect();
        let reports = arrow_array::UInt32Array::from(reports);
        crate::kernels::fold_batch(&mechanism, &mut sketch, &reports, None).unwrap();
        let Sketch::Counts(counts) = &sketch else {
            panic!("GenRR folds into counts")
        };
        assert!(counts.is_sparse());
        let p0 = vec![1.0 / f64::from(d); d as usize];
        for method in [TestMethod::LocalExpGOF, TestMethod::ChannelGOF] {
            let sparse = gof_statistic(&mechanism, method, &sketch, &p0).unwrap();
            let dense = local_exp_gof(&grr, &counts.counts(), &p0);
            assert_eq!(sparse.statistic.to_bits(), dense.statistic.to_bits());
            assert_eq!(sparse.df, dense.df);
        }
    }

    /// A k-subset null is drawn report by report, so the automatic switch to Monte Carlo
    /// weighs n·k, not d: at ε = 20, d = 1000 (k = 1, q ≈ 2·10⁻⁹, so an empty null
    /// category expects n·q < 5 reports even at n = 10⁶) 99 samples × 10⁶ reports is past the bound, and the record is
    /// inconclusive instead of simulating 10⁸ reports (it did, as 99 × 1000 cells, before
    /// the cost counted the reports).
    #[test]
    fn a_subset_null_costs_its_reports() {
        let m = Subset::new(20.0, 1000, None).unwrap();
        assert_eq!(m.k(), 1);
        let mechanism = Mechanism::Subset(m);
        let n = 1_000_000;
        let sketch =
            Sketch::Bits(crate::sketch::BitSketch::from_counts(vec![1000; 1000], n).unwrap());
        // An empty category: its item count expects n·q ≈ 0.002 reports.
        let mut p0 = vec![1.0 / 999.0; 1000];
        p0[0] = 0.0;
        let params = GofParams {
            method: TestMethod::SubsetGOF,
            p0: &p0,
            alpha: 0.05,
            calibration: Calibration::Asymptotic,
            mc_samples: 99,
            seed: 1,
            distance: None,
        };
        let r = run_gof(&mechanism, &sketch, &params).unwrap();
        assert_eq!(r.mc_p_value, None);
        let why = r.inconclusive_reason.unwrap();
        assert!(why.contains("99 samples × 1000000 cells"), "{why}");
    }

    /// A configured simulation is bounded too: a subset stream of 10⁸ reports with
    /// `calibration = "monte_carlo"` would draw 99 × 10⁸ × k items in one snapshot (hours);
    /// the record is inconclusive and says what to change. Below the bound it simulates.
    #[test]
    fn a_configured_simulation_is_bounded() {
        let mechanism = Mechanism::Subset(Subset::new(1.0, 8, None).unwrap());
        let p0 = vec![1.0 / 8.0; 8];
        let params = GofParams {
            method: TestMethod::SubsetGOF,
            p0: &p0,
            alpha: 0.05,
            calibration: Calibration::MonteCarlo,
            mc_samples: 99,
            seed: 1,
            distance: None,
        };
        let big = 100_000_000u64;
        let sketch =
            Sketch::Bits(crate::sketch::BitSketch::from_counts(vec![big * 3 / 8; 8], big).unwrap());
        let r = run_gof(&mechanism, &sketch, &params).unwrap();
        assert_eq!(r.mc_p_value, None);
        assert!(!r.reject);
        let why = r.inconclusive_reason.unwrap();
        assert!(why.contains("lower mc_samples"), "{why}");
        let small =
            Sketch::Bits(crate::sketch::BitSketch::from_counts(vec![375; 8], 1000).unwrap());
        let r = run_gof(&mechanism, &small, &params).unwrap();
        assert!(r.mc_p_value.is_some() && r.inconclusive_reason.is_none());
    }

    /// An empty null category does not send a subset test to simulation by itself: its
    /// item count still expects n·q reports (d = 8, ε = 1, k = 3, n = 1000: q ≈ 0.34), so
    /// the asymptotic χ² law is used; at n = 10 it is not (n·q ≈ 3.4).
    #[test]
    fn a_subset_test_judges_its_item_counts() {
        let m = Subset::new(1.0, 8, None).unwrap();
        let mechanism = Mechanism::Subset(m);
        let mut p0 = vec![1.0 / 7.0; 8];
        p0[7] = 0.0;
        let params = |p0| GofParams {
            method: TestMethod::SubsetGOF,
            p0,
            alpha: 0.05,
            calibration: Calibration::Asymptotic,
            mc_samples: 99,
            seed: 1,
            distance: None,
        };
        let sketch =
            |n| Sketch::Bits(crate::sketch::BitSketch::from_counts(vec![3 * n / 8; 8], n).unwrap());
        let big = run_gof(&mechanism, &sketch(1000), &params(&p0)).unwrap();
        assert_eq!((big.calibration_reason, big.mc_p_value), (None, None));
        let small = run_gof(&mechanism, &sketch(10), &params(&p0)).unwrap();
        assert!(small.mc_p_value.is_some(), "{small:?}");
        assert!(small.calibration_reason.unwrap().contains("rarest item"));
    }
}
