//! The `mechanism` table: the local randomizer's privacy parameter and shape.

use crate::error::ConfigError;
use crate::model::{MechanismConfig, OLH_MAX_G, OLH_MAX_POOL_SIZE};
use crate::number_text::compact;
pub use crate::olh_pool::MAX_OLH_TABLE_CELLS;
use crate::olh_pool::{olh_identifiable_domain, olh_suggested_pool_size};
use crate::values::{Domain, Epsilon, MAX_DOMAIN, MAX_EPSILON, MIN_EPSILON};

/// Largest cohort count.
pub const MAX_COHORTS: u32 = 1 << 20;
/// Largest cohorts × domain² of a cohort mechanism (the engine's `MAX_GRAM_WORK`).
pub const MAX_COHORT_GRAM_WORK: f64 = 4.0e9;
/// Largest pool size × domain: a snapshot evaluates that many hashes for the support
/// counts, and each Monte Carlo sample as many again (about 1 ns each).
pub const MAX_OLH_SUPPORT_WORK: u64 = 1 << 32;
/// How far a channel column's sum may be from 1.
pub const CHANNEL_SUM_TOLERANCE: f64 = 1e-9;
/// Smallest ε of Laplace noise. The noise is drawn on a grid of powers of two that f32
/// reports hold exactly (docs/STATISTICS.md §3.1), which needs 1 + 60 scales (the default
/// `max_abs`) below 2^24: 1 + 120/ε ≤ 2^24, so ε ≥ 7.2e-6.
pub const MIN_LAPLACE_EPSILON: f64 = 1e-5;

/// The smallest ρ of `gauss`: 1 + 40σ (the default `max_abs`) must stay below 2^24 for the
/// grid noise to be exact in f32 (docs/STATISTICS.md §3.1); at ρ = 1e-11, σ ≈ 3.2e5.
pub const MIN_RHO: f64 = 1e-11;
/// The largest ρ of `gauss`: ε²/2 at the largest ε, the same "this is no longer a privacy
/// parameter" line the other mechanisms draw.
pub const MAX_RHO: f64 = MAX_EPSILON * MAX_EPSILON / 2.0;

fn local_rho(key: String, value: f64) -> Result<(), ConfigError> {
    if !(value.is_finite() && (MIN_RHO..=MAX_RHO).contains(&value)) {
        return Err(ConfigError::invalid(
            key,
            format!("{value:e}"),
            format!(
                "a number from {MIN_RHO:e} to {MAX_RHO}: below it the noise (σ = 1/√ρ) is too \
                 wide for reports on an exact f32 grid, and above it ρ-zCDP is weaker than \
                 ε = {MAX_EPSILON}"
            ),
        ));
    }
    Ok(())
}

/// A mechanism's ε: finite, positive, and within the range where the randomizers stay
/// exactly ε-LDP and the statistics stay computable. The message says which side failed
/// and why.
fn local_epsilon(key: String, value: f64, laplace: bool) -> Result<Epsilon, ConfigError> {
    let min = if laplace {
        MIN_LAPLACE_EPSILON
    } else {
        MIN_EPSILON
    };
    let shown = compact(value);
    if !(value.is_finite() && value > 0.0) {
        return Err(ConfigError::invalid(
            key,
            shown,
            format!("a finite number > 0, from {min:e} to {MAX_EPSILON}"),
        ));
    }
    if value > MAX_EPSILON {
        return Err(ConfigError::invalid(
            key,
            shown,
            format!(
                "at most {MAX_EPSILON}: above it the lie probability e^-ε leaves the normal \
                 doubles (e^-708 is the last), so it can no longer be drawn exactly and the \
                 reports would not be ε-LDP"
            ),
        ));
    }
    match Epsilon::new(value) {
        Some(epsilon) if value >= min => Ok(epsilon),
        _ => {
            let why = if laplace {
                "the noise (scale 2/ε) is too wide for reports on an exact f32 grid"
            } else {
                "a test would need more than 1/ε² = 10^18 reports to detect anything"
            };
            Err(ConfigError::invalid(
                key,
                shown,
                format!("at least {min:e}: below it {why}"),
            ))
        }
    }
}

