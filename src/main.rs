//! The `ldpstream` command line. Everything here is argument parsing and wiring; the work
//! happens in the library crates.

use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use ldpstream_config::MechanismConfig;
use ldpstream_config::{Config, ConfigError};
use ldpstream_connectors::batch::run_batch;
use ldpstream_connectors::jsonl::write_records;
use ldpstream_connectors::simulate::{simulate_to_parquet, SimulateSpec};
use ldpstream_engine::audit::audit;
use ldpstream_engine::mechanism::Mechanism;
use rand::SeedableRng;
use tracing::info;

#[derive(Parser)]
#[command(
    name = "ldpstream",
    version,
    about = "Aggregation and hypothesis tests for locally private event logs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Privatize synthetic data with a local randomizer and write it as Parquet.
    Simulate(SimulateArgs),
    /// Fold Parquet files into sketches and run the configured tests; one JSON line per result.
    Batch(BatchArgs),
    /// Sample a randomizer and bound its privacy loss from below, next to the claimed ε.
    Audit(AuditArgs),
}

#[derive(Clone, Copy, ValueEnum)]
enum MechanismKind {
    /// Generalized randomized response.
    Grr,
    /// Bit flipping (unary encoding).
    Bitflip,
    /// One-hot plus Gaussian noise (--rho).
    Gauss,
    /// One-hot plus Laplace noise.
    Laplace,
    /// Hadamard response.
    Hadamard,
    /// Seeded random ±1 cohorts (--cohorts, --cohort-seed).
    Cohort,
    /// A column-stochastic channel (--matrix).
    Matrix,
    /// No randomization (curator model).
    Raw,
}

/// The mechanism flags shared by `simulate` and `audit`.
#[derive(clap::Args)]
struct MechanismArgs {
    #[arg(long, value_enum)]
    mechanism: MechanismKind,
    /// Local privacy parameter ε (> 0); not used by gauss, matrix or raw.
    #[arg(long)]
    epsilon: Option<f64>,
    /// zCDP parameter ρ (> 0) of gauss.
    #[arg(long)]
    rho: Option<f64>,
    /// Number of categories d (>= 2); matrix takes it from --matrix.
    #[arg(long)]
    domain: Option<u32>,
    /// Number of cohorts of the cohort mechanism (>= domain).
    #[arg(long, default_value_t = 64)]
    cohorts: u32,
    /// Public seed of the cohort family.
    #[arg(long, default_value_t = 0)]
    cohort_seed: u64,
    /// The channel of the matrix mechanism: rows (signals) separated by ';', entries
    /// (one per type) by ','. Every column sums to 1.
    #[arg(long)]
    matrix: Option<String>,
}

impl MechanismArgs {
    fn config(&self) -> Result<MechanismConfig> {
        let epsilon = || {
            self.epsilon
                .ok_or_else(|| usage("--epsilon is required for this mechanism"))
        };
        let domain = || {
            self.domain
                .ok_or_else(|| usage("--domain is required for this mechanism"))
        };
        let config = match self.mechanism {
            MechanismKind::Grr => MechanismConfig::Grr {
                epsilon: epsilon()?,
                domain: domain()?,
            },
            MechanismKind::Bitflip => MechanismConfig::Bitflip {
                epsilon: epsilon()?,
                domain: domain()?,
            },
            MechanismKind::Laplace => MechanismConfig::Laplace {
                epsilon: epsilon()?,
                domain: domain()?,
            },
            MechanismKind::Hadamard => MechanismConfig::Hadamard {
                epsilon: epsilon()?,
                domain: domain()?,
            },
            MechanismKind::Gauss => MechanismConfig::Gauss {
                rho: self
                    .rho
                    .ok_or_else(|| usage("--rho is required for gauss"))?,
                domain: domain()?,
            },
            MechanismKind::Cohort => MechanismConfig::Cohort {
                epsilon: epsilon()?,
                domain: domain()?,
                cohorts: self.cohorts,
                seed: self.cohort_seed,
            },
            MechanismKind::Raw => MechanismConfig::Raw { domain: domain()? },
            MechanismKind::Matrix => {
                let text = self
                    .matrix
                    .as_deref()
                    .ok_or_else(|| usage("--matrix is required for matrix"))?;
                MechanismConfig::Matrix {
                    matrix: parse_matrix(text)?,
                }
            }
        };
        config
            .validate("--mechanism")
            .map_err(|e| usage(e.to_string()))?;
        Ok(config)
    }

    fn build(&self) -> Result<Mechanism> {
        Mechanism::from_config(&self.config()?).map_err(|e| usage(e.to_string()))
    }
}

