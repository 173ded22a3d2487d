//! A test's kind and the keys that only that kind takes, as one typed value.
//!
//! The TOML form is flat (`kind = "independence"`, `rows = 2`, `cols = 3`), which is what
//! users write; [`RawTestConfig`] mirrors it. Converting it into [`TestSpec`] at parse time
//! means a kind without its keys, or with another kind's keys, never reaches the engine, and
//! everything downstream matches exhaustively on the variant instead of on a bag of options.
//! Checks that need the stream (the null's length, `rows × cols` against the domain, `by`
//! against the report column, ε's range, the method) stay in `validate/hypothesis.rs`,
//! which knows the stream and turns the parsed [`TestTable`] into a [`crate::TestConfig`]
//! whose method carries its own keys (`hypothesis_config.rs`).

use serde::Deserialize;

use crate::duration::DurationMs;
use crate::null::NullSpec;
use crate::window::{WindowConfig, WindowTable};

/// One `[[stream.test]]` table as parsed: its kind already typed ([`TestSpec`]), its method
/// still as written. Validation checks it against its stream and turns it into a
/// [`crate::TestConfig`], whose method is resolved and carries its own keys.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "RawTestConfig")]
pub(crate) struct TestTable {
    pub(crate) name: String,
    pub(crate) spec: TestSpec,
    /// The `method` key; `None` asks for the mechanism's default for the kind.
    pub(crate) method: Option<TestMethod>,
    pub(crate) method_keys: MethodKeys,
    pub(crate) alpha: f64,
    pub(crate) window: WindowConfig,
    pub(crate) looks: Option<DurationMs>,
    pub(crate) calibration: Calibration,
    pub(crate) mc_samples: u32,
    pub(crate) seed: u64,
    pub(crate) sequential: bool,
    pub(crate) design_n: Option<u64>,
}

impl TestTable {
    pub(crate) fn kind(&self) -> TestKind {
        self.spec.kind()
    }
}

/// The keys that belong to particular methods, as written (with their defaults). Which
/// kinds may carry the curator ones was settled at parse time; which method uses which is
/// settled by validation, once the method is known.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MethodKeys {
    /// SheffetTV and SheffetTVIndependence.
    pub(crate) distance: Option<f64>,
    /// PrivateCollisions.
    pub(crate) epsilon_split: f64,
    /// SubsampleAndAggregate.
    pub(crate) delta: f64,
    /// SubsampleAndAggregate.
    pub(crate) block_size: Option<u64>,
    /// SubsampleAndAggregate.
    pub(crate) inner: InnerTester,
}

/// The non-private testers SubsampleAndAggregate can wrap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InnerTester {
    /// Pearson's χ² GOF at level alpha.
    #[default]
    Pearson,
    /// The collision statistic with a Monte Carlo threshold under uniform.
    Collisions,
}

fn default_mc_samples() -> u32 {
    999
}

fn default_alpha() -> f64 {
    0.05
}

/// Concrete tests, named as in docs/STATISTICS.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum TestMethod {
    /// Gaboardi–Rogers' chi-square test on GenRR counts (seed 002, Alg. 3).
    LocalExpGOF,
    /// Gaboardi–Rogers' projected chi-square test on bit-flip counts (seed 002, eq. 7).
    LocalBitFlipGOF,
    /// Gaboardi–Rogers' projected test on noisy one-hot sums (seed 002, Alg. 1).
    LocalNoiseGOF,
    /// The generalized-inverse χ² on k-subset item counts (docs/STATISTICS.md §3.2).
    SubsetGOF,
    /// Sheffet's chi-square statistic P(θ) for the non-symmetric mechanism (seed 000 §4.2).
    SheffetChi2,
    /// Sheffet's total-variation accept/reject rule (seed 000, Thm 11).
    SheffetTV,
    /// Pearson's chi-square on the signal counts of a channel, against `G p0`
    /// (Sheffet Thm 3 / Cor. 5, the test LocalExpGOF is a special case of).
    ChannelGOF,
    /// OLH with a fixed seed pool: a quadratic form in the support counts, weighted by
    /// their exact conditional null variances, calibrated by simulating the pool's rows
    /// under H0 (docs/STATISTICS.md §3.3).
    OlhSupportGOF,
    /// Pearson's classical chi-square on raw counts (curator model; not private by itself).
    PearsonGOF,
    /// Gaboardi–Rogers' independence test on GenRR counts (seed 002, eqs. 11–12).
    LocalExpIND,
    /// Gaboardi–Rogers' minimised projected statistic on bit-flip counts (eqs. 13–15).
    LocalBitFlipIND,
    /// Gaboardi–Rogers' minimised statistic on Gaussian-noise sums (eq. 10, Alg. 6).
    LocalNoiseIND,
    /// Sheffet's marginal-product TV rule (seed 000, Thm 12).
    SheffetTVIndependence,
    /// Sheffet's Q statistic, calibrated by a Monte Carlo null (its law is unknown).
    SheffetQ,
    /// Pearson's χ² on the 2×d table of privatized counts of two samples (seed 003).
    GenRRTwoSample,
    /// The projected two-sample statistic on bit-flip counts with a pooled estimate.
    BitFlipTwoSample,
    /// Curator model: unique-elements count plus Laplace noise (seed 004).
    PrivateUniqueElements,
    /// Curator model: noisy N_max check, then a clipped noisy collision count (seed 004).
    PrivateCollisions,
    /// Curator model: any non-private tester on one random block, answer flipped w.p. δ.
    SubsampleAndAggregate,
}