fn positive(key: String, value: f64) -> Result<(), ConfigError> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(ConfigError::invalid(
            key,
            compact(value),
            "a finite number > 0",
        ))
    }
}

impl MechanismConfig {
    /// Checks the mechanism's parameters; errors name keys under `prefix` (e.g.
    /// `stream[0].mechanism`, or `--matrix` on the command line).
    pub fn validate(&self, prefix: &str) -> Result<(), ConfigError> {
        validate_mechanism_at(prefix, self)
    }
}

pub(super) fn validate_mechanism(at: &str, mechanism: &MechanismConfig) -> Result<(), ConfigError> {
    validate_mechanism_at(&format!("{at}.mechanism"), mechanism)
}

fn validate_mechanism_at(m: &str, mechanism: &MechanismConfig) -> Result<(), ConfigError> {
    let m = m.to_string();
    match mechanism {
        MechanismConfig::Laplace {
            epsilon, max_abs, ..
        } => {
            local_epsilon(format!("{m}.epsilon"), *epsilon, true)?;
            if let Some(v) = max_abs {
                positive(format!("{m}.max_abs"), *v)?;
            }
        }
        MechanismConfig::Grr { epsilon, .. }
        | MechanismConfig::Bitflip { epsilon, .. }
        | MechanismConfig::Oue { epsilon, .. }
        | MechanismConfig::Hadamard { epsilon, .. }
        | MechanismConfig::Cohort { epsilon, .. } => {
            local_epsilon(format!("{m}.epsilon"), *epsilon, false)?;
        }
        MechanismConfig::Olh {
            epsilon,
            g,
            pool_size,
            domain,
            ..
        } => {
            local_epsilon(format!("{m}.epsilon"), *epsilon, false)?;
            validate_olh(&m, *g, *pool_size, *domain, mechanism)?;
        }
        MechanismConfig::Gauss { rho, max_abs, .. } => {
            local_rho(format!("{m}.rho"), *rho)?;
            if let Some(v) = max_abs {
                positive(format!("{m}.max_abs"), *v)?;
            }
        }
        MechanismConfig::Subset {
            epsilon, domain, k, ..
        } => {
            local_epsilon(format!("{m}.epsilon"), *epsilon, false)?;
            if let Some(k) = k {
                if *k == 0 || k >= domain {
                    return Err(ConfigError::invalid(
                        format!("{m}.k"),
                        k,
                        format!("an integer with 1 <= k < domain ({domain})"),
                    ));
                }
            }
        }
        MechanismConfig::Matrix { matrix } => validate_channel(&m, matrix)?,
        MechanismConfig::Raw { .. } => {}
        MechanismConfig::Lgrr { .. }
        | MechanismConfig::Losue { .. }
        | MechanismConfig::Lsue { .. } => {
            super::longitudinal::validate_longitudinal_mechanism(&m, mechanism, |key, value| {
                local_epsilon(key, value, false).map(|_| ())
            })?;
        }
    }
    if let MechanismConfig::Cohort {
        cohorts, domain, ..
    } = mechanism
    {
        if !(*domain..=MAX_COHORTS).contains(cohorts) {
            return Err(ConfigError::invalid(
                format!("{m}.cohorts"),
                cohorts,
                format!("an integer from the domain ({domain}) to {MAX_COHORTS}, so the family identifies the distribution"),
            ));
        }
        // Checked here as well as in the engine so that it is a config error (exit 2), not
        // a failure at start-up.
        let work = f64::from(*cohorts) * f64::from(*domain) * f64::from(*domain);
        if work > MAX_COHORT_GRAM_WORK {
            return Err(ConfigError::invalid(
                format!("{m}.cohorts"),
                cohorts,
                format!(
                    "cohorts × domain² at most {MAX_COHORT_GRAM_WORK:e} (here {work:e}): the \
                     engine inverts the family's d×d Gram matrix; use hadamard for large domains"
                ),
            ));
        }
    }
    if !matches!(mechanism, MechanismConfig::Matrix { .. }) {
        let domain = mechanism.domain();
        if Domain::new(domain).is_none() {
            return Err(ConfigError::invalid(
                format!("{m}.domain"),
                domain,
                format!("an integer from 2 to {MAX_DOMAIN}"),
            ));
        }
    }
    Ok(())
}

