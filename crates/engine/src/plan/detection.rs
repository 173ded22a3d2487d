//! Reports to detection of the sequential (e-process) tests, beside the fixed-n n.
//!
//! Under a local alternative every statistic the sequential tests are built on is
//! `|Z_n|²/n` for a ν-dimensional random walk with identity covariance and drift `√u` per
//! report along one direction, u the mechanism's per-report noncentrality (so the fixed-n
//! statistic is `χ²_ν(n·u)`). We simulate that walk at looks every `fixed_n/LOOKS_PER_FIXED_N`
//! reports and stop at the first look where the Gaussian-mixture e-value of
//! [`crate::eprocess::gaussian`] reaches 1/α. The Dirichlet–multinomial mixture of the
//! categorical mechanisms has the same large-n form (its log e-value is
//! `½·(n/(n+κ))·χ² − (ν/2)·ln(1+n/κ)` to first order), so one simulation serves all.
//!
//! The walk is simulated in two coordinates only, exactly: the drift coordinate is a
//! Brownian motion with drift, and the squared norm of the ν−1 others is a squared Bessel
//! process, whose transition over s reports from R is `s·χ²_{ν−1}(R/s)` (noncentral).
//! Each look costs O(grid), whatever d.
//!
//! Calibration (issue 31): the first version used the Gaussian precision grid for every
//! mechanism and looked every fixed_n/100 reports, and predicted 1.22× (GenRR) and 1.20×
//! (bit flip) where the engine's own e-processes, looked at every fixed_n/50 reports,
//! took 1.34× and 1.30×. Both differences matter: each mechanism is now simulated with
//! its own mixture (the Dirichlet κ grid for the exact constructions, the precision grid
//! for the Gaussian ones, and the tuned component of a `design_n`), and at the look
//! spacing the user gives. `engine/tests/sequential.rs::plan_matches_the_simulated_e_processes`
//! checks the prediction against the real e-processes on count paths.

use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{ChiSquared, Distribution, StandardNormal};

use crate::eprocess::dirichlet::KAPPA_GRID;
use crate::eprocess::gaussian::{log_e_tuned, PRECISION_GRID};
use crate::eprocess::{Design, Mixture};
use crate::error::EngineError;

use super::alternative::Hypotheses;
use super::noncentrality::PlanMechanism;
use super::power::required_n;

/// Simulated streams per estimate.
const STREAMS: usize = 2000;
/// Looks per fixed-n sample size when the user gives no spacing.
const LOOKS_PER_FIXED_N: u64 = 100;

/// How the sequential test is run: how often it is looked at, and whether its mixture is
/// tuned to the fixed-n n (`design_n` in the config).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SequentialOptions {
    /// Reports between looks; None looks every fixed_n/100 reports.
    pub look_every: Option<u64>,
    /// Tune the mixture to `design_n` = the fixed-n n.
    pub design: bool,
}
/// Streams not detected by this many fixed-n sample sizes count as detected there.
const CAP_IN_FIXED_N: u64 = 20;

/// The sequential test's reports to detection under the alternative.
#[derive(Debug, Clone, PartialEq)]
pub struct Detection {
    /// The fixed-n sample size with the same power target, for comparison.
    pub fixed_n: u64,
    /// Median and mean reports to detection (undetected streams at the cap).
    pub median: f64,
    pub mean: f64,
    /// Share of simulated streams detected by `CAP_IN_FIXED_N · fixed_n` reports.
    pub detected: f64,
    /// That cap: streams undetected by it count as detected there.
    pub cap: u64,
    /// Every simulated stream's reports to detection, sorted (the cap when undetected):
    /// their empirical distribution is the sequential test's power against n.
    pub times: Vec<u64>,
}

impl Detection {
    /// The share of simulated streams detected within `n` reports.
    pub fn detected_by(&self, n: f64) -> f64 {
        let cap = self.times.last().copied().unwrap_or(0);
        let within = self.times.partition_point(|&t| (t as f64) <= n && t < cap);
        within as f64 / self.times.len().max(1) as f64
    }
}