impl TestMethod {
    pub fn name(&self) -> &'static str {
        match self {
            TestMethod::LocalExpGOF => "LocalExpGOF",
            TestMethod::LocalBitFlipGOF => "LocalBitFlipGOF",
            TestMethod::LocalNoiseGOF => "LocalNoiseGOF",
            TestMethod::SubsetGOF => "SubsetGOF",
            TestMethod::SheffetChi2 => "SheffetChi2",
            TestMethod::SheffetTV => "SheffetTV",
            TestMethod::ChannelGOF => "ChannelGOF",
            TestMethod::PearsonGOF => "PearsonGOF",
            TestMethod::OlhSupportGOF => "OlhSupportGOF",
            TestMethod::LocalExpIND => "LocalExpIND",
            TestMethod::LocalBitFlipIND => "LocalBitFlipIND",
            TestMethod::LocalNoiseIND => "LocalNoiseIND",
            TestMethod::SheffetTVIndependence => "SheffetTVIndependence",
            TestMethod::SheffetQ => "SheffetQ",
            TestMethod::GenRRTwoSample => "GenRRTwoSample",
            TestMethod::BitFlipTwoSample => "BitFlipTwoSample",
            TestMethod::PrivateUniqueElements => "PrivateUniqueElements",
            TestMethod::PrivateCollisions => "PrivateCollisions",
            TestMethod::SubsampleAndAggregate => "SubsampleAndAggregate",
        }
    }
}

/// How a test's p-value is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Calibration {
    /// The test's asymptotic null law (χ² for most tests).
    #[default]
    Asymptotic,
    /// Also simulate `mc_samples` null sketches from the mechanism's law and report the
    /// Monte Carlo p-value `(1 + #{T_b >= T})/(m + 1)` beside the asymptotic one.
    MonteCarlo,
}

/// Families of hypothesis tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestKind {
    /// Identity / goodness of fit: H0 is p = p0.
    Gof,
    /// Independence of the row and column variables of an r×c table.
    Independence,
    /// Two samples (labelled by a column) come from the same distribution.
    TwoSample,
    /// Curator model: a differentially private test of H0: p = uniform.
    Uniformity,
    /// Curator model: a differentially private test of H0: p = q (Goldreich's reduction to
    /// uniformity on [6d]).
    Identity,
}

/// What a test tests, with exactly the parameters its kind needs.
#[derive(Debug, Clone, PartialEq)]
pub enum TestSpec {
    /// H0: p = `null`.
    Gof { null: NullSpec },
    /// H0: the row and column variables of the `rows × cols` table are independent.
    Independence { rows: u32, cols: u32 },
    /// H0: the reports whose `by` column is `a` and those where it is `b` share a law.
    TwoSample { by: String, a: String, b: String },
    /// Curator model, H0: p = uniform.
    Uniformity(CuratorSpec),
    /// Curator model, H0: p = `null`.
    Identity {
        null: NullSpec,
        curator: CuratorSpec,
    },
}

/// The parameters every curator-model (differentially private) test takes; the keys of
/// particular methods are in [`crate::MethodSpec`].
#[derive(Debug, Clone, PartialEq)]
pub struct CuratorSpec {
    /// The ε each release spends from the stream's budget (checked > 0 by the validator).
    pub epsilon: f64,
}

