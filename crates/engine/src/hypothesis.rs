//! Turns sketch snapshots into [`TestRecord`]s: estimates, statistic, p-value, decision.

use ldpstream_config::{
    Calibration, CuratorSpec, MethodSpec, StreamConfig, TestConfig, TestMethod, TestSpec,
};
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::eprocess::confidence::confidence_sequence;
use crate::eprocess::{
    anytime_p_value, crosses, gof_e_process_tuned, independence_e_process_tuned,
    two_sample_e_process_tuned, Design, EProcess, Validity,
};
use crate::error::EngineError;
use crate::mechanism::{Estimate, Mechanism, NoiseKind, SnapshotEstimates};
use crate::mle::Mle;
use crate::record::{TestRecord, MAX_RECORDED_CATEGORIES};
use crate::simulation_seed::simulation_seed;
use crate::sketch::Sketch;
use crate::stats::{
    bitflip_two_sample, genrr_two_sample, local_bitflip_ind, local_exp_ind, local_noise_ind,
    marginal_product, monte_carlo_p_value, run_gof, sample_null_sketch, Decision, GofParams,
};

/// The planned sample size a sequential test's mixture is tuned to, if it has one.
fn design(test: &TestConfig) -> Option<Design> {
    test.design_n.map(|n| Design {
        n,
        alpha: test.alpha.get(),
    })
}

/// Expected cell counts at or below this make an independence test inconclusive
/// (seed 002, footnote 2).
pub const MIN_EXPECTED_CELL: f64 = 5.0;

pub use crate::scope::Scope;

/// The parts of a record that depend on the test, not on the sketch.
#[derive(Debug, Default)]
struct Outcome {
    statistic: Option<f64>,
    df: Option<u32>,
    p_value: Option<f64>,
    asymptotic_p_value: Option<f64>,
    reject: bool,
    mc_p_value: Option<f64>,
    critical_value: Option<f64>,
    tv_distance: Option<f64>,
    fit_iterations: Option<u32>,
    fit_converged: Option<bool>,
    inconclusive_reason: Option<String>,
    /// Why the p-value was simulated under an asymptotic calibration (or, in sequential
    /// mode, why the fixed-n p-value is missing).
    calibration_reason: Option<String>,
    /// Sequential tests: this look's e-value.
    e_value: Option<f64>,
    /// Sequential tests: whether the e-process is exact or asymptotic.
    validity: Option<Validity>,
}

impl Outcome {
    /// Sequential mode: the decision is Ville's `e ≥ 1/α` on this look alone; the running
    /// maximum across looks (and "once rejected, stays rejected") is the caller's, kept in a
    /// [`crate::eprocess::SequentialState`]. A test the data cannot yet support stays
    /// unrejected, as in fixed-n mode.
    fn sequential(mut self, e: EProcess, alpha: f64) -> Self {
        let e_value = e.e_value();
        self.e_value = Some(e_value);
        self.validity = Some(e.validity);
        self.reject = self.inconclusive_reason.is_none() && crosses(e_value, alpha);
        self
    }

    fn chi2(d: Decision, alpha: f64) -> Self {
        Outcome {
            statistic: Some(d.statistic),
            df: d.df,
            p_value: d.p_value,
            reject: d.p_value.is_some_and(|p| p < alpha),
            ..Outcome::default()
        }
        .without_nan_p_value()
    }

    /// A NaN p-value (no degrees of freedom, or a statistic that could not be computed)
    /// is no evidence either way: the record is inconclusive, says why, and stays out of
    /// the multiple-testing family.
    fn without_nan_p_value(mut self) -> Self {
        if self.p_value.is_some_and(f64::is_nan) {
            self.p_value = None;
            self.reject = false;
            let why = match (self.df, self.statistic) {
                (Some(0), _) => "the test has no degrees of freedom (df = 0): the reports \
                    fill at most one category, so there is nothing to compare"
                    .to_string(),
                (_, Some(t)) if !t.is_finite() => {
                    format!("the statistic is not a number ({t}): no p-value")
                }
                _ => "the p-value is not a number".to_string(),
            };
            self.inconclusive_reason.get_or_insert(why);
        }
        self
    }

    fn inconclusive(reason: impl Into<String>) -> Self {
        Outcome {
            inconclusive_reason: Some(reason.into()),
            ..Outcome::default()
        }
    }
}