/// OLH's g and pool size, alone and as the table and the snapshot work they make.
fn validate_olh(
    m: &str,
    g: Option<u32>,
    pool_size: Option<u32>,
    domain: u32,
    mechanism: &MechanismConfig,
) -> Result<(), ConfigError> {
    if let Some(g) = g.filter(|g| !(2..=OLH_MAX_G).contains(g)) {
        return Err(ConfigError::invalid(
            format!("{m}.g"),
            g,
            format!("an integer from 2 to {OLH_MAX_G} (default round(e^ε) + 1)"),
        ));
    }
    if let Some(s) = pool_size.filter(|s| !(1..=OLH_MAX_POOL_SIZE).contains(s)) {
        return Err(ConfigError::invalid(
            format!("{m}.pool_size"),
            s,
            format!("an integer from 1 to {OLH_MAX_POOL_SIZE} (default 1024)"),
        ));
    }
    let Some((g, s)) = mechanism.olh_shape() else {
        return Ok(());
    };
    let cells = u64::from(g) * u64::from(s);
    if cells > MAX_OLH_TABLE_CELLS {
        return Err(ConfigError::invalid(
            format!("{m}.pool_size"),
            s,
            format!(
                "pool_size × g at most {MAX_OLH_TABLE_CELLS} (here {s} × {g} = {cells}): the \
                 sketch is a pool_size × g table of 8-byte counts"
            ),
        ));
    }
    let work = u64::from(s) * u64::from(domain);
    if work > MAX_OLH_SUPPORT_WORK {
        return Err(ConfigError::invalid(
            format!("{m}.pool_size"),
            s,
            format!(
                "pool_size × domain at most {MAX_OLH_SUPPORT_WORK} (here {work}): every \
                 snapshot evaluates that many hashes"
            ),
        ));
    }
    // Each pool entry's bucket indicators sum to one, so the collision matrix C has rank at
    // most S(g − 1) + 1: beyond it no estimator can tell some frequencies apart
    // (docs/STATISTICS.md §1.8). The default pool size stays 1024 whatever d, since clients
    // fill it in themselves; a config that needs more must say so.
    let identifiable = olh_identifiable_domain(g, s);
    if u64::from(domain) > identifiable {
        let suggestion = match olh_suggested_pool_size(domain, g) {
            Some(better) => format!("use pool_size = {better}"),
            None => format!(
                "no pool within pool_size ≤ {OLH_MAX_POOL_SIZE} and pool_size × g ≤ \
                 {MAX_OLH_TABLE_CELLS} identifies it at this g: raise g (ε) or lower the domain"
            ),
        };
        return Err(ConfigError::invalid(
            format!("{m}.pool_size"),
            s,
            format!(
                "at least (domain − 1)/(g − 1): with g = {g}, {s} × {} + 1 = {identifiable} < \
                 domain {domain}, so the pool cannot tell the categories' frequencies apart \
                 (docs/STATISTICS.md §1.8); {suggestion}",
                g - 1
            ),
        ));
    }
    Ok(())
}

