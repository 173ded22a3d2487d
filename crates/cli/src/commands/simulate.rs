//! `ldpstream simulate`: privatize synthetic data into Parquet.

use anyhow::{Context, Result};
use ldpstream_connectors::simulator::{simulate_to_parquet, SimulateSpec};
use tracing::info;

use ldpstream_connectors::simulator::{simulate_devices_to_parquet, DeviceSimulation};
use ldpstream_engine::mechanism::longitudinal::device::DeviceOptions;
use ldpstream_engine::mechanism::{Longitudinal, Mechanism};

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
    /// lgrr, losue, lsue: the number of simulated devices, each keeping a memo per value
    /// and reporting once per period (instead of --n).
    #[arg(long)]
    devices: Option<u32>,
    /// lgrr, losue, lsue: the periods each device reports in (from --ts-start's, default
    /// the Unix epoch's).
    #[arg(long, default_value_t = 10)]
    periods: u32,
    /// lgrr, losue, lsue: the share of devices whose value is redrawn from --p before each
    /// later period.
    #[arg(long, default_value_t = 0.1)]
    change: f64,
    /// lgrr, losue, lsue: the client's cap on distinct values per metric; a device past it
    /// stops reporting.
    #[arg(long, default_value_t = 16)]
    max_memoized_values: u32,
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
    if let Mechanism::Longitudinal(l) = &mechanism {
        return run_devices(&args, l, p);
    }
    if args.devices.is_some() {
        return Err(usage(
            "--devices simulates devices with a memo: it is for lgrr, losue and lsue",
        ));
    }
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

/// Devices of a longitudinal mechanism: each reports once per period from its memo.
fn run_devices(args: &SimulateArgs, mechanism: &Longitudinal, p: Vec<f64>) -> Result<()> {
    let devices = args.devices.ok_or_else(|| {
        usage(format!(
            "{} reports come from devices that keep a memo: give --devices (and --periods), \
             not --n",
            mechanism.kind()
        ))
    })?;
    if args.n.is_some() || args.groups.is_some() {
        return Err(usage(
            "--n and --groups are not used with --devices: every device reports once per period",
        ));
    }
    if devices == 0 || args.periods == 0 {
        return Err(usage("--devices and --periods must be at least 1"));
    }
    if !(0.0..=1.0).contains(&args.change) {
        return Err(usage(format!(
            "--change {} must be a share in [0, 1]",
            args.change
        )));
    }
    let start_ms = match &args.ts_start {
        Some(start) => chrono::DateTime::parse_from_rfc3339(start)
            .map_err(|e| usage(format!("--ts-start {start:?} is not RFC 3339: {e}")))?
            .timestamp_millis(),
        None => 0,
    };
    let seed = args.seed.unwrap_or_else(rand_seed);
    info!(seed, devices, periods = args.periods, "simulating devices");
    let spec = DeviceSimulation {
        mechanism: mechanism.clone(),
        options: DeviceOptions {
            max_memoized_values: args.max_memoized_values,
            ..DeviceOptions::default()
        },
        p,
        devices,
        periods: args.periods,
        change: args.change,
        seed,
        start_ms,
    };
    let written = simulate_devices_to_parquet(&spec, &args.out)
        .with_context(|| format!("simulating into {}", args.out))?;
    eprintln!(
        "wrote {} reports of {devices} devices over {} periods to {} (seed {seed}; {} devices \
         stopped at --max-memoized-values)",
        written.rows, args.periods, args.out, written.stopped
    );
    Ok(())
}