impl TestSpec {
    pub fn kind(&self) -> TestKind {
        match self {
            TestSpec::Gof { .. } => TestKind::Gof,
            TestSpec::Independence { .. } => TestKind::Independence,
            TestSpec::TwoSample { .. } => TestKind::TwoSample,
            TestSpec::Uniformity(_) => TestKind::Uniformity,
            TestSpec::Identity { .. } => TestKind::Identity,
        }
    }

    /// The null distribution, for the kinds that have one.
    pub fn null(&self) -> Option<&NullSpec> {
        match self {
            TestSpec::Gof { null } | TestSpec::Identity { null, .. } => Some(null),
            TestSpec::Independence { .. }
            | TestSpec::TwoSample { .. }
            | TestSpec::Uniformity(_) => None,
        }
    }

    /// The private-release parameters, for the curator-model kinds.
    pub fn curator(&self) -> Option<&CuratorSpec> {
        match self {
            TestSpec::Uniformity(c) | TestSpec::Identity { curator: c, .. } => Some(c),
            TestSpec::Gof { .. } | TestSpec::Independence { .. } | TestSpec::TwoSample { .. } => {
                None
            }
        }
    }

    /// The column that splits reports into the two samples, for two-sample tests.
    pub fn sample_column(&self) -> Option<&str> {
        match self {
            TestSpec::TwoSample { by, .. } => Some(by),
            _ => None,
        }
    }
}

/// The TOML form of a test, exactly as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTestConfig {
    name: String,
    kind: TestKind,
    #[serde(default)]
    method: Option<TestMethod>,
    #[serde(default)]
    null: Option<NullSpec>,
    #[serde(default)]
    rows: Option<u32>,
    #[serde(default)]
    cols: Option<u32>,
    #[serde(default)]
    by: Option<String>,
    #[serde(default)]
    a: Option<String>,
    #[serde(default)]
    b: Option<String>,
    #[serde(default = "default_alpha")]
    alpha: f64,
    #[serde(default)]
    window: WindowTable,
    #[serde(default)]
    calibration: Calibration,
    #[serde(default = "default_mc_samples")]
    mc_samples: u32,
    #[serde(default)]
    seed: u64,
    #[serde(default)]
    distance: Option<f64>,
    #[serde(default)]
    epsilon: Option<f64>,
    #[serde(default)]
    epsilon_split: Option<f64>,
    #[serde(default)]
    delta: Option<f64>,
    #[serde(default)]
    block_size: Option<u64>,
    #[serde(default)]
    inner: Option<InnerTester>,
    #[serde(default)]
    sequential: bool,
    #[serde(default)]
    design_n: Option<u64>,
}

/// A kind given a key it does not take, or missing one it needs. Its text follows
/// [`crate::ConfigError::Invalid`]'s `key = value: allowed`, so both read alike.
#[derive(Debug)]
pub struct KindKeyError(String);

impl std::fmt::Display for KindKeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn default_epsilon_split() -> f64 {
    0.5
}

fn default_delta() -> f64 {
    0.1
}

impl TryFrom<RawTestConfig> for TestTable {
    type Error = KindKeyError;

