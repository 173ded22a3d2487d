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
use ldpstream_engine::plan::{self, Alternative, Hypotheses, PlanMechanism};
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
    /// The long-running service: ingest, window, test on a schedule, serve HTTP metrics.
    Serve(ServeArgs),
    /// Sample a randomizer and bound its privacy loss from below, next to the claimed ε.
    Audit(AuditArgs),
    /// Compare the mechanisms' identity tests: power at n, or the n for a target power.
    Plan(PlanArgs),
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
    /// The privacy-budget ledger of curator-model (raw) streams; created if missing and
    /// updated atomically before any result is written.
    #[arg(long, default_value = "ldpstream-ledger.json")]
    ledger: std::path::PathBuf,
    /// Seed the noise of private releases. Makes them reproducible and NOT private: for
    /// tests only. Without it the noise comes from a CSPRNG seeded by the OS.
    #[arg(long)]
    insecure_seed: Option<u64>,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// The TOML config (see config/README.md).
    #[arg(long)]
    config: std::path::PathBuf,
    /// Stop after this long, as on SIGTERM (e.g. "90s", "5m"); runs until Ctrl-C or
    /// SIGTERM when omitted (or until every bounded source is exhausted).
    #[arg(long)]
    duration: Option<String>,
    /// HTTP address, overriding `serve.listen`; a port of 0 picks a free one (printed on
    /// stderr).
    #[arg(long)]
    listen: Option<String>,
}

