//! `plan --epsilon-perm`: the longitudinal kinds (lgrr, losue, lsue; docs/STATISTICS.md
//! §1.9). One period's estimate and test are their composed kind's at ε1 (`--epsilon`),
//! so their rows are those kinds' rows, read through the same rule the server uses
//! (`PlanMechanism::for_config`); `--horizon` adds what a device spends over it.

use anyhow::Result;
use ldpstream_config::{DurationMs, MechanismConfig};
use ldpstream_engine::plan::{self, Hypotheses, PlanMechanism};

use super::usage;

/// The longitudinal flags of `plan`.
#[derive(clap::Args)]
pub struct LongitudinalArgs {
    /// Plan lgrr, losue and lsue too, with this ε∞ (the memo's) and --epsilon as ε1 (one
    /// report's).
    #[arg(long)]
    epsilon_perm: Option<f64>,
    /// The devices' period (one report per metric per period).
    #[arg(long, default_value = "1d", value_parser = DurationMs::parse)]
    period: DurationMs,
    /// With --epsilon-perm: print what a device spends over this much time, e.g. "365d"
    /// (a whole number of periods).
    #[arg(long, value_parser = DurationMs::parse)]
    horizon: Option<DurationMs>,
    /// With --horizon: the distinct values a device holds over it.
    #[arg(long, default_value_t = 1)]
    values: u64,
}

/// The three longitudinal tables at (ε∞, ε1 = `epsilon`), checked as a config's are.
fn tables(args: &LongitudinalArgs, d: u32, epsilon: f64) -> Result<Option<[MechanismConfig; 3]>> {
    let Some(epsilon_perm) = args.epsilon_perm else {
        if args.horizon.is_some() {
            return Err(usage(
                "--horizon plans a memoized client: give --epsilon-perm too",
            ));
        }
        return Ok(None);
    };
    let period = args.period;
    let lgrr = MechanismConfig::Lgrr {
        epsilon_perm,
        epsilon_1: epsilon,
        domain: d,
        period,
    };
    lgrr.validate("--epsilon-perm / --epsilon")
        .map_err(|e| usage(e.to_string()))?;
    Ok(Some([
        lgrr,
        MechanismConfig::Losue {
            epsilon_perm,
            epsilon_1: epsilon,
            domain: d,
            period,
        },
        MechanismConfig::Lsue {
            epsilon_perm,
            epsilon_1: epsilon,
            domain: d,
            period,
        },
    ]))
}

/// Refuses bad longitudinal flags before anything is printed.
pub fn check(args: &LongitudinalArgs, d: u32, epsilon: f64) -> Result<()> {
    let tables = tables(args, d, epsilon)?;
    if let (Some(horizon), Some(params)) = (
        args.horizon,
        tables.as_ref().and_then(|t| t[0].longitudinal()),
    ) {
        plan::lifetime_spend(&params, horizon, args.values)
            .map_err(|e| usage(format!("--horizon {horizon} --period {}: {e}", args.period)))?;
    }
    Ok(())
}

fn label(table: &MechanismConfig) -> &'static str {
    match table.kind() {
        "lgrr" => "L-GRR (lgrr)",
        "losue" => "L-OSUE (losue)",
        _ => "L-SUE (lsue)",
    }
}

/// Prints the longitudinal rows (variance, and power or the n for it with an alternative)
/// and, with --horizon, the lifetime spend. `test` is (alternative, α, n, target power).
pub fn print_longitudinal(
    args: &LongitudinalArgs,
    d: u32,
    epsilon: f64,
    test: Option<(&Hypotheses, f64, Option<u64>, Option<f64>)>,
) -> Result<()> {
    let Some(tables) = tables(args, d, epsilon)? else {
        return Ok(());
    };
    let epsilon_perm = args.epsilon_perm.unwrap_or(f64::NAN);
    println!();
    println!(
        "longitudinal variants: a device memoizes one response per value at ε∞ = {epsilon_perm} \
         and reports once per period ({}) at ε1 = {epsilon}; one period's estimate and test are \
         the composed kind's at ε1 (docs/STATISTICS.md §1.9)",
        args.period
    );
    let last_head = match test {
        Some((_, _, Some(n), _)) => format!("power at n = {n}"),
        Some((_, _, None, Some(target))) => format!("n for power {target}"),
        _ => String::new(),
    };
    println!(
        "{:<16} {:<22} {:>16} {:>20}",
        "mechanism", "one report is", "n·Var(p̂_j)", last_head
    );
    for table in &tables {
        let row = PlanMechanism::for_config(table)
            .ok_or_else(|| usage(format!("{} has no planner row", table.kind())))?;
        let variance = plan::estimator_variance(row, d as usize)
            .map_err(|e| usage(format!("--domain {d} --epsilon {epsilon}: {e}")))?;
        let last = match test {
            Some((h, alpha, Some(n), _)) => plan::power(row, h, alpha, n)
                .map(|p| format!("{p:.4}"))
                .unwrap_or_else(|e| e.to_string()),
            Some((h, alpha, None, Some(target))) => match plan::required_n(row, h, alpha, target) {
                Ok(n) => n.to_string(),
                Err(_) => "never".to_string(),
            },
            _ => String::new(),
        };
        println!(
            "{:<16} {:<22} {:>16.6e} {:>20}",
            label(table),
            format!("{} at ε1 = {epsilon}", row.name()),
            variance,
            last
        );
    }
    println!(
        "note: only windows inside one period are valid for them (a tumbling window of the \
         period or a divisor of it): a device's reports in different periods share its memo"
    );
    if let (Some(horizon), Some(params)) = (args.horizon, tables[0].longitudinal()) {
        let spend = plan::lifetime_spend(&params, horizon, args.values)
            .map_err(|e| usage(format!("--horizon {horizon} --period {}: {e}", args.period)))?;
        println!();
        println!(
            "privacy over {horizon} (period {}: T = {} reports), c = {} distinct values:",
            args.period, spend.reports, spend.values
        );
        println!(
            "  without memo (grr, oue, bitflip at ε = {epsilon} per report):   T·ε  = {}  (the reports average to the value)",
            spend.memoryless
        );
        println!(
            "  with memo, the values (same change pattern):        min(c·ε∞, T·ε1) = {}",
            spend.values_bound
        );
        println!(
            "  with memo, the change pattern (when it changed):    T·ε1 = {}  (a memo shows whether the value changed; only each report's noise protects that)",
            spend.pattern_bound
        );
    }
    Ok(())
}