/// A channel must be a rectangular, column-stochastic |S|×d matrix with d ≥ 2.
fn validate_channel(m: &str, matrix: &[Vec<f64>]) -> Result<(), ConfigError> {
    let key = format!("{m}.matrix");
    let d = matrix.first().map_or(0, Vec::len);
    if matrix.is_empty() || d < 2 {
        return Err(ConfigError::invalid(
            key,
            format!("a {}x{d} matrix", matrix.len()),
            "at least one signal row and at least 2 type columns (matrix[s][x] = P(s | x))",
        ));
    }
    if let Some((s, row)) = matrix.iter().enumerate().find(|(_, r)| r.len() != d) {
        return Err(ConfigError::invalid(
            format!("{key}[{s}]"),
            format!("a row of {} entries", row.len()),
            format!("every row has {d} entries, like row 0"),
        ));
    }
    for x in 0..d {
        if let Some((s, v)) = matrix
            .iter()
            .enumerate()
            .map(|(s, r)| (s, r[x]))
            .find(|(_, v)| !(v.is_finite() && *v >= 0.0))
        {
            return Err(ConfigError::invalid(
                format!("{key}[{s}][{x}]"),
                v,
                format!("column {x}: every entry is a probability (finite, >= 0)"),
            ));
        }
        let sum: f64 = matrix.iter().map(|r| r[x]).sum();
        if (sum - 1.0).abs() > CHANNEL_SUM_TOLERANCE {
            return Err(ConfigError::invalid(
                key,
                format!("column {x} summing to {sum}"),
                format!(
                    "every column sums to 1 within {CHANNEL_SUM_TOLERANCE:e} (column-stochastic)"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{config, err, gof_err, gof_stream, GOOD, PARQUET};
    use crate::model::Config;

    #[test]
    fn rejects_bad_epsilon() {
        for bad in ["0.0", "-1.0", "inf", "nan"] {
            let e = err(&GOOD.replace("epsilon = 1.0", &format!("epsilon = {bad}")));
            assert!(e.contains("mechanism.epsilon"), "{e}");
            assert!(e.contains("finite number > 0"), "{e}");
        }
    }

    /// The bounds on ε, with the reason in the message; the bounds themselves pass.
    #[test]
    fn bounds_rho_and_says_why() {
        for bad in ["9e-12", "245001.0", "1e308", "0.0", "-1.0"] {
            let e = err(&GOOD.replace(
                "mechanism = { kind = \"grr\", epsilon = 1.0, domain = 4 }",
                &format!("mechanism = {{ kind = \"gauss\", rho = {bad}, domain = 4 }}"),
            ));
            assert!(
                e.contains("mechanism.rho") && e.contains("f32 grid"),
                "{bad}: {e}"
            );
            assert!(e.len() < 400, "the value is printed compactly: {e}");
        }
        for good in ["1e-11", "245000.0", "0.5"] {
            let text = GOOD.replace(
                "mechanism = { kind = \"grr\", epsilon = 1.0, domain = 4 }",
                &format!("mechanism = {{ kind = \"gauss\", rho = {good}, domain = 4 }}"),
            );
            assert!(Config::from_toml_str(&text, "t").is_ok(), "{good}");
        }
    }

    #[test]
    fn bounds_epsilon_and_says_why() {
        let e = err(&GOOD.replace("epsilon = 1.0", "epsilon = 701.0"));
        assert!(e.contains("at most 700") && e.contains("ε-LDP"), "{e}");
        let e = err(&GOOD.replace("epsilon = 1.0", "epsilon = 1e-10"));
        assert!(
            e.contains("at least 1e-9") && e.contains("10^18 reports"),
            "{e}"
        );
        for ok in ["1e-9", "700.0", "60.0"] {
            Config::from_toml_str(
                &GOOD.replace("epsilon = 1.0", &format!("epsilon = {ok}")),
                "t",
            )
            .unwrap();
        }
        let laplace = GOOD.replace("kind = \"grr\"", "kind = \"laplace\"");
        let e = err(&laplace.replace("epsilon = 1.0", "epsilon = 9e-6"));
        assert!(e.contains("at least 1e-5") && e.contains("f32 grid"), "{e}");
        Config::from_toml_str(&laplace.replace("epsilon = 1.0", "epsilon = 1e-5"), "t").unwrap();
    }

    #[test]
    fn rejects_small_domain() {
        let e = err(&GOOD.replace("domain = 4", "domain = 1"));
        assert!(e.contains("mechanism.domain = 1"), "{e}");
        assert!(e.contains("from 2 to"), "{e}");
    }

    #[test]
    fn every_mechanism_parses() {
        for m in [
            "{ kind = \"grr\", epsilon = 1.0, domain = 3 }",
            "{ kind = \"bitflip\", epsilon = 1.0, domain = 3 }",
            "{ kind = \"oue\", epsilon = 1.0, domain = 3 }",
            "{ kind = \"subset\", epsilon = 1.0, domain = 3 }",
            "{ kind = \"subset\", epsilon = 1.0, domain = 16, k = 15 }",
            "{ kind = \"gauss\", rho = 0.5, domain = 3 }",
            "{ kind = \"laplace\", epsilon = 1.0, domain = 3 }",
            "{ kind = \"hadamard\", epsilon = 1.0, domain = 3 }",
            "{ kind = \"cohort\", epsilon = 1.0, domain = 3, cohorts = 16, seed = 4 }",
            "{ kind = \"olh\", epsilon = 1.0, domain = 3 }",
            "{ kind = \"olh\", epsilon = 2.0, domain = 3, g = 5, pool_size = 8, pool_seed = 9 }",
            "{ kind = \"matrix\", matrix = [[0.5, 0.25, 0.25], [0.5, 0.75, 0.75]] }",
            "{ kind = \"raw\", domain = 3 }",
        ] {
            Config::from_toml_str(&gof_stream(m, ""), "t").unwrap_or_else(|e| panic!("{m}: {e}"));
        }
    }

    /// `subset`'s parameters are checked: k in 1..d, ε as for grr, d from 2.
    #[test]
    fn subset_parameters_are_checked() {
        for (k, d) in [(0, 16), (16, 16), (40, 16)] {
            let e = gof_err(
                &format!("{{ kind = \"subset\", epsilon = 2.0, domain = {d}, k = {k} }}"),
                "",
            );
            assert!(e.contains(&format!("mechanism.k = {k}")), "{e}");
            assert!(e.contains("1 <= k < domain (16)"), "{e}");
        }
        let e = gof_err("{ kind = \"subset\", epsilon = -1.0, domain = 16 }", "");
        assert!(e.contains("mechanism.epsilon"), "{e}");
        let e = gof_err("{ kind = \"subset\", epsilon = 1.0, domain = 1 }", "");
        assert!(e.contains("mechanism.domain = 1"), "{e}");
    }

    #[test]
    fn bad_channels_name_the_column() {
        let e = gof_err(
            "{ kind = \"matrix\", matrix = [[0.5, 0.2], [0.5, 0.7]] }",
            "",
        );
        assert!(e.contains("column 1 summing to 0.8999"), "{e}");
        let e = gof_err(
            "{ kind = \"matrix\", matrix = [[1.5, 0.5], [-0.5, 0.5]] }",
            "",
        );
        assert!(
            e.contains("matrix[1][0] = -0.5") && e.contains("column 0"),
            "{e}"
        );
        let e = gof_err("{ kind = \"matrix\", matrix = [[0.5, 0.5], [0.5]] }", "");
        assert!(e.contains("matrix[1]"), "{e}");
    }

    /// The engine refuses cohorts × d² above 4e9; the config says so first.
    #[test]
    fn cohort_gram_work_is_a_config_error() {
        let e = config(
            PARQUET,
            "{ kind = \"cohort\", epsilon = 1.0, domain = 1000, cohorts = 5000 }",
            "{ kind = \"global\" }",
        )
        .unwrap_err();
        assert!(
            e.contains("mechanism.cohorts = 5000") && e.contains("cohorts × domain² at most 4e9"),
            "{e}"
        );
        config(
            PARQUET,
            "{ kind = \"cohort\", epsilon = 1.0, domain = 1000, cohorts = 4000 }",
            "{ kind = \"global\" }",
        )
        .unwrap();
    }

    /// Each OLH parameter is checked under its own key, with its range; the bounds pass.
    #[test]
    fn olh_parameters_are_named() {
        let olh = |keys: &str| {
            config(
                PARQUET,
                &format!("{{ kind = \"olh\", epsilon = 2.0, domain = 100{keys} }}"),
                "{ kind = \"global\" }",
            )
        };
        for (keys, want) in [
            (", g = 1", "mechanism.g = 1: an integer from 2 to 65536"),
            (", g = 65537", "mechanism.g = 65537"),
            (
                ", pool_size = 0",
                "mechanism.pool_size = 0: an integer from 1 to 65536",
            ),
            (", pool_size = 65537", "mechanism.pool_size = 65537"),
            (
                ", g = 65536, pool_size = 512",
                "pool_size × g at most 16777216",
            ),
        ] {
            let e = olh(keys).unwrap_err();
            assert!(e.contains(want), "{keys}: {e}");
        }
        let e = config(
            PARQUET,
            "{ kind = \"olh\", epsilon = 2.0, domain = 16777216, pool_size = 512 }",
            "{ kind = \"global\" }",
        )
        .unwrap_err();
        assert!(e.contains("pool_size × domain at most"), "{e}");
        for ok in [
            ", g = 2, pool_size = 99",
            ", g = 65536, pool_size = 256",
            "",
        ] {
            olh(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        // The unidentifiable pools: 1 × (2 − 1) + 1 = 2 < 16 categories, and the
        // default pool at ε = 1 (g = 4) for 4096 categories; the message names the numbers
        // and a pool that identifies them with at most ~10% more variance.
        let tiny = |d: u32, keys: &str| {
            config(
                PARQUET,
                &format!("{{ kind = \"olh\", epsilon = 1.0, domain = {d}{keys} }}"),
                "{ kind = \"global\" }",
            )
            .unwrap_err()
        };
        let e = tiny(16, ", g = 2, pool_size = 1");
        assert!(
            e.contains("mechanism.pool_size = 1")
                && e.contains("with g = 2, 1 × 1 + 1 = 2 < domain 16")
                && e.contains("use pool_size = 256"),
            "{e}"
        );
        let e = tiny(4096, "");
        assert!(
            e.contains("mechanism.pool_size = 1024")
                && e.contains("1024 × 3 + 1 = 3073 < domain 4096")
                && e.contains("use pool_size = 16384"),
            "{e}"
        );
    }

    #[test]
    fn olh_default_g_is_round_e_to_the_epsilon_plus_one() {
        use crate::model::olh_default_g;
        assert_eq!(olh_default_g(2.0), 8); // e² = 7.389
        assert_eq!(olh_default_g(1.0), 4); // e = 2.718
        assert_eq!(olh_default_g(0.5), 3); // 1.649
        assert_eq!(olh_default_g(1e-9), 2);
        assert_eq!(olh_default_g(11.0), 59875); // e^11 = 59874.14
        assert_eq!(olh_default_g(12.0), 65536);
        assert_eq!(olh_default_g(700.0), 65536);
    }

    #[test]
    fn huge_epsilon_is_printed_compactly_under_its_own_key() {
        let e = config(
            PARQUET,
            "{ kind = \"grr\", epsilon = 1e308, domain = 4 }",
            "{ kind = \"global\" }",
        )
        .unwrap_err();
        assert!(e.contains("mechanism.epsilon = 1e308: at most 700"), "{e}");
        assert!(e.len() < 400, "{e}");
        let e = config(
            PARQUET,
            "{ kind = \"gauss\", rho = -1e300, domain = 4 }",
            "{ kind = \"global\" }",
        )
        .unwrap_err();
        assert!(e.contains("mechanism.rho = -1e300"), "{e}");
    }
}