fn uses_monte_carlo(test: &TestConfig, method: TestMethod, mechanism: &Mechanism) -> bool {
    test.calibration == Calibration::MonteCarlo
        || method == TestMethod::SheffetQ
        || method == TestMethod::OlhSupportGOF
        || matches!(mechanism, Mechanism::Noise(m) if matches!(m.kind(), NoiseKind::Laplace { .. }))
}

/// Runs a gof or independence `test` on a snapshot of `stream`'s sketch.
pub fn evaluate(
    stream: &StreamConfig,
    test: &TestConfig,
    mechanism: &Mechanism,
    scope: Scope,
    sketch: &Sketch,
) -> Result<TestRecord, EngineError> {
    let method = test.method.method();
    let seed = simulation_seed(stream, test, &scope);
    // The statistics see the channel the reports follow (a longitudinal kind's composed
    // one, docs/STATISTICS.md §1.9); the record keeps the stream's own kind and privacy.
    let channel = mechanism.channel();
    let outcome = if sketch.n() == 0 {
        Outcome::inconclusive("no reports in the window")
    } else {
        match &test.spec {
            TestSpec::Gof { null } => {
                let p0 = null.probabilities(channel.domain());
                let outcome = gof(test, method, channel, sketch, &p0, seed, scope.look)?;
                if test.sequential {
                    outcome.sequential(
                        gof_e_process_tuned(channel, sketch, &p0, design(test))?,
                        test.alpha.get(),
                    )
                } else {
                    outcome
                }
            }
            TestSpec::Independence { rows, cols } => {
                let table = (*rows as usize, *cols as usize);
                let outcome = independence(test, method, channel, sketch, table, seed)?;
                if test.sequential {
                    let e = independence_e_process_tuned(
                        channel,
                        sketch,
                        table.0,
                        table.1,
                        design(test),
                    )?;
                    outcome.sequential(e, test.alpha.get())
                } else {
                    outcome
                }
            }
            TestSpec::TwoSample { .. } | TestSpec::Uniformity(_) | TestSpec::Identity { .. } => {
                return Err(EngineError::InvalidParameter {
                    name: "kind",
                    value: format!("{:?}", test.kind()),
                    allowed: "evaluate_two_sample or evaluate_private for this kind",
                })
            }
        }
    };
    record(
        stream, test, method, mechanism, scope, sketch, None, outcome,
    )
}

/// Runs a two-sample `test` on the sketches of sample `a` and sample `b`.
pub fn evaluate_two_sample(
    stream: &StreamConfig,
    test: &TestConfig,
    mechanism: &Mechanism,
    scope: Scope,
    a: &Sketch,
    b: &Sketch,
) -> Result<TestRecord, EngineError> {
    let method = test.method.method();
    let channel = mechanism.channel();
    let outcome = if a.n() == 0 || b.n() == 0 {
        Outcome::inconclusive("one of the two samples has no reports")
    } else {
        let decision = match (method, channel, a, b) {
            (TestMethod::GenRRTwoSample, _, Sketch::Counts(x), Sketch::Counts(y)) => {
                genrr_two_sample(&x.counts(), &y.counts())
            }
            (
                TestMethod::BitFlipTwoSample,
                Mechanism::BitFlip(m),
                Sketch::Bits(x),
                Sketch::Bits(y),
            ) if !m.is_optimized() => {
                bitflip_two_sample(m, x.bit_counts(), x.n(), y.bit_counts(), y.n())
            }
            _ => return Err(mechanism.sketch_mismatch(a)),
        };
        let outcome = Outcome::chi2(decision, test.alpha.get());
        if test.sequential {
            outcome.sequential(
                two_sample_e_process_tuned(channel, a, b, design(test))?,
                test.alpha.get(),
            )
        } else {
            outcome
        }
    };
    // The record's estimates describe the two samples pooled.
    let mut pooled = a.clone();
    pooled.merge(b)?;
    record(
        stream,
        test,
        method,
        mechanism,
        scope,
        &pooled,
        Some((a.n(), b.n())),
        outcome,
    )
}

