//! One `[[stream.test]]` table against the stream it runs on: level, kind keys, window,
//! method and its calibration.

use std::collections::HashSet;

use super::longitudinal::validate_longitudinal_window;
use super::null::validate_null;
use super::window::{validate_looks, validate_window};
use crate::error::ConfigError;
use crate::hypothesis_config::{MethodSpec, TestConfig};
use crate::hypothesis_spec::{
    Calibration, CuratorSpec, MethodKeys, TestKind, TestMethod, TestSpec, TestTable,
};
use crate::model::MechanismConfig;
use crate::toml_form::StreamTable;
use crate::values::Alpha;

/// The most simulated null sketches a Monte Carlo test may draw per evaluation.
pub const MAX_MC_SAMPLES: u32 = 1_000_000;

/// Every test of the stream `at` names; a test's name must be unique within it.
pub(super) fn validate_tests(
    at: &str,
    stream: &StreamTable,
) -> Result<Vec<TestConfig>, ConfigError> {
    let mut names = HashSet::new();
    let mut tests = Vec::with_capacity(stream.tests.len());
    for (j, test) in stream.tests.iter().enumerate() {
        if !names.insert(test.name.as_str()) {
            return Err(ConfigError::invalid(
                format!("{at}.test[{j}].name"),
                format!("{:?}", test.name),
                "test names must be unique within a stream; this one is used twice",
            ));
        }
        tests.push(validate_test(
            &format!("{at}.test[{j}] ({:?})", test.name),
            test,
            stream,
        )?);
    }
    Ok(tests)
}

/// One test, `at` naming it in errors.
fn validate_test(
    at: &str,
    test: &TestTable,
    stream: &StreamTable,
) -> Result<TestConfig, ConfigError> {
    let Some(alpha) = Alpha::new(test.alpha) else {
        return Err(ConfigError::invalid(
            format!("{at}.alpha"),
            test.alpha,
            "a number strictly between 0 and 1",
        ));
    };
    let d = stream.mechanism.domain() as usize;
    validate_kind_keys(at, test, d, &stream.columns.report)?;
    validate_window(&format!("{at}.window"), &test.window)?;
    validate_looks(&format!("{at}.window.looks"), test)?;
    validate_longitudinal_window(&format!("{at}.window"), test, &stream.mechanism)?;
    let method = resolve_method(at, test, &stream.mechanism)?;
    validate_sequential(at, test, &stream.mechanism)?;
    validate_calibration(at, test, method, &stream.mechanism)?;
    Ok(TestConfig {
        name: test.name.clone(),
        spec: test.spec.clone(),
        method: method_spec(at, method, &test.method_keys)?,
        alpha,
        window: test.window,
        looks: test.looks,
        calibration: test.calibration,
        mc_samples: test.mc_samples,
        seed: test.seed,
        sequential: test.sequential,
        design_n: test.design_n,
    })
}

/// The method the test runs: the one it names, if the mechanism offers it, else the
/// mechanism's default for the kind.
fn resolve_method(
    at: &str,
    test: &TestTable,
    mechanism: &MechanismConfig,
) -> Result<TestMethod, ConfigError> {
    if let Some(method) = test.method {
        check_method_applies(at, method, test.kind(), mechanism)?;
        return Ok(method);
    }
    match TestMethod::applicable(test.kind(), mechanism).first() {
        Some(m) => Ok(*m),
        None => Err(ConfigError::invalid(
            format!("{at}.kind"),
            format!("{:?}", test.kind()),
            format!("a test kind that a {} stream supports", mechanism.kind()),
        )),
    }
}

fn validate_sequential(
    at: &str,
    test: &TestTable,
    mechanism: &MechanismConfig,
) -> Result<(), ConfigError> {
    if test.sequential && !supports_sequential(test.kind(), mechanism) {
        return Err(ConfigError::invalid(
            format!("{at}.sequential"),
            true,
            format!(
                "not offered for a {:?} test on a {} stream (remove the key, or set it to \
                 false): sequential (anytime-valid) mode covers gof on every mechanism, \
                 independence on grr and bitflip, and two_sample on grr, matrix, raw and \
                 bitflip",
                test.kind(),
                mechanism.kind()
            ),
        ));
    }
    validate_design_n(at, test)
}

