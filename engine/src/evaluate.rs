//! Turns a sketch snapshot into a [`TestRecord`]: estimates, statistic, p-value, decision.

use std::collections::BTreeMap;

use ldpstream_config::{MechanismConfig, StreamConfig, TestConfig, TestMethod};

use crate::error::EngineError;
use crate::mechanism::Grr;
use crate::record::TestRecord;
use crate::sketch::CountSketch;
use crate::stats::local_exp_gof;

/// Where a result sits: the group it covers and its window bounds (RFC 3339), if any.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    pub group: Option<BTreeMap<String, Option<String>>>,
    pub window_start: Option<String>,
    pub window_end: Option<String>,
}

/// The test a config entry asks for, with the mechanism's default filled in.
pub fn resolve_method(stream: &StreamConfig, test: &TestConfig) -> TestMethod {
    test.method.unwrap_or(match stream.mechanism {
        MechanismConfig::Grr { .. } => TestMethod::LocalExpGOF,
    })
}

/// Runs `test` on a snapshot of `stream`'s sketch.
pub fn evaluate(
    stream: &StreamConfig,
    test: &TestConfig,
    scope: Scope,
    sketch: &CountSketch,
) -> Result<TestRecord, EngineError> {
    let method = resolve_method(stream, test);
    let d = stream.mechanism.domain() as usize;
    let p0 = test.null.probabilities(d);
    let n = sketch.n();
    let (estimate, outcome) = match (&stream.mechanism, method) {
        (MechanismConfig::Grr { epsilon, domain }, TestMethod::LocalExpGOF) => {
            let grr = Grr::new(*epsilon, *domain)?;
            let est = grr.estimate(sketch.counts(), n);
            let outcome = (n > 0).then(|| local_exp_gof(&grr, sketch.counts(), &p0));
            (est, outcome)
        }
    };
    let inconclusive_reason = outcome
        .is_none()
        .then(|| "no reports in the window".to_string());
    let p_value = outcome.map(|o| o.p_value);
    Ok(TestRecord {
        stream: stream.name.clone(),
        test: test.name.clone(),
        method: method.name().to_string(),
        mechanism: stream.mechanism.kind().to_string(),
        group: scope.group,
        window_start: scope.window_start,
        window_end: scope.window_end,
        n,
        statistic: outcome.map(|o| o.statistic),
        df: outcome.map_or((d as u32).saturating_sub(1), |o| o.df),
        p_value,
        reject: p_value.is_some_and(|p| p < test.alpha),
        alpha: test.alpha,
        estimate: estimate.estimate,
        std_error: estimate.std_error,
        rejected_reports: sketch.rejected().to_map(),
        inconclusive: inconclusive_reason.is_some(),
        inconclusive_reason,
    })
}
