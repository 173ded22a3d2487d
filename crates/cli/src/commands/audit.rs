//! `ldpstream audit`: sample a randomizer and bound its privacy loss from below.

use anyhow::{anyhow, Result};
use ldpstream_engine::audit::{audit, check_audit_size};
use rand::SeedableRng;

use std::path::PathBuf;

use super::{rand_seed, usage, MechanismArgs};

#[derive(clap::Args)]
pub struct AuditArgs {
    #[command(flatten)]
    mechanism: MechanismArgs,
    /// Reports sampled per input value.
    #[arg(long, default_value_t = 1_000_000)]
    samples: u64,
    /// Seed of the sampling RNG; drawn from the OS when omitted.
    #[arg(long)]
    seed: Option<u64>,
    /// Audit reports some client wrote instead of sampling the engine's randomizer: one
    /// `input,output` line per report (output as the audit enumerates it: see README
    /// "Clients"), the same number for every input.
    #[arg(long, conflicts_with_all = ["samples", "seed"])]
    reports: Option<PathBuf>,
}

pub fn run(args: AuditArgs) -> Result<()> {
    // Checked on the config, before the mechanism is built: building some mechanisms at a
    // domain too large to audit costs O(d²) already.
    check_audit_size(&args.mechanism.config()?).map_err(|e| usage(e.to_string()))?;
    let mechanism = args.mechanism.build()?;
    if args.samples == 0 {
        return Err(usage("--samples must be at least 1"));
    }
    let (report, source) = match &args.reports {
        Some(path) => (
            super::audit_reports::audit_file(&mechanism, path)?,
            format!("reports from {}", path.display()),
        ),
        None => {
            let seed = args.seed.unwrap_or_else(rand_seed);
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            (
                audit(&mechanism, args.samples, &mut rng)?,
                format!("seed {seed}"),
            )
        }
    };
    let claimed = match (report.claimed_epsilon, mechanism.privacy().rho) {
        (Some(e), _) => format!("ε = {e}"),
        (None, Some(rho)) => format!("ρ = {rho} (zCDP; no pure ε)"),
        (None, None) => "none (raw reports are not locally private)".to_string(),
    };
    println!("mechanism:                 {}", mechanism.kind());
    println!("claimed privacy:           {claimed}");
    println!("exact worst-case loss:     {:.6}", report.exact_loss);
    println!(
        "empirical ε lower bound:   {:.6}  ({}% simultaneous: union bound over {} proportions, \
         one-sided Clopper–Pearson at {:.3e} each; {} samples per input, {source})",
        report.empirical_lower_bound,
        report.confidence * 100.0,
        report.proportions,
        (1.0 - report.confidence) / (2.0 * report.proportions as f64),
        report.samples_per_input
    );
    let (s, x, y) = report.worst;
    println!("attained at:               output {s}, inputs {x} vs {y}");
    if let Some(e) = report.claimed_epsilon {
        if report.empirical_lower_bound > e {
            println!("VIOLATION: the sampled randomizer leaks more than its claimed ε");
            return Err(anyhow!(
                "privacy audit failed: lower bound {} > claimed ε {e}",
                report.empirical_lower_bound
            ));
        }
    }
    Ok(())
}