/// `design_n` tunes the e-process, so it needs one, and a planned n the arithmetic of
/// counts can reach.
fn validate_design_n(at: &str, test: &TestTable) -> Result<(), ConfigError> {
    let Some(n) = test.design_n else {
        return Ok(());
    };
    if !test.sequential {
        return Err(ConfigError::invalid(
            format!("{at}.design_n"),
            n,
            "only with sequential = true: it tunes the anytime-valid test to a planned \
             sample size (remove the key, or set sequential = true)",
        ));
    }
    if n == 0 || n > MAX_DESIGN_N {
        return Err(ConfigError::invalid(
            format!("{at}.design_n"),
            n,
            format!(
                "a planned number of reports from 1 to 2^53 ({MAX_DESIGN_N}), e.g. the n \
                 `ldpstream plan --sequential` prints"
            ),
        ));
    }
    Ok(())
}

/// Counts stay exact in f64 up to here, as in the planner.
const MAX_DESIGN_N: u64 = 1 << 53;

/// Monte Carlo calibration: where it is offered, and enough (but not too many) samples
/// wherever a null is simulated.
fn validate_calibration(
    at: &str,
    test: &TestTable,
    method: TestMethod,
    mechanism: &MechanismConfig,
) -> Result<(), ConfigError> {
    if test.calibration == Calibration::MonteCarlo && test.kind() != TestKind::Gof {
        return Err(ConfigError::invalid(
            format!("{at}.calibration"),
            "\"monte_carlo\"",
            "\"asymptotic\": Monte Carlo calibration is offered for gof tests (SheffetQ always simulates its null)",
        ));
    }
    let needs_mc = test.calibration == Calibration::MonteCarlo
        || method == TestMethod::SheffetQ
        || matches!(mechanism, MechanismConfig::Laplace { .. });
    if test.mc_samples > MAX_MC_SAMPLES {
        return Err(ConfigError::invalid(
            format!("{at}.mc_samples"),
            test.mc_samples,
            format!(
                "at most {MAX_MC_SAMPLES}: every sample is a simulated sketch of the \
                 domain's size, so a larger count runs for minutes and holds gigabytes"
            ),
        ));
    }
    if needs_mc && f64::from(test.mc_samples) * test.alpha <= 1.0 {
        return Err(ConfigError::invalid(
            format!("{at}.mc_samples"),
            test.mc_samples,
            format!(
                "more than 1/alpha = {} simulated null samples",
                1.0 / test.alpha
            ),
        ));
    }
    Ok(())
}

/// The method with its own keys. `distance` belongs to the total-variation rules, which
/// cannot run without it; the curator methods' keys were checked with the kind's.
fn method_spec(at: &str, method: TestMethod, keys: &MethodKeys) -> Result<MethodSpec, ConfigError> {
    let tv = matches!(
        method,
        TestMethod::SheffetTV | TestMethod::SheffetTVIndependence
    );
    if let (false, Some(x)) = (tv, keys.distance) {
        return Err(ConfigError::invalid(
            format!("{at}.distance"),
            x,
            "only SheffetTV and SheffetTVIndependence take a distance",
        ));
    }
    Ok(match method {
        TestMethod::SheffetTV => MethodSpec::SheffetTV {
            distance: tv_distance(at, keys.distance)?,
        },
        TestMethod::SheffetTVIndependence => MethodSpec::SheffetTVIndependence {
            distance: tv_distance(at, keys.distance)?,
        },
        TestMethod::PrivateCollisions => MethodSpec::PrivateCollisions {
            epsilon_split: keys.epsilon_split,
        },
        TestMethod::SubsampleAndAggregate => MethodSpec::SubsampleAndAggregate {
            delta: keys.delta,
            block_size: block_size(at, keys)?,
            inner: keys.inner,
        },
        other => MethodSpec::Plain(other),
    })
}