#[derive(clap::Args)]
struct PlanArgs {
    /// Number of categories d (>= 2).
    #[arg(long)]
    domain: u32,
    /// Local privacy parameter ε (> 0). Gaussian noise is planned at ρ = ε²/2.
    // Negative numbers parse as values so that our own range message explains them.
    #[arg(long, allow_negative_numbers = true)]
    epsilon: f64,
    /// Level of the tests.
    #[arg(long, default_value_t = 0.05, allow_negative_numbers = true)]
    alpha: f64,
    /// The null p0: "uniform" or d comma-separated probabilities, all > 0.
    #[arg(long, default_value = "uniform")]
    null: String,
    /// The alternative p1: d comma-separated probabilities, or "paninski:DIST" for
    /// p1_j = p0_j (1 ± DIST) in alternating signs.
    #[arg(long)]
    alternative: String,
    /// Report the power of each mechanism at this many reports.
    #[arg(long, conflicts_with = "power", required_unless_present = "power")]
    n: Option<u64>,
    /// Report the reports each mechanism needs to reach this power (in (alpha, 1)).
    #[arg(long, allow_negative_numbers = true)]
    power: Option<f64>,
    /// Also write power-versus-n curves of all mechanisms to this SVG file.
    #[arg(long)]
    plot: Option<std::path::PathBuf>,
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

/// `"uniform"` or `d` comma-separated probabilities; `flag` names the option in messages.
fn parse_distribution(text: &str, d: u32, flag: &str) -> Result<Vec<f64>> {
    if text == "uniform" {
        return Ok(vec![1.0 / f64::from(d); d as usize]);
    }
    let p: Vec<f64> = text
        .split(',')
        .map(|s| {
            s.trim()
                .parse::<f64>()
                .map_err(|_| usage(format!("{flag}: {s:?} is not a number")))
        })
        .collect::<Result<_>>()?;
    if p.len() != d as usize {
        return Err(usage(format!(
            "{flag} has {} entries; --domain is {d}",
            p.len()
        )));
    }
    if let Some(x) = p.iter().find(|x| !(x.is_finite() && **x >= 0.0)) {
        return Err(usage(format!(
            "{flag} entry {x} is not a probability (finite, >= 0)"
        )));
    }
    let sum: f64 = p.iter().sum();
    if (sum - 1.0).abs() > 1e-9 {
        return Err(usage(format!("{flag} sums to {sum}; it must sum to 1")));
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
    let mut ledgers = ldpstream_connectors::ledger_file::LedgerBook::load(&args.ledger)?;
    let mut noise = match args.insecure_seed {
        Some(seed) => {
            tracing::warn!(
                seed,
                "--insecure-seed: private releases use seeded, reproducible noise"
            );
            rand::rngs::StdRng::seed_from_u64(seed)
        }
        None => ldpstream_engine::curator::secure_rng(),
    };
    let records = run_batch(&config, &args.inputs, &mut ledgers, &mut noise)?;
    // Spends are committed before any result is released.
    if !ledgers.streams.is_empty() {
        ledgers.save(&args.ledger)?;
    }
    write_records(&args.output, &records)?;
    let rejected = records.iter().filter(|r| r.reject).count();
    // Per (stream, test): how many groups stay significant after Benjamini–Hochberg.
    let mut families: std::collections::BTreeMap<(&str, &str), (usize, usize)> = Default::default();
    for r in &records {
        let entry = families
            .entry((r.stream.as_str(), r.test.as_str()))
            .or_default();
        entry.1 += 1;
        if r.q_value.is_some_and(|q| q < r.alpha) {
            entry.0 += 1;
        }
    }
    for ((stream, test), (significant, groups)) in &families {
        eprintln!(
            "{stream}/{test}: {significant} of {groups} groups with q < alpha (Benjamini–Hochberg)"
        );
    }
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

fn serve(args: ServeArgs) -> Result<()> {
    let config = Config::from_path(&args.config)?;
    let duration = args
        .duration
        .as_deref()
        .map(|d| {
            ldpstream_config::DurationMs::parse(d)
                .map(|d| d.as_std())
                .map_err(|e| usage(format!("--duration: {e}")))
        })
        .transpose()?;
    if let Some(listen) = &args.listen {
        if listen.parse::<std::net::SocketAddr>().is_err() {
            return Err(usage(format!(
                "--listen {listen:?}: expected an IP address and port, e.g. 127.0.0.1:9898"
            )));
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(ldpstream_connectors::serve::run(
        config,
        ldpstream_connectors::serve::ServeOptions {
            duration,
            listen: args.listen,
        },
    ))?;
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

/// Domains beyond this would make the planner allocate gigabytes for one probability vector.
const MAX_PLAN_DOMAIN: u32 = 1 << 24;

/// What the planner found for one mechanism.
struct PlanRow {
    mechanism: PlanMechanism,
    df: u32,
    /// λ at the given n, or at the required n.
    lambda: Option<f64>,
    /// Power at the given n (a `--n` plan).
    power: Option<f64>,
    /// Reports needed for the target (a `--power` plan); the reason when unreachable.
    required: Option<std::result::Result<u64, String>>,
}

fn format_number(x: f64) -> String {
    if x != 0.0 && !(1e-3..1e6).contains(&x.abs()) {
        format!("{x:.4e}")
    } else {
        format!("{x:.4}")
    }
}

fn plan_command(args: PlanArgs) -> Result<()> {
    let d = args.domain;
    if !(2..=MAX_PLAN_DOMAIN).contains(&d) {
        return Err(usage(format!(
            "--domain {d} must be between 2 and {MAX_PLAN_DOMAIN}"
        )));
    }
    if !(args.epsilon.is_finite() && args.epsilon > 0.0) {
        return Err(usage(format!(
            "--epsilon {} must be a finite number > 0",
            args.epsilon
        )));
    }
    if !(args.alpha > 0.0 && args.alpha < 1.0) {
        return Err(usage(format!("--alpha {} must be in (0, 1)", args.alpha)));
    }
    if let Some(target) = args.power {
        if !(target > args.alpha && target < 1.0) {
            return Err(usage(format!(
                "--power {target} must be above --alpha {} and below 1",
                args.alpha
            )));
        }
    }
    if args.n == Some(0) {
        return Err(usage("--n 0: give at least 1 report"));
    }
    let p0 = parse_distribution(&args.null, d, "--null")?;
    if let Some(x) = p0.iter().find(|x| **x <= 0.0) {
        return Err(usage(format!(
            "--null entry {x} must be > 0: every test divides by the null's cells"
        )));
    }
    let bad_alternative = |e: ldpstream_engine::EngineError| {
        usage(format!("--alternative {:?}: {e}", args.alternative))
    };
    let h: Hypotheses = args
        .alternative
        .parse::<Alternative>()
        .and_then(|alt| alt.against(&p0))
        .map_err(bad_alternative)?;

    // The flags were checked above, so what the planner still refuses is the combination
    // (e.g. a near point-mass null at a large ε): a usage error too.
    let degenerate = |e: ldpstream_engine::EngineError| {
        usage(format!(
            "--null {:?} with --epsilon {}: {e}",
            args.null, args.epsilon
        ))
    };
    let mechanisms = PlanMechanism::all(args.epsilon);
    let rows = mechanisms
        .iter()
        .map(|&m| -> Result<PlanRow> {
            let df = m.df(h.domain());
            let row = match (args.n, args.power) {
                (Some(n), _) => PlanRow {
                    mechanism: m,
                    df,
                    lambda: Some(plan::noncentrality(m, &h, n).map_err(degenerate)?),
                    power: Some(plan::power(m, &h, args.alpha, n).map_err(degenerate)?),
                    required: None,
                },
                (None, Some(target)) => match plan::required_n(m, &h, args.alpha, target) {
                    Ok(n) => PlanRow {
                        mechanism: m,
                        df,
                        lambda: Some(plan::noncentrality(m, &h, n).map_err(degenerate)?),
                        power: None,
                        required: Some(Ok(n)),
                    },
                    Err(e @ ldpstream_engine::EngineError::PowerUnreachable { .. }) => PlanRow {
                        mechanism: m,
                        df,
                        lambda: None,
                        power: None,
                        required: Some(Err(e.to_string())),
                    },
                    Err(e) => return Err(degenerate(e)),
                },
                (None, None) => return Err(usage("give --n or --power")),
            };
            Ok(row)
        })
        .collect::<Result<Vec<_>>>()?;

    print_plan(&args, &h, &rows);

    if let Some(path) = &args.plot {
        let svg =
            plan::power_svg(&mechanisms, &h, args.alpha, args.power, args.n).map_err(degenerate)?;
        std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote power curves to {}", path.display());
    }
    Ok(())
}

fn print_plan(args: &PlanArgs, h: &Hypotheses, rows: &[PlanRow]) {
    println!(
        "plan: d = {}, ε = {}, α = {}, null = {}, alternative = {} (TV distance {:.4})",
        h.domain(),
        args.epsilon,
        args.alpha,
        args.null,
        args.alternative,
        h.tv_distance()
    );
    let (lambda_head, last_head) = match (args.n, args.power) {
        (Some(n), _) => (format!("λ at n = {n}"), format!("power at n = {n}")),
        (None, target) => (
            "λ at that n".to_string(),
            format!("n for power {}", target.unwrap_or(f64::NAN)),
        ),
    };
    println!();
    println!(
        "{:<16} {:<16} {:>5} {:>18} {:>20}",
        "mechanism", "test", "ν", lambda_head, last_head
    );
    for row in rows {
        let lambda = row.lambda.map_or("-".to_string(), format_number);
        let last = match (&row.power, &row.required) {
            (Some(p), _) => format!("{p:.4}"),
            (None, Some(Ok(n))) => n.to_string(),
            (None, Some(Err(_))) => "never".to_string(),
            (None, None) => "-".to_string(),
        };
        println!(
            "{:<16} {:<16} {:>5} {:>18} {:>20}",
            row.mechanism.name(),
            row.mechanism.test_name(),
            row.df,
            lambda,
            last
        );
    }
    println!();
    for row in rows {
        if let Some(Err(reason)) = &row.required {
            println!("note: {reason}");
        }
    }
    let rho = args.epsilon * args.epsilon / 2.0;
    println!(
        "note: Gaussian noise is planned at ρ = ε²/2 = {rho} (ρ-zCDP, which ε-LDP implies; \
         it is not ε-LDP itself)"
    );

    // Higher power, or fewer reports, is better; blind (λ = 0) or unreachable is worst.
    let score = |row: &PlanRow| match (&row.power, &row.required) {
        (Some(_), _) if row.lambda == Some(0.0) => f64::INFINITY,
        (Some(p), _) => -p,
        (None, Some(Ok(n))) => *n as f64,
        _ => f64::INFINITY,
    };
    let best_of = |rows: &mut dyn Iterator<Item = &PlanRow>| {
        rows.filter(|r| score(r).is_finite())
            .min_by(|a, b| score(a).total_cmp(&score(b)))
            .map(|r| r.mechanism)
    };
    let describe = |m: PlanMechanism| {
        let row = rows.iter().find(|r| r.mechanism == m);
        let detail = match row.map(|r| (&r.power, &r.required)) {
            Some((Some(p), _)) => format!("highest power, {p:.4}"),
            Some((None, Some(Ok(n)))) => format!("fewest reports, {n}"),
            _ => String::new(),
        };
        format!("{} ({}; {detail})", m.name(), m.test_name())
    };
    match best_of(&mut rows.iter()) {
        None => println!("best: none of the mechanisms can detect this alternative"),
        Some(best) => {
            println!("best: {}", describe(best));
            if matches!(best, PlanMechanism::Gauss { .. }) {
                let ldp = best_of(
                    &mut rows
                        .iter()
                        .filter(|r| !matches!(r.mechanism, PlanMechanism::Gauss { .. })),
                );
                if let Some(ldp) = ldp {
                    println!("best ε-LDP mechanism: {}", describe(ldp));
                }
            }
        }
    }
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
        Command::Serve(args) => serve(args),
        Command::Audit(args) => run_audit(args),
        Command::Plan(args) => plan_command(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(exit_code(&e))
        }
    }
}