/// `seed`: this record's simulations' seed ([`simulation_seed`]). `look`: a sequential
/// test's provisional look ([`Scope::look`]), where OLH's fixed-n test, always simulated,
/// is left to the final record.
fn gof(
    test: &TestConfig,
    method: TestMethod,
    mechanism: &Mechanism,
    sketch: &Sketch,
    p0: &[f64],
    seed: u64,
    look: bool,
) -> Result<Outcome, EngineError> {
    let sequential = test.sequential;
    if look && method == TestMethod::OlhSupportGOF {
        return Ok(Outcome {
            calibration_reason: Some(format!(
                "a provisional record of a sequential test (a look): OLH's fixed-n \
                 p-value ({} simulated null tables of the pool) is computed for the \
                 window's final record only; this look's decision is the e-process's",
                test.mc_samples
            )),
            ..Outcome::default()
        });
    }
    let r = run_gof(
        mechanism,
        sketch,
        &GofParams {
            method,
            p0,
            alpha: test.alpha.get(),
            calibration: test.calibration,
            mc_samples: test.mc_samples,
            seed,
            distance: test.method.distance(),
        },
    )?;
    Ok(Outcome {
        statistic: Some(r.statistic),
        df: r.df,
        p_value: r.p_value,
        // Shown only beside a simulated p-value; otherwise it is `p_value` itself.
        asymptotic_p_value: r.asymptotic_p_value.filter(|_| r.mc_p_value.is_some()),
        reject: r.reject,
        mc_p_value: r.mc_p_value,
        critical_value: r.critical_value,
        tv_distance: r.tv_distance,
        // An e-process is valid at any n, so too few reports for the fixed-n law leave the
        // sequential decision alone; the record still says why its p-value is missing.
        calibration_reason: match (sequential, &r.inconclusive_reason) {
            (true, Some(why)) => Some(format!("{why}: no fixed-n p-value")),
            _ => r.calibration_reason,
        },
        inconclusive_reason: r.inconclusive_reason.filter(|_| !sequential),
        ..Outcome::default()
    }
    .without_nan_p_value())
}

fn independence(
    test: &TestConfig,
    method: TestMethod,
    mechanism: &Mechanism,
    sketch: &Sketch,
    (rows, cols): (usize, usize),
    seed: u64,
) -> Result<Outcome, EngineError> {
    let n = sketch.n();
    let result = match (method, mechanism, sketch) {
        (TestMethod::LocalExpIND, Mechanism::Grr(m), Sketch::Counts(s)) => {
            local_exp_ind(m.epsilon(), rows, cols, &s.counts())
        }
        // LocalBitFlipIND's Σ is the symmetric mechanism's; OUE is refused by the config.
        (TestMethod::LocalBitFlipIND, Mechanism::BitFlip(m), Sketch::Bits(s))
            if !m.is_optimized() =>
        {
            local_bitflip_ind(m, rows, cols, s.bit_counts(), n)
        }
        (TestMethod::LocalNoiseIND, Mechanism::Noise(m), Sketch::Sums(s)) => {
            local_noise_ind(m, rows, cols, &s.sums_f64(), n)
        }
        (
            TestMethod::SheffetTVIndependence | TestMethod::SheffetQ,
            Mechanism::Hadamard(_) | Mechanism::Cohort(_),
            _,
        ) => {
            return sheffet_independence(test, mechanism, sketch, rows, cols, seed);
        }
        _ => return Err(mechanism.sketch_mismatch(sketch)),
    };
    // A statistic that is not a number (LocalBitFlipIND's fit at ε near 700) is an
    // inconclusive record with the reason, never a silent non-rejection.
    let mut outcome = Outcome::chi2(result.decision, test.alpha.get()).without_nan_p_value();
    if let Some(fit) = &result.fit {
        outcome.fit_iterations = Some(fit.iterations);
        outcome.fit_converged = Some(fit.converged);
    }
    let information = match method {
        TestMethod::LocalBitFlipIND | TestMethod::LocalNoiseIND => {
            crate::stats::marginal_information(mechanism, n)
        }
        _ => None,
    };
    if let Some(info) = information.filter(|&i| i < 1.0) {
        outcome.reject = false;
        outcome.inconclusive_reason = Some(format!(
            "the reports carry {info:.3e} reports' worth of signal about the marginals (n·α² \
             for bitflip, n/σ² for gauss; at least 1 is needed): the χ² law does not hold yet"
        ));
    } else if result.min_expected <= MIN_EXPECTED_CELL {
        outcome.reject = false;
        outcome.inconclusive_reason = Some(format!(
            "smallest expected cell count n·π1_i·π2_j is {:.3} (at most {MIN_EXPECTED_CELL}): too few reports to decide",
            result.min_expected
        ));
    }
    Ok(outcome)
}