fn tv_distance(at: &str, distance: Option<f64>) -> Result<f64, ConfigError> {
    match distance {
        None => Err(ConfigError::invalid(
            format!("{at}.distance"),
            "(missing)",
            "SheffetTV needs a distance parameter in (0, 2]",
        )),
        Some(x) if !(x > 0.0 && x <= 2.0) => Err(ConfigError::invalid(
            format!("{at}.distance"),
            x,
            "a total-variation distance parameter in (0, 2]",
        )),
        Some(x) => Ok(x),
    }
}

/// The (kind, mechanism) pairs that have an e-process (engine `sequential` module).
fn supports_sequential(kind: TestKind, mechanism: &MechanismConfig) -> bool {
    // A longitudinal stream has its composed channel's e-processes (within a period).
    let channel = mechanism.server_channel();
    let mechanism = &*channel;
    match kind {
        TestKind::Gof => true,
        TestKind::Independence => matches!(
            mechanism,
            MechanismConfig::Grr { .. } | MechanismConfig::Bitflip { .. }
        ),
        TestKind::TwoSample => matches!(
            mechanism,
            MechanismConfig::Grr { .. }
                | MechanismConfig::Matrix { .. }
                | MechanismConfig::Raw { .. }
                | MechanismConfig::Bitflip { .. }
        ),
        TestKind::Uniformity | TestKind::Identity => false,
    }
}

/// The kind-specific values, against the stream they run on. Which keys a kind takes was
/// settled at parse time ([`TestSpec`]); here only their values are checked.
fn validate_kind_keys(
    at: &str,
    test: &TestTable,
    d: usize,
    report: &str,
) -> Result<(), ConfigError> {
    if let Some(null) = test.spec.null() {
        validate_null(&format!("{at}.null"), null, d)?;
    }
    match &test.spec {
        TestSpec::Gof { .. } => {}
        TestSpec::Independence { rows, cols } => {
            let (r, c) = (*rows, *cols);
            if r < 2 || c < 2 || (r as usize) * (c as usize) != d {
                return Err(ConfigError::invalid(
                    format!("{at}.rows"),
                    format!("{r} (cols = {c})"),
                    format!("rows >= 2 and cols >= 2 with rows × cols = the domain ({d})"),
                ));
            }
        }
        TestSpec::TwoSample { by, a, b } => {
            if a == b {
                return Err(ConfigError::invalid(
                    format!("{at}.b"),
                    format!("{b:?}"),
                    "a value different from `a`",
                ));
            }
            if by == report {
                return Err(ConfigError::invalid(
                    format!("{at}.by"),
                    format!("{report:?}"),
                    "a label column, not the report column",
                ));
            }
        }
        TestSpec::Uniformity(curator) | TestSpec::Identity { curator, .. } => {
            validate_curator_keys(at, curator, &test.method_keys, test.method)?
        }
    }
    Ok(())
}

/// A private test's ε and its methods' keys, which are checked whichever method runs.
fn validate_curator_keys(
    at: &str,
    curator: &CuratorSpec,
    keys: &MethodKeys,
    method: Option<TestMethod>,
) -> Result<(), ConfigError> {
    if !(curator.epsilon.is_finite() && curator.epsilon > 0.0) {
        return Err(ConfigError::invalid(
            format!("{at}.epsilon"),
            curator.epsilon,
            "the finite ε > 0 each release spends",
        ));
    }
    if !(keys.epsilon_split > 0.0 && keys.epsilon_split < 1.0) {
        return Err(ConfigError::invalid(
            format!("{at}.epsilon_split"),
            keys.epsilon_split,
            "a share strictly between 0 and 1",
        ));
    }
    if !(keys.delta > 0.0 && keys.delta <= 0.5) {
        return Err(ConfigError::invalid(
            format!("{at}.delta"),
            keys.delta,
            "a flip probability in (0, 0.5]",
        ));
    }
    if method == Some(TestMethod::SubsampleAndAggregate) {
        block_size(at, keys)?;
    }
    Ok(())
}

