//! Turns a sketch snapshot into a [`TestRecord`]: estimates, statistic, p-value, decision.

use std::collections::BTreeMap;

use ldpstream_config::{Calibration, StreamConfig, TestConfig, TestMethod};

use crate::error::EngineError;
use crate::mechanism::{Mechanism, NoiseKind};
use crate::record::TestRecord;
use crate::sketch::Sketch;
use crate::stats::{run_gof, GofParams};

/// Where a result sits: the group it covers and its window bounds (RFC 3339), if any.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    pub group: Option<BTreeMap<String, Option<String>>>,
    pub window_start: Option<String>,
    pub window_end: Option<String>,
}

/// The test a config entry asks for, with the mechanism's default filled in.
pub fn resolve_method(stream: &StreamConfig, test: &TestConfig) -> TestMethod {
    test.method
        .unwrap_or_else(|| TestMethod::applicable(test.kind, &stream.mechanism)[0])
}

/// Runs `test` on a snapshot of `stream`'s sketch.
pub fn evaluate(
    stream: &StreamConfig,
    test: &TestConfig,
    mechanism: &Mechanism,
    scope: Scope,
    sketch: &Sketch,
) -> Result<TestRecord, EngineError> {
    let method = resolve_method(stream, test);
    let d = mechanism.domain();
    let p0 = test.null.probabilities(d);
    let n = sketch.n();
    let estimate = mechanism.estimate(sketch)?;
    let mle = mechanism.mle(sketch)?;
    let laplace =
        matches!(mechanism, Mechanism::Noise(m) if matches!(m.kind(), NoiseKind::Laplace { .. }));
    let calibration = if test.calibration == Calibration::MonteCarlo || laplace {
        "monte_carlo"
    } else {
        "asymptotic"
    };
    let result = if n > 0 {
        Some(run_gof(
            mechanism,
            sketch,
            &GofParams {
                method,
                p0: &p0,
                alpha: test.alpha,
                calibration: test.calibration,
                mc_samples: test.mc_samples,
                seed: test.seed,
                distance: test.distance,
            },
        )?)
    } else {
        None
    };
    let inconclusive_reason = result
        .is_none()
        .then(|| "no reports in the window".to_string());
    Ok(TestRecord {
        stream: stream.name.clone(),
        test: test.name.clone(),
        method: method.name().to_string(),
        mechanism: mechanism.kind().to_string(),
        group: scope.group,
        window_start: scope.window_start,
        window_end: scope.window_end,
        n,
        statistic: result.as_ref().map(|r| r.statistic),
        df: result.as_ref().and_then(|r| r.df),
        p_value: result.as_ref().and_then(|r| r.p_value),
        reject: result.as_ref().is_some_and(|r| r.reject),
        alpha: test.alpha,
        estimate: estimate.estimate,
        std_error: estimate.std_error,
        mle: if n > 0 { mle.p } else { Vec::new() },
        mle_converged: mle.converged,
        mle_iterations: mle.iterations,
        privacy: mechanism.privacy(),
        calibration: calibration.to_string(),
        mc_p_value: result.as_ref().and_then(|r| r.mc_p_value),
        critical_value: result.as_ref().and_then(|r| r.critical_value),
        tv_distance: result.as_ref().and_then(|r| r.tv_distance),
        rejected_reports: sketch.rejected().to_map(),
        inconclusive: inconclusive_reason.is_some(),
        inconclusive_reason,
        is_final: false,
        late_reports: 0,
    })
}
