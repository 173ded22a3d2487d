//! `ldpstream audit`: sample a randomizer and bound its privacy loss from below.

use anyhow::{anyhow, Result};
use ldpstream_engine::audit::device::audit_device;
use ldpstream_engine::audit::{audit, check_audit_size, AUDIT_CONFIDENCE};
use ldpstream_engine::mechanism::Mechanism;
use rand::SeedableRng;

use std::path::PathBuf;

use super::{rand_seed, usage, MechanismArgs};

#[derive(clap::Args)]
pub struct AuditArgs {
    #[command(flatten)]
    mechanism: MechanismArgs,
    /// Reports sampled per input value (default 1,000,000), or devices with
    /// --device-reports (default 10,000).
    #[arg(long)]
    samples: Option<u64>,
    /// Simultaneous confidence of the lower bound, at least 0.5 and below 1. A randomizer
    /// that keeps its claim exactly is reported as a violation with probability at most
    /// 1 − confidence; raise it where a false alarm costs more than a looser bound.
    #[arg(long, default_value_t = AUDIT_CONFIDENCE)]
    confidence: f64,
    /// Seed of the sampling RNG; drawn from the OS when omitted.
    #[arg(long)]
    seed: Option<u64>,
    /// Audit reports some client wrote instead of sampling the engine's randomizer: one
    /// `input,output` line per report (output as the audit enumerates it: see README
    /// "Clients"), the same number for every input.
    #[arg(long, conflicts_with_all = ["samples", "seed"])]
    reports: Option<PathBuf>,
    /// lgrr, losue, lsue: audit one device's R reports of the same value instead of one
    /// report. The output is their modal category (lgrr) or per-bit majority (losue, lsue),
    /// enumerated as one report is, and the claim is --epsilon-perm: every report comes
    /// from one memo. With --reports, each line's output is that statistic.
    #[arg(long, value_name = "R")]
    device_reports: Option<u32>,
}

pub fn run(args: AuditArgs) -> Result<()> {
    // Checked on the config, before the mechanism is built: building some mechanisms at a
    // domain too large to audit costs O(d²) already.
    check_audit_size(&args.mechanism.config()?).map_err(|e| usage(e.to_string()))?;
    let mechanism = args.mechanism.build()?;
    let samples = args.samples.unwrap_or(if args.device_reports.is_some() {
        10_000
    } else {
        1_000_000
    });
    if samples == 0 {
        return Err(usage("--samples must be at least 1"));
    }
    // Below 0.5 the "lower bound" is more likely wrong than right: no use to an auditor.
    if !(0.5..1.0).contains(&args.confidence) {
        return Err(usage(format!(
            // Debug, so a tiny value reads as 1e-300, not 300 digits.
            "--confidence must be at least 0.5 and below 1, not {:?}",
            args.confidence
        )));
    }
    let device = match (args.device_reports, &mechanism) {
        (None, _) => None,
        (Some(0), _) => return Err(usage("--device-reports must be at least 1")),
        (Some(r), Mechanism::Longitudinal(l)) => Some((r, l.as_ref())),
        (Some(_), m) => {
            return Err(usage(format!(
                "--device-reports audits a device's memo: it is for lgrr, losue and lsue, not {}",
                m.kind()
            )))
        }
    };
    // One device's statistic is enumerated as its memo (round 1, at ε∞) is.
    let audited = match device {
        Some((_, l)) => l.first_round().clone(),
        None => mechanism.clone(),
    };
    let (report, source) = match (&args.reports, device) {
        (Some(path), _) => (
            super::audit_reports::audit_file(&audited, path, args.confidence)?,
            format!("reports from {}", path.display()),
        ),
        (None, Some((r, l))) => {
            let seed = args.seed.unwrap_or_else(rand_seed);
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            (
                audit_device(l, r, samples, args.confidence, &mut rng)?,
                format!("seed {seed}; {r} reports per device"),
            )
        }
        (None, None) => {
            let seed = args.seed.unwrap_or_else(rand_seed);
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            (
                audit(&mechanism, samples, args.confidence, &mut rng)?,
                format!("seed {seed}"),
            )
        }
    };
    let claimed = match (report.claimed_epsilon, mechanism.privacy().rho) {
        (Some(e), _) if device.is_some() => {
            format!("ε∞ = {e} (epsilon_perm: any number of reports of one value)")
        }
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