    fn try_from(raw: RawTestConfig) -> Result<Self, KindKeyError> {
        let at = format!("test {:?}", raw.name);
        let forbid = |key: &str, present: bool, kinds: &str| {
            if present {
                Err(KindKeyError(format!(
                    "{at}.{key} = (set): only {kinds} tests take `{key}`"
                )))
            } else {
                Ok(())
            }
        };
        let missing =
            |key: &str, what: &str| KindKeyError(format!("{at}.{key} = (missing): {what}"));
        let kind = raw.kind;
        let is_gof = matches!(kind, TestKind::Gof | TestKind::Identity);
        let is_curator = matches!(kind, TestKind::Uniformity | TestKind::Identity);
        let is_ind = kind == TestKind::Independence;
        let is_two = kind == TestKind::TwoSample;
        let curator_keys = [
            ("epsilon", raw.epsilon.is_some()),
            ("epsilon_split", raw.epsilon_split.is_some()),
            ("delta", raw.delta.is_some()),
            ("block_size", raw.block_size.is_some()),
            ("inner", raw.inner.is_some()),
        ];
        for (key, present) in curator_keys {
            forbid(key, !is_curator && present, "uniformity and identity")?;
        }
        forbid("null", !is_gof && raw.null.is_some(), "gof and identity")?;
        forbid("rows", !is_ind && raw.rows.is_some(), "independence")?;
        forbid("cols", !is_ind && raw.cols.is_some(), "independence")?;
        for (key, v) in [("by", &raw.by), ("a", &raw.a), ("b", &raw.b)] {
            forbid(key, !is_two && v.is_some(), "two_sample")?;
        }
        let null = || {
            raw.null
                .clone()
                .ok_or_else(|| missing("null", "\"uniform\" or a list of d probabilities"))
        };
        let curator = || {
            Ok::<_, KindKeyError>(CuratorSpec {
                epsilon: raw
                    .epsilon
                    .ok_or_else(|| missing("epsilon", "the finite ε > 0 each release spends"))?,
            })
        };
        let spec = match kind {
            TestKind::Gof => TestSpec::Gof { null: null()? },
            TestKind::Independence => match (raw.rows, raw.cols) {
                (Some(rows), Some(cols)) => TestSpec::Independence { rows, cols },
                (None, _) => return Err(missing("rows", "rows and cols of the r×c table")),
                (Some(_), None) => return Err(missing("cols", "rows and cols of the r×c table")),
            },
            TestKind::TwoSample => TestSpec::TwoSample {
                by: raw
                    .by
                    .clone()
                    .ok_or_else(|| missing("by", "the Utf8 column that labels the two samples"))?,
                a: raw
                    .a
                    .clone()
                    .ok_or_else(|| missing("a", "the value of `by` for the first sample"))?,
                b: raw
                    .b
                    .clone()
                    .ok_or_else(|| missing("b", "the value of `by` for the second sample"))?,
            },
            TestKind::Uniformity => TestSpec::Uniformity(curator()?),
            TestKind::Identity => TestSpec::Identity {
                null: null()?,
                curator: curator()?,
            },
        };
        Ok(TestTable {
            name: raw.name,
            spec,
            method: raw.method,
            method_keys: MethodKeys {
                distance: raw.distance,
                epsilon_split: raw.epsilon_split.unwrap_or_else(default_epsilon_split),
                delta: raw.delta.unwrap_or_else(default_delta),
                block_size: raw.block_size,
                inner: raw.inner.unwrap_or_default(),
            },
            alpha: raw.alpha,
            window: raw.window.window,
            looks: raw.window.looks,
            calibration: raw.calibration,
            mc_samples: raw.mc_samples,
            seed: raw.seed,
            sequential: raw.sequential,
            design_n: raw.design_n,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{CuratorSpec, InnerTester, TestMethod, TestSpec};
    use crate::hypothesis_config::{MethodSpec, TestConfig};
    use crate::model::Config;
    use crate::null::NullSpec;

    fn test(mechanism: &str, test: &str) -> Result<TestConfig, String> {
        let text = format!(
            "[[stream]]\nname = \"s\"\nsource = {{ kind = \"parquet\", paths = [\"x\"] }}\n\
             mechanism = {mechanism}\nbudget_epsilon = 10.0\n[[stream.test]]\nname = \"t\"\n{test}\n"
        );
        Config::from_toml_str(&text, "t")
            .map(|c| c.streams[0].tests[0].clone())
            .map_err(|e| e.to_string())
    }

    fn spec(mechanism: &str, keys: &str) -> Result<TestSpec, String> {
        test(mechanism, keys).map(|t| t.spec)
    }

    fn method(mechanism: &str, keys: &str) -> Result<MethodSpec, String> {
        test(mechanism, keys).map(|t| t.method)
    }

    const GRR6: &str = "{ kind = \"grr\", epsilon = 1.0, domain = 6 }";
    const RAW6: &str = "{ kind = \"raw\", domain = 6 }";

    #[test]
    fn each_kind_becomes_its_variant_with_its_keys() {
        assert_eq!(
            spec(GRR6, "kind = \"gof\"\nnull = \"uniform\""),
            Ok(TestSpec::Gof {
                null: NullSpec::Uniform
            })
        );
        assert_eq!(
            spec(GRR6, "kind = \"independence\"\nrows = 2\ncols = 3"),
            Ok(TestSpec::Independence { rows: 2, cols: 3 })
        );
        assert_eq!(
            spec(
                GRR6,
                "kind = \"two_sample\"\nby = \"g\"\na = \"x\"\nb = \"y\""
            ),
            Ok(TestSpec::TwoSample {
                by: "g".into(),
                a: "x".into(),
                b: "y".into()
            })
        );
        let curator = CuratorSpec { epsilon: 0.5 };
        assert_eq!(
            spec(RAW6, "kind = \"uniformity\"\nepsilon = 0.5"),
            Ok(TestSpec::Uniformity(curator.clone()))
        );
        assert_eq!(
            spec(
                RAW6,
                "kind = \"identity\"\nnull = \"uniform\"\nepsilon = 0.5\ndelta = 0.25\n\
                 inner = \"collisions\"\nblock_size = 7\nepsilon_split = 0.3"
            ),
            Ok(TestSpec::Identity {
                null: NullSpec::Uniform,
                curator,
            })
        );
    }

    /// The curator keys land in the method that takes them, with their defaults.
    #[test]
    fn curator_keys_become_their_methods_keys() {
        assert_eq!(
            method(RAW6, "kind = \"uniformity\"\nepsilon = 0.5"),
            Ok(MethodSpec::PrivateCollisions { epsilon_split: 0.5 })
        );
        assert_eq!(
            method(
                RAW6,
                "kind = \"uniformity\"\nepsilon = 0.5\nmethod = \"SubsampleAndAggregate\"\n\
                 block_size = 3"
            ),
            Ok(MethodSpec::SubsampleAndAggregate {
                delta: 0.1,
                block_size: 3,
                inner: InnerTester::Pearson,
            })
        );
        let identity = "kind = \"identity\"\nnull = \"uniform\"\nepsilon = 0.5\ndelta = 0.25\n\
                        inner = \"collisions\"\nblock_size = 7\nepsilon_split = 0.3";
        assert_eq!(
            method(RAW6, identity),
            Ok(MethodSpec::PrivateCollisions { epsilon_split: 0.3 })
        );
        assert_eq!(
            method(
                RAW6,
                &format!("{identity}\nmethod = \"SubsampleAndAggregate\"")
            ),
            Ok(MethodSpec::SubsampleAndAggregate {
                delta: 0.25,
                block_size: 7,
                inner: InnerTester::Collisions,
            })
        );
        assert_eq!(
            method(
                "{ kind = \"hadamard\", epsilon = 1.0, domain = 4 }",
                "kind = \"independence\"\nrows = 2\ncols = 2\ndistance = 0.5"
            ),
            Ok(MethodSpec::SheffetTVIndependence { distance: 0.5 })
        );
        assert_eq!(
            method(GRR6, "kind = \"gof\"\nnull = \"uniform\""),
            Ok(MethodSpec::Plain(TestMethod::LocalExpGOF))
        );
    }

    // These keys used to be accepted and ignored on non-curator tests, so a user who set
    // `delta` on a gof test believed it did something.
    #[test]
    fn curator_keys_on_other_kinds_are_refused_by_name() {
        for key in [
            "epsilon = 1.0",
            "epsilon_split = 0.3",
            "delta = 0.2",
            "block_size = 5",
            "inner = \"pearson\"",
        ] {
            let e = spec(GRR6, &format!("kind = \"gof\"\nnull = \"uniform\"\n{key}")).unwrap_err();
            let name = key.split(' ').next().unwrap_or_default();
            assert!(
                e.contains(&format!("test \"t\".{name} = (set)"))
                    && e.contains("only uniformity and identity tests"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_missing_kind_key_is_named() {
        let e = spec(GRR6, "kind = \"independence\"\nrows = 2").unwrap_err();
        assert!(e.contains("test \"t\".cols = (missing)"), "{e}");
        let e = spec(RAW6, "kind = \"uniformity\"").unwrap_err();
        assert!(e.contains("test \"t\".epsilon = (missing)"), "{e}");
        let e = spec(RAW6, "kind = \"identity\"\nepsilon = 1.0").unwrap_err();
        assert!(e.contains("test \"t\".null = (missing)"), "{e}");
        let e = spec(GRR6, "kind = \"two_sample\"\na = \"x\"\nb = \"y\"").unwrap_err();
        assert!(e.contains("test \"t\".by = (missing)"), "{e}");
    }
}
