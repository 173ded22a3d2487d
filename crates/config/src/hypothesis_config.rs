//! A validated hypothesis test: what it tests ([`TestSpec`]), the method that runs it with
//! the keys only that method takes ([`MethodSpec`]), and its level and window.

use crate::duration::DurationMs;
use crate::hypothesis_spec::{Calibration, InnerTester, TestKind, TestMethod, TestSpec};
use crate::values::Alpha;
use crate::window::WindowConfig;

/// One hypothesis test on a stream, as validation leaves it: every key checked against the
/// stream, and the method resolved (the mechanism's default when the file names none).
#[derive(Debug, Clone, PartialEq)]
pub struct TestConfig {
    /// Unique within the stream; appears in output records.
    pub name: String,
    /// The kind of test, with its kind-specific parameters.
    pub spec: TestSpec,
    /// The concrete test, with its method-specific parameters.
    pub method: MethodSpec,
    /// Significance level, in (0, 1).
    pub alpha: Alpha,
    /// Which reports a result covers.
    pub window: WindowConfig,
    /// The window's `looks` key: also evaluate the test at every multiple of this in event
    /// time inside each window (provisional records, `look_end` set), in `batch` as in
    /// `serve`, so that a monitor can be backtested on history.
    pub looks: Option<DurationMs>,
    /// Asymptotic p-value only, or a Monte Carlo p-value beside it.
    pub calibration: Calibration,
    /// Simulated null sketches for Monte Carlo calibration (and for LocalNoiseGOF on
    /// laplace, whose critical value is always simulated). Exceeds 1/alpha where used.
    pub mc_samples: u32,
    /// Seed of the Monte Carlo null simulation, so results are reproducible.
    pub seed: u64,
    /// Anytime-valid mode: the test maintains an e-process, records carry `e_value` and
    /// `anytime_p_value`, and `reject` is `e_value >= 1/alpha`, valid however many times
    /// the window is looked at.
    pub sequential: bool,
    /// With `sequential`: the planned sample size (`plan`'s n for power 0.8) the
    /// e-process is tuned to detect at; None leaves the mixture equal-weight over scales.
    pub design_n: Option<u64>,
}

impl TestConfig {
    pub fn kind(&self) -> TestKind {
        self.spec.kind()
    }
}

/// The method a test runs, with exactly the keys that method takes. Methods without keys
/// of their own are [`MethodSpec::Plain`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MethodSpec {
    /// Any method that takes no key of its own.
    Plain(TestMethod),
    /// Accept iff d_TV(estimate, p0) <= distance/2, with `distance` in (0, 2].
    SheffetTV { distance: f64 },
    /// The marginal-product TV rule, with `distance` in (0, 2].
    SheffetTVIndependence { distance: f64 },
    /// The share `epsilon_split` of the release's ε, in (0, 1), goes to the N_max check.
    PrivateCollisions { epsilon_split: f64 },
    /// `inner` runs on one random block of `block_size` (>= 1) consecutive reports, and its
    /// answer is flipped with probability `delta` in (0, ½].
    SubsampleAndAggregate {
        delta: f64,
        block_size: u64,
        inner: InnerTester,
    },
}

impl MethodSpec {
    /// Which method this is.
    pub fn method(&self) -> TestMethod {
        match *self {
            MethodSpec::Plain(m) => m,
            MethodSpec::SheffetTV { .. } => TestMethod::SheffetTV,
            MethodSpec::SheffetTVIndependence { .. } => TestMethod::SheffetTVIndependence,
            MethodSpec::PrivateCollisions { .. } => TestMethod::PrivateCollisions,
            MethodSpec::SubsampleAndAggregate { .. } => TestMethod::SubsampleAndAggregate,
        }
    }

    /// The total-variation distance parameter, for the methods that take one.
    pub fn distance(&self) -> Option<f64> {
        match *self {
            MethodSpec::SheffetTV { distance } | MethodSpec::SheffetTVIndependence { distance } => {
                Some(distance)
            }
            _ => None,
        }
    }

    /// The reports per block of SubsampleAndAggregate: its stream folds a block column.
    pub fn block_size(&self) -> Option<u64> {
        match *self {
            MethodSpec::SubsampleAndAggregate { block_size, .. } => Some(block_size),
            _ => None,
        }
    }
}
