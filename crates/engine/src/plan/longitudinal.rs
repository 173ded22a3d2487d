//! Planning the longitudinal kinds (docs/STATISTICS.md §1.9): one period's variance and
//! power are the composed kind's at ε1 (a planner row, [`PlanMechanism::for_config`]), and
//! what a device spends over a horizon ([`lifetime_spend`]).

use ldpstream_config::{DurationMs, LongitudinalParams, MechanismConfig};

use super::PlanMechanism;
use crate::error::EngineError;

impl PlanMechanism {
    /// The planner row of a mechanism table: its server channel's (for `lgrr`, `losue`
    /// and `lsue`, `grr`, `oue` and `bitflip` at `epsilon_1`); None for the kinds the
    /// planner has no row for (matrix, raw, cohort, laplace).
    pub fn for_config(config: &MechanismConfig) -> Option<PlanMechanism> {
        Some(match *config.server_channel() {
            MechanismConfig::Grr { epsilon, .. } => PlanMechanism::Grr { epsilon },
            MechanismConfig::Bitflip { epsilon, .. } => PlanMechanism::BitFlip { epsilon },
            MechanismConfig::Oue { epsilon, .. } => PlanMechanism::Oue { epsilon },
            MechanismConfig::Gauss { rho, .. } => PlanMechanism::Gauss { rho },
            MechanismConfig::Hadamard { epsilon, .. } => PlanMechanism::Hadamard { epsilon },
            MechanismConfig::Subset {
                epsilon, k: None, ..
            } => PlanMechanism::Subset { epsilon },
            MechanismConfig::Olh {
                epsilon, g: None, ..
            } => PlanMechanism::Olh { epsilon },
            _ => return None,
        })
    }
}

/// What a device of a longitudinal mechanism spends over a horizon, against a client
/// without memo (docs/STATISTICS.md §1.9, "Privacy over a lifetime").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LifetimeSpend {
    /// T, the periods in the horizon: the most reports a device makes in it.
    pub reports: u64,
    /// c, the distinct values the device held (at most T count).
    pub values: u64,
    /// The bound between two histories with the same change pattern (when the value
    /// changed, and to which earlier value it returned): Σ_v min(ε∞, n_v·ε1) ≤
    /// min(c·ε∞, T·ε1).
    pub values_bound: f64,
    /// The bound on everything, the change pattern included: T·ε1 (a memo reveals whether
    /// the value changed; only each report's own noise protects that).
    pub pattern_bound: f64,
    /// A client without memo reporting the same value T times at ε1 each: T·ε1, and its
    /// reports average to the true value.
    pub memoryless: f64,
}

/// The spend over `horizon` (a whole number of periods) with `values` distinct values.
pub fn lifetime_spend(
    params: &LongitudinalParams,
    horizon: DurationMs,
    values: u64,
) -> Result<LifetimeSpend, EngineError> {
    let period = params.period.millis();
    if horizon.millis() == 0 || period == 0 || !horizon.millis().is_multiple_of(period) {
        return Err(EngineError::invalid(
            "horizon",
            format!("{horizon} (period {})", params.period),
            "a whole number of periods, at least one",
        ));
    }
    if values == 0 {
        return Err(EngineError::invalid(
            "values",
            values,
            "at least 1 distinct value",
        ));
    }
    let reports = horizon.millis() / period;
    let c = values.min(reports);
    let t = reports as f64;
    let pattern_bound = t * params.epsilon_1;
    Ok(LifetimeSpend {
        reports,
        values: c,
        values_bound: (c as f64 * params.epsilon_perm).min(pattern_bound),
        pattern_bound,
        memoryless: pattern_bound,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldpstream_config::LongitudinalKind;

    #[test]
    fn a_year_of_daily_reports() {
        let params = LongitudinalParams {
            kind: LongitudinalKind::Lgrr,
            epsilon_perm: 2.0,
            epsilon_1: 1.0,
            domain: 8,
            period: DurationMs(86_400_000),
        };
        let s = lifetime_spend(&params, DurationMs(365 * 86_400_000), 3).unwrap();
        assert_eq!((s.reports, s.values), (365, 3));
        assert_eq!(s.values_bound, 6.0);
        assert_eq!((s.pattern_bound, s.memoryless), (365.0, 365.0));
        // Two reports bound the values by 2·ε1 before the memo's cap binds.
        let s = lifetime_spend(&params, DurationMs(2 * 86_400_000), 5).unwrap();
        assert_eq!((s.values, s.values_bound), (2, 2.0));
        assert!(lifetime_spend(&params, DurationMs(36 * 3_600_000), 1).is_err());
        assert!(lifetime_spend(&params, DurationMs(86_400_000), 0).is_err());
    }

    #[test]
    fn the_row_is_the_composed_kinds() {
        let l = MechanismConfig::Lsue {
            epsilon_perm: 3.0,
            epsilon_1: 0.5,
            domain: 4,
            period: DurationMs(86_400_000),
        };
        assert_eq!(
            PlanMechanism::for_config(&l),
            Some(PlanMechanism::BitFlip { epsilon: 0.5 })
        );
        assert_eq!(
            PlanMechanism::for_config(&MechanismConfig::Raw { domain: 3 }),
            None
        );
    }
}