fn sheffet_independence(
    test: &TestConfig,
    mechanism: &Mechanism,
    sketch: &Sketch,
    rows: usize,
    cols: usize,
    seed: u64,
) -> Result<Outcome, EngineError> {
    let n = sketch.n();
    let observed = marginal_product(&mechanism.estimate(sketch)?.estimate, rows, cols, n);
    if let MethodSpec::SheffetTVIndependence { distance } = test.method {
        let half = distance / 2.0;
        return Ok(Outcome {
            statistic: Some(observed.tv),
            tv_distance: Some(observed.tv),
            reject: observed.tv > half,
            ..Outcome::default()
        });
    }
    // Q has no known null law (Sheffet's open problem): simulate sketches under the product
    // of the estimated marginals and recompute Q on each, marginals re-estimated.
    let mut rng = StdRng::seed_from_u64(seed);
    let mut simulated = Vec::with_capacity(test.mc_samples as usize);
    for _ in 0..test.mc_samples {
        let null = sample_null_sketch(mechanism, sketch, &observed.product, &mut rng)?;
        simulated.push(marginal_product(&mechanism.estimate(&null)?.estimate, rows, cols, n).q);
    }
    let (p, tau) = monte_carlo_p_value(observed.q, &mut simulated, test.alpha.get());
    Ok(Outcome {
        statistic: Some(observed.q),
        p_value: Some(p),
        reject: p <= test.alpha.get(),
        mc_p_value: Some(p),
        critical_value: Some(tau),
        tv_distance: Some(observed.tv),
        ..Outcome::default()
    })
}

