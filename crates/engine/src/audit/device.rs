//! The audit of a longitudinal device over many reports of one value (docs/STATISTICS.md
//! §1.9): R reports of the same value by one device all come from one memo, so any
//! statistic of them is a post-processing of the memo and its loss stays below ε∞
//! (`epsilon_perm`), however large R is. The audit's output is the statistic that
//! recovers the memo best: the modal category (lgrr) or the per-bit majority (losue,
//! lsue) of the R reports, enumerated as the memo's own reports are (category; packed
//! bits as an integer), and its claim is ε∞. A client without memo fails it: its reports
//! average to the true value, and the bound passes ε∞ as R grows.

use rand::Rng;

use super::{audit_sampler, packed_index, AuditReport};
use crate::error::EngineError;
use crate::mechanism::{Longitudinal, Response};

/// The statistic of one device's reports, as an index of the memo's enumeration: the
/// most frequent category (the smallest on a tie), or each bit set when more than half of
/// the reports set it.
pub fn device_statistic(reports: &[Response]) -> Result<usize, EngineError> {
    let Some(first) = reports.first() else {
        return Err(EngineError::invalid("reports", 0, "at least one report"));
    };
    match first {
        Response::Category(_) => {
            let mut counts = std::collections::BTreeMap::new();
            for r in reports {
                let Response::Category(c) = r else {
                    return Err(EngineError::Corrupt("mixed report forms".into()));
                };
                *counts.entry(*c).or_insert(0u64) += 1;
            }
            let best = counts.values().copied().max().unwrap_or(0);
            Ok(counts
                .iter()
                .find(|(_, &k)| k == best)
                .map_or(0, |(&c, _)| c as usize))
        }
        Response::Bits(b) => {
            let bits = b.len() * 8;
            let mut ones = vec![0usize; bits];
            for r in reports {
                let Response::Bits(b) = r else {
                    return Err(EngineError::Corrupt("mixed report forms".into()));
                };
                for (j, one) in ones.iter_mut().enumerate() {
                    *one += usize::from((b.get(j / 8).copied().unwrap_or(0) >> (j % 8)) & 1);
                }
            }
            let mut majority = vec![0u8; b.len()];
            for (j, &one) in ones.iter().enumerate() {
                if 2 * one > reports.len() {
                    majority[j / 8] |= 1 << (j % 8);
                }
            }
            Ok(packed_index(&majority))
        }
    }
}

/// One new device's statistic over `reports` reports of `x` (one per period, each from the
/// same memo).
pub fn sample_device_output<R: Rng + ?Sized>(
    mechanism: &Longitudinal,
    x: u32,
    reports: u32,
    rng: &mut R,
) -> Result<usize, EngineError> {
    let memo = mechanism.memoize(x, rng)?;
    let drawn = (0..reports)
        .map(|_| mechanism.report_from(&memo, rng))
        .collect::<Result<Vec<_>, _>>()?;
    device_statistic(&drawn)
}

/// Samples `samples` new devices per input, each reporting its value `reports` times, and
/// bounds the loss of their statistic from below; the claim and the exact loss are the
/// memo's (ε∞).
pub fn audit_device<R: Rng + ?Sized>(
    mechanism: &Longitudinal,
    reports: u32,
    samples: u64,
    confidence: f64,
    rng: &mut R,
) -> Result<AuditReport, EngineError> {
    if reports == 0 {
        return Err(EngineError::invalid("device reports", 0, "at least 1"));
    }
    audit_sampler(
        mechanism.first_round(),
        samples,
        confidence,
        rng,
        |x, rng| sample_device_output(mechanism, x, reports, rng),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::AUDIT_CONFIDENCE;
    use ldpstream_config::{DurationMs, LongitudinalKind, LongitudinalParams};
    use rand::SeedableRng;

    fn longitudinal(kind: LongitudinalKind, d: u32) -> Longitudinal {
        Longitudinal::new(LongitudinalParams {
            kind,
            epsilon_perm: 2.0,
            epsilon_1: 0.5,
            domain: d,
            period: DurationMs(86_400_000),
        })
        .unwrap()
    }

    #[test]
    fn the_statistic_is_the_mode_or_the_majority() {
        let c = |x| Response::Category(x);
        assert_eq!(device_statistic(&[c(2), c(1), c(2), c(1)]).unwrap(), 1);
        assert_eq!(device_statistic(&[c(3), c(0), c(3)]).unwrap(), 3);
        let b = |x: u8| Response::Bits(vec![x, 1]);
        // Bit 0 in 2 of 3, bit 1 in 1 of 3, bit 8 in all.
        assert_eq!(
            device_statistic(&[b(0b01), b(0b11), b(0b00)]).unwrap(),
            0x101
        );
        assert!(device_statistic(&[]).is_err());
    }

    /// Many reports of one value by one device stay below ε∞ (their statistic is the memo,
    /// nearly); the same number of reports from a
    /// memoryless client at ε1 each passes ε∞.
    #[test]
    fn many_reports_of_one_value_stay_below_epsilon_perm() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for kind in [
            LongitudinalKind::Lgrr,
            LongitudinalKind::Losue,
            LongitudinalKind::Lsue,
        ] {
            let l = longitudinal(kind, 3);
            let r = audit_device(&l, 100, 10_000, AUDIT_CONFIDENCE, &mut rng).unwrap();
            assert_eq!(r.claimed_epsilon, Some(2.0));
            assert!(
                r.empirical_lower_bound < 2.0 && r.empirical_lower_bound > 1.0,
                "{kind:?}: {r:?}"
            );
        }
        // A memoryless GenRR at ε1 = 0.5, 100 reports of the same value: its mode is the
        // value almost surely, far past ε∞ = 2.
        let l = longitudinal(LongitudinalKind::Lgrr, 3);
        let fresh = audit_sampler(
            l.first_round(),
            10_000,
            AUDIT_CONFIDENCE,
            &mut rng,
            |x, rng| {
                let drawn = (0..100)
                    .map(|_| l.fresh_report(x, rng))
                    .collect::<Result<Vec<_>, _>>()?;
                device_statistic(&drawn)
            },
        )
        .unwrap();
        assert!(fresh.empirical_lower_bound > 2.0, "{fresh:?}");
    }
}
