//! The longitudinal (memoized) kinds `lgrr`, `losue` and `lsue`: their parameters in one
//! place, and the one rule that keeps the statistics honest: the server sees their composed
//! channel, which is exactly `grr`, `oue` or `bitflip` at `epsilon_1`
//! (docs/STATISTICS.md §1.9), so every estimate and test of those kinds applies unchanged.

use std::borrow::Cow;

use crate::duration::DurationMs;
use crate::model::MechanismConfig;
pub use crate::model::DEFAULT_PERIOD;

/// The shortest `period`: a device reports at most once per period, so a shorter one only
/// multiplies reports without any gain in privacy bookkeeping.
pub const MIN_PERIOD: DurationMs = DurationMs(1_000);

/// Which two-round construction (docs/STATISTICS.md §1.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LongitudinalKind {
    /// GenRR memoized, GenRR per report: composed = `grr` at ε1.
    Lgrr,
    /// OUE memoized, every bit flipped per report: composed = `oue` at ε1.
    Losue,
    /// Symmetric bit flipping memoized, every bit flipped per report: composed =
    /// `bitflip` at ε1.
    Lsue,
}

impl LongitudinalKind {
    pub fn name(self) -> &'static str {
        match self {
            LongitudinalKind::Lgrr => "lgrr",
            LongitudinalKind::Losue => "losue",
            LongitudinalKind::Lsue => "lsue",
        }
    }

    /// The one-shot kind the memo (round 1) draws at ε∞ and the composed channel equals at
    /// ε1.
    pub fn base_kind(self) -> &'static str {
        match self {
            LongitudinalKind::Lgrr => "grr",
            LongitudinalKind::Losue => "oue",
            LongitudinalKind::Lsue => "bitflip",
        }
    }
}

/// A longitudinal mechanism table's values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LongitudinalParams {
    pub kind: LongitudinalKind,
    /// ε∞: the privacy of the memoized response, spent once per distinct value.
    pub epsilon_perm: f64,
    /// ε1: the privacy of one report.
    pub epsilon_1: f64,
    pub domain: u32,
    /// A device reports a metric at most once per period (periods aligned to the Unix
    /// epoch, like the windows).
    pub period: DurationMs,
}

impl LongitudinalParams {
    /// The one-shot mechanism at `epsilon` with this kind's composed shape.
    pub fn base_at(&self, epsilon: f64) -> MechanismConfig {
        let domain = self.domain;
        match self.kind {
            LongitudinalKind::Lgrr => MechanismConfig::Grr { epsilon, domain },
            LongitudinalKind::Losue => MechanismConfig::Oue { epsilon, domain },
            LongitudinalKind::Lsue => MechanismConfig::Bitflip { epsilon, domain },
        }
    }
}

impl MechanismConfig {
    /// The parameters of an `lgrr`, `losue` or `lsue` table; None for the other kinds.
    pub fn longitudinal(&self) -> Option<LongitudinalParams> {
        let (kind, epsilon_perm, epsilon_1, domain, period) = match *self {
            MechanismConfig::Lgrr {
                epsilon_perm,
                epsilon_1,
                domain,
                period,
            } => (
                LongitudinalKind::Lgrr,
                epsilon_perm,
                epsilon_1,
                domain,
                period,
            ),
            MechanismConfig::Losue {
                epsilon_perm,
                epsilon_1,
                domain,
                period,
            } => (
                LongitudinalKind::Losue,
                epsilon_perm,
                epsilon_1,
                domain,
                period,
            ),
            MechanismConfig::Lsue {
                epsilon_perm,
                epsilon_1,
                domain,
                period,
            } => (
                LongitudinalKind::Lsue,
                epsilon_perm,
                epsilon_1,
                domain,
                period,
            ),
            _ => return None,
        };
        Some(LongitudinalParams {
            kind,
            epsilon_perm,
            epsilon_1,
            domain,
            period,
        })
    }

    /// The channel the server's statistics see: for `lgrr`, `losue` and `lsue` the
    /// composed channel (`grr`, `oue`, `bitflip` at `epsilon_1`), for every other kind the
    /// table itself. Every statistics entry point reads the mechanism through this.
    pub fn server_channel(&self) -> Cow<'_, MechanismConfig> {
        match self.longitudinal() {
            Some(l) => Cow::Owned(l.base_at(l.epsilon_1)),
            None => Cow::Borrowed(self),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_channel_is_the_base_kind_at_epsilon_1() {
        let l = MechanismConfig::Losue {
            epsilon_perm: 2.0,
            epsilon_1: 0.5,
            domain: 9,
            period: DEFAULT_PERIOD,
        };
        assert_eq!(
            *l.server_channel(),
            MechanismConfig::Oue {
                epsilon: 0.5,
                domain: 9
            }
        );
        let grr = MechanismConfig::Grr {
            epsilon: 1.0,
            domain: 3,
        };
        assert!(matches!(grr.server_channel(), Cow::Borrowed(_)));
        for (kind, base) in [
            (LongitudinalKind::Lgrr, "grr"),
            (LongitudinalKind::Losue, "oue"),
            (LongitudinalKind::Lsue, "bitflip"),
        ] {
            let p = LongitudinalParams {
                kind,
                epsilon_perm: 2.0,
                epsilon_1: 1.0,
                domain: 4,
                period: DEFAULT_PERIOD,
            };
            assert_eq!(p.base_at(1.0).kind(), base);
            assert_eq!(kind.base_kind(), base);
        }
    }

    /// Every test a longitudinal stream offers is its composed kind's, in the same order
    /// (so the same default).
    #[test]
    fn tests_are_chosen_by_the_composed_channel() {
        use crate::hypothesis_spec::{TestKind, TestMethod};
        for table in [
            "{ kind = \"lgrr\", epsilon_perm = 3.0, epsilon_1 = 1.0, domain = 4 }",
            "{ kind = \"losue\", epsilon_perm = 3.0, epsilon_1 = 1.0, domain = 4 }",
            "{ kind = \"lsue\", epsilon_perm = 3.0, epsilon_1 = 1.0, domain = 4 }",
        ] {
            let m: MechanismConfig = toml::from_str(&format!("m = {table}"))
                .map(|t: std::collections::BTreeMap<String, MechanismConfig>| t["m"].clone())
                .unwrap();
            for kind in [
                TestKind::Gof,
                TestKind::Independence,
                TestKind::TwoSample,
                TestKind::Uniformity,
                TestKind::Identity,
            ] {
                assert_eq!(
                    TestMethod::applicable(kind, &m),
                    TestMethod::applicable(kind, &m.server_channel()),
                    "{table} {kind:?}"
                );
            }
            assert!(!TestMethod::applicable(TestKind::Gof, &m).is_empty());
        }
    }
}