#[allow(clippy::too_many_arguments)]
fn record(
    stream: &StreamConfig,
    test: &TestConfig,
    method: TestMethod,
    mechanism: &Mechanism,
    scope: Scope,
    sketch: &Sketch,
    samples: Option<(u64, u64)>,
    outcome: Outcome,
) -> Result<TestRecord, EngineError> {
    let n = sketch.n();
    let d = mechanism.domain();
    let estimate_omitted = (d > MAX_RECORDED_CATEGORIES).then(|| {
        format!(
            "d = {d} categories > {MAX_RECORDED_CATEGORIES}: the per-category estimate, \
             standard errors and MLE are not written (2 × {d} numbers per record); the \
             statistic and p-value cover every category"
        )
    });
    let estimates = match estimate_omitted {
        Some(_) => SnapshotEstimates {
            estimate: Estimate::default(),
            ibu: None,
            plain: None,
            omitted: None,
        },
        None => mechanism.estimate_and_ibu(sketch)?,
    };
    let estimate_omitted = estimate_omitted.or(estimates.omitted);
    let (estimate, ibu) = (estimates.estimate, estimates.ibu);
    let (estimate_plain, estimate_plain_bias_bound) = match estimates.plain {
        Some(p) => (p.estimate, p.bias_bound),
        None => (Vec::new(), None),
    };
    let (cs_lower, cs_upper) = match estimate.estimate.is_empty() {
        true => (Vec::new(), Vec::new()),
        false => confidence_sequence(
            &estimate.estimate,
            &estimate.std_error,
            n,
            test.alpha.get(),
            test.design_n,
        ),
    };
    let estimate_norm_sub = crate::mle::norm_sub(&estimate.estimate);
    let mle_omitted = mechanism
        .mle_omitted(n)
        .or_else(|| estimate_omitted.clone())
        .or_else(|| {
            (scope.look && mechanism.mle_by_em()).then(|| {
                "a provisional record of a sequential test (a look): the EM \
                 maximum-likelihood estimate (up to tens of thousands of steps where the \
                 maximum is on the simplex's boundary) is computed for the window's final \
                 record only; see estimate"
                    .to_string()
            })
        });
    let mle = match mle_omitted {
        Some(_) => Mle {
            p: Vec::new(),
            iterations: 0,
            converged: false,
        },
        None => mechanism.mle(sketch)?,
    };
    let calibration = if uses_monte_carlo(test, method, mechanism)
        || (outcome.calibration_reason.is_some() && outcome.mc_p_value.is_some())
    {
        "monte_carlo"
    } else {
        "asymptotic"
    };
    Ok(TestRecord {
        stream: stream.name.clone(),
        test: test.name.clone(),
        method: method.name().to_string(),
        mechanism: mechanism.kind().to_string(),
        group: scope.group,
        window_start: scope.window_start,
        window_end: scope.window_end,
        n: Some(n),
        n1: samples.map(|s| s.0),
        n2: samples.map(|s| s.1),
        statistic: outcome.statistic,
        df: outcome.df,
        p_value: outcome.p_value,
        q_value: None,
        reject: outcome.reject,
        alpha: test.alpha.get(),
        estimate: estimate.estimate,
        std_error: estimate.std_error,
        estimate_norm_sub,
        ibu_iterations: ibu.as_ref().map(|r| r.iterations),
        ibu_converged: ibu.as_ref().map(|r| r.converged),
        estimate_ibu: ibu.map(|r| r.p).unwrap_or_default(),
        cs_lower,
        cs_upper,
        estimate_omitted,
        estimate_plain,
        estimate_plain_bias_bound,
        mle: if n > 0 { mle.p } else { Vec::new() },
        mle_converged: mle.converged,
        mle_iterations: mle.iterations,
        mle_omitted,
        privacy: mechanism.privacy(),
        calibration: calibration.to_string(),
        mc_p_value: outcome.mc_p_value,
        critical_value: outcome.critical_value,
        tv_distance: outcome.tv_distance,
        fit_iterations: outcome.fit_iterations,
        fit_converged: outcome.fit_converged,
        refused: None,
        epsilon_spent: None,
        budget_remaining: None,
        blocks: None,
        block_size: None,
        block: None,
        rejected_reports: sketch.rejected().to_map(),
        inconclusive: outcome.inconclusive_reason.is_some(),
        inconclusive_reason: outcome.inconclusive_reason,
        is_final: false,
        late_reports: 0,
        e_value: outcome.e_value,
        anytime_p_value: outcome.e_value.map(anytime_p_value),
        validity: outcome.validity.map(|v| v.name().to_string()),
        anytime_q_value: None,
        asymptotic_p_value: outcome.asymptotic_p_value,
        calibration_reason: outcome.calibration_reason,
        look_end: None,
    })
}

/// Raw estimates and counts are not private: a curator test's record never carries them,
/// nor the rejected reports, which are counts of the same raw reports.
fn strip_raw_counts(rec: &mut TestRecord) {
    rec.n = None;
    rec.n1 = None;
    rec.n2 = None;
    rec.rejected_reports.clear();
    rec.estimate.clear();
    rec.std_error.clear();
    rec.estimate_norm_sub.clear();
    rec.estimate_ibu.clear();
    rec.estimate_plain.clear();
    rec.estimate_plain_bias_bound = None;
    rec.ibu_iterations = None;
    rec.ibu_converged = None;
    rec.cs_lower.clear();
    rec.cs_upper.clear();
    rec.mle.clear();
    rec.calibration = "monte_carlo".into();
}

/// True (and `rec` marked as not released) when `group` is the overflow group. Which
/// reports that group holds depends on max_groups, arrival order and restarts: a release
/// on it could charge any group's reports, so none is made (the kept groups release only
/// their own).
fn refused_as_overflow(
    rec: &mut TestRecord,
    max_groups: usize,
    group: Option<&crate::curator::ledger::Group>,
) -> bool {
    if !group.is_some_and(crate::curator::ledger::is_overflow) {
        return false;
    }
    rec.refused = Some("overflow group: not released".into());
    rec.inconclusive = true;
    rec.inconclusive_reason = Some(format!(
        "the groups past max_groups = {max_groups} share the overflow group \"{}\", whose \
         reports change with max_groups and arrival order, so a curator-model test is never \
         released on it; raise max_groups to test each group",
        crate::window::OTHER_GROUP
    ));
    true
}

/// Block counts for SubsampleAndAggregate: the raw counts of block `b` in stream order.
pub type BlockCounts<'a> = &'a dyn Fn(u64) -> Result<Vec<u64>, EngineError>;