/// ν of the sequential statistic: the mechanism's χ² degrees of freedom, except Hadamard,
/// whose sequential test is a product of Beta–binomial mixtures, one free "+" probability
/// on each of its K rows (conditioned on the rows, eprocess/rows.rs), and OLH, whose
/// whitened support statistic drops the sum-to-one direction the fixed-n one keeps
/// (eprocess/olh_support.rs).
fn sequential_df(mechanism: PlanMechanism, d: usize) -> u32 {
    match mechanism {
        PlanMechanism::Hadamard { .. } => d.next_power_of_two() as u32,
        PlanMechanism::Olh { .. } => u32::try_from(d.saturating_sub(1)).unwrap_or(u32::MAX),
        other => other.df(d),
    }
}

/// The effect-scale grid of `mechanism`'s e-process: the Dirichlet concentrations for the
/// exact constructions on report cells, the Gaussian precisions for the others.
fn sequential_grid(mechanism: PlanMechanism) -> &'static [f64] {
    match mechanism {
        PlanMechanism::Grr { .. } | PlanMechanism::Hadamard { .. } => &KAPPA_GRID,
        PlanMechanism::BitFlip { .. }
        | PlanMechanism::Oue { .. }
        | PlanMechanism::Gauss { .. }
        | PlanMechanism::Subset { .. }
        | PlanMechanism::Olh { .. } => &PRECISION_GRID,
    }
}

/// The squared norm of a driftless ν−1-dimensional walk, advanced by `s` reports.
struct Bessel {
    /// `χ²_{ν−1}` (from 0) and `χ²_{ν−2}` (the rest of a noncentral draw), when ν is
    /// large enough to have them.
    from_zero: Option<ChiSquared<f64>>,
    rest: Option<ChiSquared<f64>>,
}

impl Bessel {
    fn new(nu: u32) -> Result<Self, EngineError> {
        let chi = |k: u32| {
            (k > 0)
                .then(|| ChiSquared::new(f64::from(k)))
                .transpose()
                .map_err(|e| {
                    EngineError::invalid("degrees of freedom", nu, "at least 1").with_detail(e)
                })
        };
        Ok(Bessel {
            from_zero: chi(nu.saturating_sub(1))?,
            rest: chi(nu.saturating_sub(2))?,
        })
    }

    /// `s·χ²_{ν−1}(R/s)`, drawn as `(√R + √s·N)² + s·χ²_{ν−2}`.
    fn step(&self, r: f64, s: f64, rng: &mut StdRng) -> f64 {
        let Some(from_zero) = &self.from_zero else {
            return 0.0;
        };
        if r == 0.0 {
            return s * from_zero.sample(rng);
        }
        let g: f64 = StandardNormal.sample(rng);
        let rest = self.rest.as_ref().map_or(0.0, |c| c.sample(rng));
        (r.sqrt() + s.sqrt() * g).powi(2) + s * rest
    }
}

/// One simulated test: the walk's per-report noncentrality and dimension, the mixture,
/// the looks and the level.
struct Walk<'a> {
    unit: f64,
    nu: u32,
    mixture: Mixture<'a>,
    step: u64,
    cap: u64,
    alpha: f64,
}

/// Detection times (at the cap when undetected) of `STREAMS` walks.
fn simulate(walk: &Walk, seed: u64) -> Result<Vec<u64>, EngineError> {
    let Walk {
        unit,
        nu,
        mixture,
        step,
        cap,
        alpha,
    } = *walk;
    let bessel = Bessel::new(nu)?;
    let threshold = (1.0 / alpha).ln();
    let drift = unit.sqrt();
    let s = step as f64;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut times = Vec::with_capacity(STREAMS);
    for _ in 0..STREAMS {
        let (mut z1, mut others) = (0.0f64, 0.0f64);
        let mut n = 0u64;
        let time = loop {
            n += step;
            let g: f64 = StandardNormal.sample(&mut rng);
            z1 += drift * s + s.sqrt() * g;
            others = bessel.step(others, s, &mut rng);
            let t = n as f64;
            let statistic = (z1 * z1 + others) / t;
            if log_e_tuned(statistic, nu, t, mixture) >= threshold || n >= cap {
                break n;
            }
        };
        times.push(time);
    }
    times.sort_unstable();
    Ok(times)
}