/// SubsampleAndAggregate's block size, which it cannot run without.
fn block_size(at: &str, keys: &MethodKeys) -> Result<u64, ConfigError> {
    match keys.block_size {
        Some(b) if b >= 1 => Ok(b),
        other => Err(ConfigError::invalid(
            format!("{at}.block_size"),
            other.map_or("(missing)".to_string(), |b| b.to_string()),
            "the number of consecutive reports per block (>= 1)",
        )),
    }
}

fn check_method_applies(
    at: &str,
    method: TestMethod,
    kind: TestKind,
    mechanism: &MechanismConfig,
) -> Result<(), ConfigError> {
    let allowed = TestMethod::applicable(kind, mechanism);
    if allowed.contains(&method) {
        return Ok(());
    }
    let names: Vec<&str> = allowed.iter().map(TestMethod::name).collect();
    Err(ConfigError::invalid(
        format!("{at}.method"),
        method.name(),
        format!(
            "one of {} for a {kind:?} test on a {} stream",
            names.join(", "),
            mechanism.kind()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{cfg, err, gof_err, GOOD, GRR6};
    use crate::model::Config;

    #[test]
    fn design_n_needs_sequential_and_a_reachable_n() {
        let on = GOOD.replace(
            "alpha = 0.05",
            "alpha = 0.05\nsequential = true\ndesign_n = 36061",
        );
        let c = Config::from_toml_str(&on, "test.toml").unwrap();
        assert_eq!(c.streams[0].tests[0].design_n, Some(36061));
        let plain = GOOD.replace("alpha = 0.05", "alpha = 0.05\ndesign_n = 36061");
        let e = err(&plain);
        assert!(e.contains(".design_n = 36061"), "{e}");
        assert!(e.contains("sequential = true"), "{e}");
        for bad in ["0", "9007199254740993"] {
            let e = err(&on.replace("design_n = 36061", &format!("design_n = {bad}")));
            assert!(e.contains(&format!(".design_n = {bad}")), "{e}");
            assert!(e.contains("2^53"), "{e}");
        }
        for bad in ["-5", "\"many\"", "1.5"] {
            let e = err(&on.replace("design_n = 36061", &format!("design_n = {bad}")));
            assert!(e.contains("design_n"), "{bad}: {e}");
        }
    }

    #[test]
    fn sequential_defaults_off_and_is_checked_per_kind_and_mechanism() {
        let c = Config::from_toml_str(GOOD, "test.toml").unwrap();
        assert!(!c.streams[0].tests[0].sequential);
        let on = GOOD.replace("alpha = 0.05", "alpha = 0.05\nsequential = true");
        let c = Config::from_toml_str(&on, "test.toml").unwrap();
        assert!(c.streams[0].tests[0].sequential);
        let gauss_ind = on
            .replace(
                "{ kind = \"grr\", epsilon = 1.0, domain = 4 }",
                "{ kind = \"gauss\", rho = 1.0, domain = 4 }",
            )
            .replace(
                "kind = \"gof\"\nnull = \"uniform\"",
                "kind = \"independence\"\nrows = 2\ncols = 2",
            );
        let e = err(&gauss_ind);
        assert!(e.contains("test[0] (\"uniform_gof\").sequential"), "{e}");
        assert!(e.contains("gauss stream"), "{e}");
        // It reads as a sentence, not "sequential = true: false: …".
        assert!(!e.contains("true: false"), "{e}");
        // The same independence test without sequential mode is fine.
        Config::from_toml_str(&gauss_ind.replace("\nsequential = true", ""), "t").unwrap();
    }

    #[test]
    fn rejects_alpha_outside_unit_interval() {
        for bad in ["0.0", "1.0", "1.5", "-0.1"] {
            let e = err(&GOOD.replace("alpha = 0.05", &format!("alpha = {bad}")));
            assert!(e.contains(".alpha"), "{e}");
            assert!(e.contains("strictly between 0 and 1"), "{e}");
        }
    }

    #[test]
    fn method_must_fit_mechanism() {
        let e = gof_err(
            "{ kind = \"bitflip\", epsilon = 1.0, domain = 3 }",
            "method = \"LocalExpGOF\"",
        );
        assert!(
            e.contains("one of LocalBitFlipGOF") && e.contains("bitflip"),
            "{e}"
        );
    }

    /// OUE offers the generalized LocalBitFlipGOF (sequential too); its independence and
    /// two-sample tests are not built, so they are refused, never run with bit flip's Σ.
    #[test]
    fn oue_offers_gof_only() {
        let oue = "{ kind = \"oue\", epsilon = 2.0, domain = 6 }";
        cfg(oue, "kind = \"gof\"\nnull = \"uniform\"\nsequential = true").unwrap();
        let e = cfg(oue, "kind = \"independence\"\nrows = 2\ncols = 3").unwrap_err();
        assert!(e.contains("oue"), "{e}");
        let e = err(&GOOD.replace(
            "{ kind = \"grr\", epsilon = 1.0, domain = 4 }",
            "{ kind = \"oue\", epsilon = -1.0, domain = 4 }",
        ));
        assert!(e.contains("mechanism.epsilon = -1"), "{e}");
    }

    #[test]
    fn tv_needs_a_distance_and_mc_needs_samples() {
        let h = "{ kind = \"hadamard\", epsilon = 1.0, domain = 3 }";
        let e = gof_err(h, "method = \"SheffetTV\"");
        assert!(e.contains("distance = (missing)"), "{e}");
        let e = gof_err(h, "method = \"SheffetTV\"\ndistance = 3.0");
        assert!(e.contains("distance = 3"), "{e}");
        let e = gof_err(h, "calibration = \"monte_carlo\"\nmc_samples = 10");
        assert!(
            e.contains("mc_samples = 10") && e.contains("1/alpha = 20"),
            "{e}"
        );
        let e = gof_err(
            "{ kind = \"laplace\", epsilon = 1.0, domain = 3 }",
            "mc_samples = 19",
        );
        assert!(e.contains("mc_samples = 19"), "{e}");
        let e = gof_err(
            "{ kind = \"cohort\", epsilon = 1.0, domain = 3, cohorts = 0 }",
            "",
        );
        assert!(e.contains("cohorts = 0"), "{e}");
    }

    #[test]
    fn independence_needs_a_table_matching_the_domain() {
        cfg(GRR6, "kind = \"independence\"\nrows = 2\ncols = 3").unwrap();
        let e = cfg(GRR6, "kind = \"independence\"\nrows = 2\ncols = 2").unwrap_err();
        assert!(
            e.contains("rows = 2 (cols = 2)") && e.contains("domain (6)"),
            "{e}"
        );
        let e = cfg(GRR6, "kind = \"independence\"").unwrap_err();
        assert!(e.contains("rows = (missing)"), "{e}");
        let e = cfg(
            GRR6,
            "kind = \"independence\"\nrows = 2\ncols = 3\nnull = \"uniform\"",
        )
        .unwrap_err();
        assert!(e.contains("only gof and identity tests take `null`"), "{e}");
    }

    #[test]
    fn two_sample_needs_by_a_and_distinct_b() {
        cfg(
            GRR6,
            "kind = \"two_sample\"\nby = \"g\"\na = \"x\"\nb = \"y\"",
        )
        .unwrap();
        let e = cfg(GRR6, "kind = \"two_sample\"\nby = \"g\"\na = \"x\"").unwrap_err();
        assert!(e.contains(".b = (missing)"), "{e}");
        let e = cfg(
            GRR6,
            "kind = \"two_sample\"\nby = \"g\"\na = \"x\"\nb = \"x\"",
        )
        .unwrap_err();
        assert!(e.contains("different from `a`"), "{e}");
        let e = cfg(
            "{ kind = \"gauss\", rho = 1.0, domain = 4 }",
            "kind = \"two_sample\"\nby = \"g\"\na = \"x\"\nb = \"y\"",
        )
        .unwrap_err();
        assert!(e.contains("kind") && e.contains("gauss"), "{e}");
    }

    #[test]
    fn gof_still_needs_a_null() {
        let e = cfg(GRR6, "kind = \"gof\"").unwrap_err();
        assert!(e.contains("null = (missing)"), "{e}");
    }
}