fn parse_matrix(text: &str) -> Result<Vec<Vec<f64>>> {
    text.split(';')
        .map(|row| {
            row.split(',')
                .map(|v| {
                    v.trim()
                        .parse::<f64>()
                        .map_err(|_| usage(format!("--matrix: {v:?} is not a number")))
                })
                .collect()
        })
        .collect()
}

#[derive(clap::Args)]
struct AuditArgs {
    #[command(flatten)]
    mechanism: MechanismArgs,
    /// Reports sampled per input value.
    #[arg(long, default_value_t = 1_000_000)]
    samples: u64,
    /// Seed of the sampling RNG; drawn from the OS when omitted.
    #[arg(long)]
    seed: Option<u64>,
}

#[derive(clap::Args)]
struct SimulateArgs {
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

#[derive(clap::Args)]
struct BatchArgs {
    /// The TOML config (see config/README.md).
    #[arg(long)]
    config: std::path::PathBuf,
    /// Parquet file or glob; repeatable. Replaces the paths of every Parquet source.
    #[arg(long = "input")]
    inputs: Vec<String>,
    /// Where to write JSON lines; "-" for stdout.
    #[arg(long, default_value = "-")]
    output: String,
    /// Worker threads for the fold (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
}

/// A mistake in the command line that clap's own checks cannot see; exits with code 2.
#[derive(Debug)]
struct UsageError(String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow!(UsageError(message.into()))
}

fn parse_distribution(text: &str, d: u32) -> Result<Vec<f64>> {
    if text == "uniform" {
        return Ok(vec![1.0 / f64::from(d); d as usize]);
    }
    let p: Vec<f64> = text
        .split(',')
        .map(|s| {
            s.trim()
                .parse::<f64>()
                .map_err(|_| usage(format!("--p: {s:?} is not a number")))
        })
        .collect::<Result<_>>()?;
    if p.len() != d as usize {
        return Err(usage(format!(
            "--p has {} entries; --domain is {d}",
            p.len()
        )));
    }
    if let Some(x) = p.iter().find(|x| !(x.is_finite() && **x >= 0.0)) {
        return Err(usage(format!(
            "--p entry {x} is not a probability (finite, >= 0)"
        )));
    }
    let sum: f64 = p.iter().sum();
    if (sum - 1.0).abs() > 1e-9 {
        return Err(usage(format!("--p sums to {sum}; it must sum to 1")));
    }
    Ok(p)
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

fn simulate(args: SimulateArgs) -> Result<()> {
    let mechanism = args.mechanism.build()?;
    let p = parse_distribution(&args.p, mechanism.domain() as u32)?;
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

fn rand_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is keyed from the OS; good enough to pick a simulation seed we then log.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id().into());
    h.finish()
}

fn batch(args: BatchArgs) -> Result<()> {
    let config = Config::from_path(&args.config)?;
    if let Some(threads) = args.threads {
        if threads == 0 {
            bail!(UsageError("--threads must be at least 1".into()));
        }
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build_global()
            .context("configuring the worker pool")?;
    }
    let records = run_batch(&config, &args.inputs)?;
    write_records(&args.output, &records)?;
    let rejected = records.iter().filter(|r| r.reject).count();
    let where_to = if args.output == "-" {
        "stdout"
    } else {
        args.output.as_str()
    };
    eprintln!(
        "{} results ({} reject H0) written to {}",
        records.len(),
        rejected,
        where_to
    );
    Ok(())
}

fn run_audit(args: AuditArgs) -> Result<()> {
    let mechanism = args.mechanism.build()?;
    if args.samples == 0 {
        return Err(usage("--samples must be at least 1"));
    }
    let seed = args.seed.unwrap_or_else(rand_seed);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let report = audit(&mechanism, args.samples, &mut rng)?;
    let claimed = match (report.claimed_epsilon, mechanism.privacy().rho) {
        (Some(e), _) => format!("ε = {e}"),
        (None, Some(rho)) => format!("ρ = {rho} (zCDP; no pure ε)"),
        (None, None) => "none (raw reports are not locally private)".to_string(),
    };
    println!("mechanism:                 {}", mechanism.kind());
    println!("claimed privacy:           {claimed}");
    println!("exact worst-case loss:     {:.6}", report.exact_loss);
    println!(
        "empirical ε lower bound:   {:.6}  (95% Clopper–Pearson, {} samples per input, seed {seed})",
        report.empirical_lower_bound, report.samples_per_input
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

fn exit_code(error: &anyhow::Error) -> u8 {
    let user_error = error
        .chain()
        .any(|e| e.is::<ConfigError>() || e.is::<UsageError>());
    if user_error {
        2
    } else {
        1
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Simulate(args) => simulate(args),
        Command::Batch(args) => batch(args),
        Command::Audit(args) => run_audit(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(exit_code(&e))
        }
    }
}