/// Reports to detection of `mechanism`'s level-`alpha` sequential test, by a seeded
/// simulation of the limiting walk, beside the fixed-n n that reaches `power`.
pub fn sequential_detection(
    mechanism: PlanMechanism,
    h: &Hypotheses,
    alpha: f64,
    power: f64,
    seed: u64,
    options: SequentialOptions,
) -> Result<Detection, EngineError> {
    let fixed_n = required_n(mechanism, h, alpha, power)?;
    let nu = sequential_df(mechanism, h.domain());
    let design = Design { n: fixed_n, alpha };
    let cap = CAP_IN_FIXED_N.saturating_mul(fixed_n);
    let walk = Walk {
        unit: mechanism.sequential_unit_noncentrality(h)?,
        nu,
        mixture: Mixture {
            grid: sequential_grid(mechanism),
            tuned: options.design.then(|| design.scale(nu)).flatten(),
        },
        // Looks sparser than the cap see nothing before it: the first look is the cap.
        step: options
            .look_every
            .unwrap_or(fixed_n / LOOKS_PER_FIXED_N)
            .clamp(1, cap),
        cap,
        alpha,
    };
    let times = simulate(&walk, seed)?;
    let detected = times.iter().filter(|&&t| t < walk.cap).count() as f64 / STREAMS as f64;
    Ok(Detection {
        fixed_n,
        median: times[STREAMS / 2] as f64,
        mean: times.iter().map(|&t| t as f64).sum::<f64>() / STREAMS as f64,
        detected,
        cap: walk.cap,
        times,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Alternative;

    /// At the planner's example (docs/user-guide.md, "plan") the sequential tests need, in median, between 0.8
    /// and 1.5 times the fixed-n n for power 0.8.
    #[test]
    fn detection_is_near_the_fixed_n() {
        let h = Alternative::Paninski { distance: 0.2 }
            .against(&[1.0 / 16.0; 16])
            .unwrap();
        for m in [
            PlanMechanism::Grr { epsilon: 1.0 },
            PlanMechanism::BitFlip { epsilon: 1.0 },
        ] {
            let det = sequential_detection(m, &h, 0.05, 0.8, 1, Default::default()).unwrap();
            let ratio = det.median / det.fixed_n as f64;
            assert!((0.8..=1.5).contains(&ratio), "{}: {ratio}", m.name());
            assert!(det.detected > 0.95, "{det:?}");
        }
    }

    /// The Bessel step has the χ²_{ν−1}(R/s) mean `R + s(ν−1)`.
    #[test]
    fn bessel_step_has_the_noncentral_mean() {
        let b = Bessel::new(6).unwrap();
        let mut rng = StdRng::seed_from_u64(3);
        let (r, s, m) = (40.0, 10.0, 200_000);
        let mean = (0..m).map(|_| b.step(r, s, &mut rng)).sum::<f64>() / m as f64;
        // sd of one draw: s·sqrt(2(ν−1) + 4R/s) ≈ 46; 5 SE of the mean ≈ 0.5.
        assert!((mean - (r + s * 5.0)).abs() < 0.5, "{mean}");
    }

    /// Without drift the mixture on an exactly Gaussian walk crosses 1/α at most α of
    /// the time (Ville), over 2000 streams of 2000 looks.
    #[test]
    fn no_drift_crosses_at_most_alpha() {
        for nu in [1u32, 2, 15] {
            let walk = Walk {
                unit: 0.0,
                nu,
                mixture: Mixture::uniform(&PRECISION_GRID),
                step: 50,
                cap: 100_000,
                alpha: 0.05,
            };
            let times = simulate(&walk, 9).unwrap();
            let rate = times.iter().filter(|&&t| t < 100_000).count() as f64 / STREAMS as f64;
            assert!(
                rate <= 0.05 + 2.0 * (0.05f64 * 0.95 / STREAMS as f64).sqrt(),
                "ν={nu}: {rate}"
            );
        }
    }
}