/// Runs a curator-model (uniformity or identity) test on a `raw` stream's counts, if the
/// ledger covers its ε over `window` (ms since the epoch, `[start, end)`; None = unbounded).
/// `noise` must be a CSPRNG for real releases. Nothing computed from the data other than
/// the private outcome is put in the record: not even `n`, an exact count of raw reports.
#[allow(clippy::too_many_arguments)]
pub fn evaluate_private<R: rand::Rng + ?Sized>(
    stream: &StreamConfig,
    test: &TestConfig,
    mechanism: &Mechanism,
    scope: Scope,
    sketch: &Sketch,
    window: (Option<i64>, Option<i64>),
    ledger: &mut crate::curator::ledger::PrivacyLedger,
    noise: &mut R,
    blocks: Option<BlockCounts>,
) -> Result<TestRecord, EngineError> {
    use crate::curator::{
        collisions_null, private_collisions, private_unique_elements, subsample_and_aggregate,
        unique_elements_applies, unique_elements_null, GoldreichMap,
    };
    let method = test.method.method();
    // Which universe the private tester sees: [d] for uniformity, [6d] after Goldreich's
    // map for identity to q (the map's coins are part of the mechanism).
    let (curator, q): (&CuratorSpec, Option<&ldpstream_config::NullSpec>) = match &test.spec {
        TestSpec::Uniformity(c) => (c, None),
        TestSpec::Identity { null, curator } => (curator, Some(null)),
        TestSpec::Gof { .. } | TestSpec::Independence { .. } | TestSpec::TwoSample { .. } => {
            return Err(EngineError::InvalidParameter {
                name: "kind",
                value: format!("{:?}", test.kind()),
                allowed: "uniformity or identity for a curator-model test",
            })
        }
    };
    let epsilon = curator.epsilon;
    let Sketch::Counts(counts) = sketch else {
        return Err(mechanism.sketch_mismatch(sketch));
    };
    let label = format!("{}/{}", stream.name, test.name);
    // The nulls' simulations only: the released noise comes from `noise`.
    let seed = simulation_seed(stream, test, &scope);
    // A report belongs to one group: releases over the groups of a window compose in
    // parallel, so each is charged to its own group.
    let group = scope.group.clone();
    let mut rec = record(
        stream,
        test,
        method,
        mechanism,
        scope,
        sketch,
        None,
        Outcome::default(),
    )?;
    strip_raw_counts(&mut rec);
    if refused_as_overflow(&mut rec, stream.max_groups, group.as_ref()) {
        rec.budget_remaining = Some(ledger.remaining_in(window.0, window.1, group.as_ref()));
        return Ok(rec);
    }
    // Nothing is released about an empty window, so it spends nothing.
    if counts.n() == 0 {
        rec.inconclusive = true;
        rec.inconclusive_reason = Some("no reports in the window".into());
        rec.budget_remaining = Some(ledger.remaining_in(window.0, window.1, group.as_ref()));
        return Ok(rec);
    }
    // The unique-elements tester is only a test where uniform has the most singletons
    // (n ≤ k + 1, k = d or 6d after Goldreich's map): beyond it, release nothing.
    let k = match q {
        Some(_) => 6 * mechanism.domain(),
        None => mechanism.domain(),
    };
    if method == TestMethod::PrivateUniqueElements && !unique_elements_applies(counts.n(), k) {
        rec.inconclusive = true;
        rec.inconclusive_reason = Some(unique_elements_inapplicable(k, q.is_some()));
        rec.budget_remaining = Some(ledger.remaining_in(window.0, window.1, group.as_ref()));
        return Ok(rec);
    }
    if let Err(refused) = ledger.try_spend_in(window.0, window.1, epsilon, &label, group.as_ref()) {
        rec.refused = Some("privacy budget exhausted".into());
        rec.inconclusive = true;
        rec.inconclusive_reason = Some(format!(
            "privacy budget exhausted: this release needs ε = {}, {} remains",
            refused.needed, refused.remaining
        ));
        rec.budget_remaining = Some(refused.remaining);
        return Ok(rec);
    }
    rec.epsilon_spent = Some(epsilon);
    rec.budget_remaining = Some(ledger.remaining_in(window.0, window.1, group.as_ref()));
    // Identity to q reduces to uniformity on [6d]: map every report through Goldreich's
    // randomized map (its coins are part of the mechanism, so they come from `noise`).
    let goldreich = match q {
        Some(q) => Some(GoldreichMap::new(&q.probabilities(mechanism.domain()))?),
        None => None,
    };
    let to_uniformity = |c: &[u64], rng: &mut R| match &goldreich {
        Some(map) => map.map_counts(c, rng),
        None => c.to_vec(),
    };
    let (statistic, p_value, reject) = match test.method {
        MethodSpec::Plain(TestMethod::PrivateUniqueElements) => {
            let c = to_uniformity(&counts.counts(), noise);
            let null = unique_elements_null(counts.n(), c.len(), epsilon, test.mc_samples, seed)?;
            let o = private_unique_elements(&c, epsilon, test.alpha.get(), &null, noise);
            (Some(o.statistic), Some(o.p_value), o.reject)
        }
        MethodSpec::PrivateCollisions { epsilon_split } => {
            let c = to_uniformity(&counts.counts(), noise);
            let (e1, e2) = (epsilon * epsilon_split, epsilon * (1.0 - epsilon_split));
            let null = collisions_null(counts.n(), c.len(), e1, e2, test.mc_samples, seed)?;
            let o = private_collisions(&c, e1, e2, test.alpha.get(), &null, noise);
            (Some(o.statistic), Some(o.p_value), o.reject)
        }
        MethodSpec::SubsampleAndAggregate {
            delta,
            block_size,
            inner,
        } => {
            let block_counts = blocks.ok_or(EngineError::InvalidParameter {
                name: "block_size",
                value: "(missing)".into(),
                allowed: "block counts in stream order for SubsampleAndAggregate",
            })?;
            let o = subsample_and_aggregate(
                |b, rng: &mut R| Ok(to_uniformity(&block_counts(b)?, rng)),
                |c| inner_test(inner, c, test.alpha.get(), test.mc_samples, seed),
                delta,
                epsilon,
                noise,
            )?;
            rec.blocks = Some(o.blocks);
            rec.block_size = Some(block_size);
            rec.block = Some(o.block);
            (None, None, o.reject)
        }
        other => return Err(EngineError::InvalidParameter {
            name: "method",
            value: other.method().name().into(),
            allowed: "a curator-model method (PrivateCollisions, PrivateUniqueElements, SubsampleAndAggregate)",
        }),
    };
    rec.statistic = statistic;
    rec.p_value = p_value;
    rec.reject = reject;
    Ok(rec)
}

