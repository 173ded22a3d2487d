//! `ldpstream simulate`: privatize synthetic data into Parquet.

use anyhow::{Context, Result};
use ldpstream_connectors::simulator::{simulate_to_parquet, SimulateSpec};
use tracing::info;

use super::{parse_distribution, rand_seed, usage, MechanismArgs};

#[derive(clap::Args)]
pub struct SimulateArgs {
    #[command(flatten)]
    mechanism: MechanismArgs,
    /// Distribution of the true categories: "uniform" or d comma-separated probabilities.
    #[arg(long, default_value = "uniform")]
    p: String,
    /// Number of reports (not needed with --groups).
    #[arg(long)]
    n: Option<u64>,
    /// Seed of the simulation RNG; drawn from the OS (and logged) when omitted.
    #[arg(long)]
    seed: Option<u64>,
    /// Output Parquet file.
    #[arg(long)]
    out: String,
    /// Write a Utf8 `group` column: "g1=N1,g2=N2" reports per group, all drawn from --p.
    #[arg(long)]
    groups: Option<String>,
    /// Add an event-time column `ts` starting here (RFC 3339).
    #[arg(long)]
    ts_start: Option<String>,
    /// Reports per second of event time (with --ts-start).
    #[arg(long, default_value_t = 1000.0)]
    rate: f64,
}

fn parse_groups(text: &str) -> Result<Vec<(String, u64)>> {
    text.split(',')
        .map(|part| {
            let (label, n) = part
                .split_once('=')
                .ok_or_else(|| usage(format!("--groups: {part:?} is not LABEL=COUNT")))?;
            let n = n.trim().parse::<u64>().map_err(|_| {
                usage(format!(
                    "--groups: count {n:?} of {label:?} is not a whole number"
                ))
            })?;
            Ok((label.trim().to_string(), n))
        })
        .collect()
}

pub fn run(args: SimulateArgs) -> Result<()> {
    super::clean_up_on_signal();
    let mechanism = args.mechanism.build()?;
    let p = parse_distribution(&args.p, mechanism.domain() as u32, "--p")?;
    let groups = args.groups.as_deref().map(parse_groups).transpose()?;
    let n = match (&groups, args.n) {
        (Some(g), Some(n)) if g.iter().map(|(_, k)| k).sum::<u64>() != n => {
            return Err(usage(format!(
                "--n {n} disagrees with the sum of --groups; give one of them"
            )))
        }
        (Some(g), _) => g.iter().map(|(_, k)| k).sum(),
        (None, Some(n)) => n,
        (None, None) => return Err(usage("give --n or --groups")),
    };
    let ts = match &args.ts_start {
        Some(start) => {
            let start = chrono::DateTime::parse_from_rfc3339(start)
                .map_err(|e| usage(format!("--ts-start {start:?} is not RFC 3339: {e}")))?;
            if !(args.rate.is_finite() && args.rate > 0.0) {
                return Err(usage(format!(
                    "--rate {} must be a finite number > 0",
                    args.rate
                )));
            }
            Some((start.timestamp_millis(), args.rate))
        }
        None => None,
    };
    let seed = args.seed.unwrap_or_else(rand_seed);
    info!(seed, "simulating");
    let spec = SimulateSpec {
        mechanism,
        p,
        groups,
        n,
        seed,
        ts,
    };
    let rows = simulate_to_parquet(&spec, &args.out)
        .with_context(|| format!("simulating into {}", args.out))?;
    eprintln!("wrote {rows} reports to {} (seed {seed})", args.out);
    Ok(())
}