/// Why PrivateUniqueElements releases nothing beyond n = k + 1.
fn unique_elements_inapplicable(k: usize, identity: bool) -> String {
    format!(
        "PrivateUniqueElements needs n ≤ k + 1 reports (k = {k} categories{}): with more, \
         uniform no longer has the most singletons, so far-from-uniform data can look \
         more uniform than uniform; use PrivateCollisions",
        if identity {
            ", 6d after Goldreich's map"
        } else {
            ""
        },
    )
}

/// A non-private tester of uniformity for SubsampleAndAggregate.
fn inner_test(
    inner: ldpstream_config::InnerTester,
    counts: &[u64],
    alpha: f64,
    mc: u32,
    seed: u64,
) -> Result<bool, EngineError> {
    let d = counts.len();
    let uniform = vec![1.0 / d as f64; d];
    match inner {
        ldpstream_config::InnerTester::Pearson => {
            Ok(crate::curator::pearson_rejects(counts, &uniform, alpha))
        }
        ldpstream_config::InnerTester::Collisions => {
            let n: u64 = counts.iter().sum();
            let observed = crate::curator::collision_count(counts, f64::INFINITY);
            let mut sim = StdRng::seed_from_u64(seed);
            let simulated = (0..mc)
                .map(|_| {
                    Ok(crate::curator::collision_count(
                        &crate::stats::sample_multinomial(&mut sim, n, &uniform)?,
                        f64::INFINITY,
                    ))
                })
                .collect::<Result<Vec<f64>, EngineError>>()?;
            let exceed = simulated.iter().filter(|&&t| t >= observed).count();
            Ok((1 + exceed) as f64 / (mc + 1) as f64 <= alpha)
        }
    }
}
