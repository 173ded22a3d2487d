//! `ldpstream plan`: power, sample size and mechanism choice.

use anyhow::{Context, Result};
use ldpstream_engine::plan::{self, Alternative, Hypotheses, PlanMechanism};

use ldpstream_config::{compact, MAX_EPSILON};

use super::{parse_distribution, usage};

#[derive(clap::Args)]
pub struct PlanArgs {
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
    /// p1_j = p0_j (1 ± DIST) in alternating signs. Without it, only the estimator
    /// variances are printed.
    #[arg(long)]
    alternative: Option<String>,
    /// Report the power of each mechanism at this many reports.
    #[arg(long, conflicts_with = "power")]
    n: Option<u64>,
    /// Report the reports each mechanism needs to reach this power (in (alpha, 1)).
    #[arg(long, allow_negative_numbers = true)]
    power: Option<f64>,
    /// Also simulate each mechanism's sequential (anytime-valid) test and print its median
    /// and mean reports to detection beside the fixed-n n for the same power (--power, or
    /// 0.8 with --n).
    #[arg(long)]
    sequential: bool,
    /// With --sequential: reports between the test's looks (snapshot interval × report
    /// rate), which the reports to detection depend on; default fixed-n n / 100.
    #[arg(long, requires = "sequential")]
    look_every: Option<u64>,
    /// Also write power-versus-n curves of all mechanisms to this SVG file.
    #[arg(long)]
    plot: Option<std::path::PathBuf>,
    /// Plan the OLH row for this fixed seed pool (the stream's `pool_size`) instead of
    /// fresh hashes: one pool's collisions move the test's power by up to ±0.1.
    #[arg(long)]
    pool_size: Option<u32>,
    /// The fixed pool's `pool_seed` (with --pool-size).
    #[arg(long, default_value_t = 0, requires = "pool_size")]
    pool_seed: u64,
    /// The OLH stream's `g` (with --pool-size; default round(e^ε) + 1).
    #[arg(long, requires = "pool_size")]
    olh_g: Option<u32>,
    #[command(flatten)]
    longitudinal: super::plan_longitudinal::LongitudinalArgs,
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

pub fn run(args: PlanArgs) -> Result<()> {
    let d = args.domain;
    if !(2..=MAX_PLAN_DOMAIN).contains(&d) {
        return Err(usage(format!(
            "--domain {d} must be between 2 and {MAX_PLAN_DOMAIN}"
        )));
    }
    let epsilon = compact(args.epsilon);
    if !(args.epsilon.is_finite() && args.epsilon > 0.0) {
        return Err(usage(format!(
            "--epsilon {epsilon} must be a finite number > 0"
        )));
    }
    // Beyond it the Gaussian row's ρ = ε²/2 overflows, and no randomizer is exactly ε-LDP
    // (the config's bound, for the same reason).
    if args.epsilon > MAX_EPSILON {
        return Err(usage(format!(
            "--epsilon {epsilon} must be at most {MAX_EPSILON}: above it the lie probability \
             e^-ε leaves the normal doubles"
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
    super::plan_longitudinal::check(&args.longitudinal, d, args.epsilon)?;
    super::plan_variance::print_variances(d, args.epsilon)?;
    let Some(alternative) = args.alternative.as_deref() else {
        if args.n.is_some() || args.power.is_some() || args.sequential || args.plot.is_some() {
            return Err(usage(
                "--n, --power, --sequential and --plot plan a test: give --alternative too",
            ));
        }
        return super::plan_longitudinal::print_longitudinal(
            &args.longitudinal,
            d,
            args.epsilon,
            None,
        );
    };
    let p0 = parse_distribution(&args.null, d, "--null")?;
    if let Some(x) = p0.iter().find(|x| **x <= 0.0) {
        return Err(usage(format!(
            "--null entry {x} must be > 0: every test divides by the null's cells"
        )));
    }
    let bad_alternative =
        |e: ldpstream_engine::EngineError| usage(format!("--alternative {alternative:?}: {e}"));
    let h: Hypotheses = alternative
        .parse::<Alternative>()
        .and_then(|alt| alt.against(&p0))
        .map_err(bad_alternative)?;

    // The flags were checked above, so what the planner still refuses is the combination
    // (e.g. a near point-mass null at a large ε): a usage error too.
    let degenerate = |e: ldpstream_engine::EngineError| {
        usage(format!(
            "--null {:?} with --epsilon {epsilon}: {e}",
            args.null
        ))
    };
    let mechanisms = PlanMechanism::all(args.epsilon);
    let pool = fixed_pool(&args, &h)?;
    let rows = mechanisms
        .iter()
        .map(|&m| -> Result<PlanRow> {
            let df = m.df(h.domain());
            if let (PlanMechanism::Olh { .. }, Some(pool)) = (m, &pool) {
                return Ok(pool_row(m, df, pool, &args));
            }
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
    super::plan_longitudinal::print_longitudinal(
        &args.longitudinal,
        d,
        args.epsilon,
        Some((&h, args.alpha, args.n, args.power)),
    )?;
    if let Some(size) = args.pool_size {
        println!(
            "note: the OLH row is planned for the fixed pool pool_size = {size}, pool_seed = {} \
             (its support counts' exact covariance, four-cumulant tail); --sequential and \
             --plot still assume fresh hashes",
            args.pool_seed
        );
    }
    let detections = if args.sequential {
        print_sequential(&args, &h, &mechanisms)?
    } else {
        Vec::new()
    };

    if let Some(path) = &args.plot {
        let svg = plan::power_svg(&mechanisms, &h, args.alpha, args.power, args.n, &detections)
            .map_err(degenerate)?;
        std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote power curves to {}", path.display());
    }
    Ok(())
}

/// The OLH power of `--pool-size`'s fixed pool, when given.
fn fixed_pool(args: &PlanArgs, h: &Hypotheses) -> Result<Option<plan::OlhPoolPower>> {
    let Some(size) = args.pool_size else {
        return Ok(None);
    };
    let g = args
        .olh_g
        .unwrap_or_else(|| ldpstream_config::olh_default_g(args.epsilon));
    let olh =
        ldpstream_engine::mechanism::Olh::new(args.epsilon, args.domain, g, size, args.pool_seed)
            .map_err(|e| usage(format!("--pool-size {size} / --olh-g {g}: {e}")))?;
    let identifiable = ldpstream_config::olh_identifiable_domain(g, size);
    if u64::from(args.domain) > identifiable {
        return Err(usage(format!(
            "--pool-size {size}: with g = {g}, {size} × {} + 1 = {identifiable} < --domain {}, \
             so the pool cannot tell the categories' frequencies apart (docs/STATISTICS.md §1.8){}",
            g - 1,
            args.domain,
            ldpstream_config::olh_suggested_pool_size(args.domain, g)
                .map(|s| format!("; use --pool-size {s}"))
                .unwrap_or_default()
        )));
    }
    plan::OlhPoolPower::new(&olh, h, args.alpha)
        .map(Some)
        .map_err(|e| {
            usage(format!(
                "--pool-size {size} at --domain {}: {e}",
                args.domain
            ))
        })
}

/// The OLH row from the fixed pool's power.
fn pool_row(m: PlanMechanism, df: u32, pool: &plan::OlhPoolPower, args: &PlanArgs) -> PlanRow {
    let required = args
        .power
        .map(|target| pool.required_n(target).map_err(|e| e.to_string()));
    let n = args
        .n
        .or_else(|| required.as_ref().and_then(|r| r.as_ref().ok().copied()));
    PlanRow {
        mechanism: m,
        df,
        lambda: n.map(|n| pool.noncentrality(n)),
        power: args.n.map(|n| pool.power(n)),
        required,
    }
}

/// Reports to detection of each mechanism's sequential test (a seeded simulation of the
/// limiting random walk under the mechanism's own mixture, `plan::sequential_detection`),
/// with the equal-weight mixture and tuned by `design_n` = the fixed-n n, beside that n.
/// Returns the equal-weight detections for the plot: one per mechanism, or none when any
/// failed.
fn print_sequential(
    args: &PlanArgs,
    h: &Hypotheses,
    mechanisms: &[PlanMechanism],
) -> Result<Vec<plan::Detection>> {
    let power = args.power.unwrap_or(0.8);
    if args.look_every == Some(0) {
        return Err(usage(
            "--look-every 0: give the reports between looks, at least 1",
        ));
    }
    println!();
    println!(
        "sequential tests (e-processes, level {} at every look), median reports to detection under the alternative, looked at every {}; fixed-n n for power {power}:",
        args.alpha,
        args.look_every.map_or("fixed-n n / 100 reports".to_string(), |n| format!("{n} reports"))
    );
    println!(
        "{:<16} {:>12} {:>24} {:>24}",
        "mechanism", "fixed-n n", "median (× fixed-n)", "with design_n (× fixed-n)"
    );
    let mut detections = Vec::new();
    let mut all = true;
    for &m in mechanisms {
        let run = |design| {
            let options = plan::SequentialOptions {
                look_every: args.look_every,
                design,
            };
            plan::sequential_detection(m, h, args.alpha, power, 1, options)
        };
        match run(false).and_then(|plain| Ok((plain, run(true)?))) {
            Ok((plain, tuned)) => {
                let cell = |d: &plan::Detection| {
                    if d.median >= d.cap as f64 {
                        return format!("> {} (20×)", d.cap);
                    }
                    format!(
                        "{:.0} ({:.2}×)",
                        d.median,
                        d.median / d.fixed_n.max(1) as f64
                    )
                };
                println!(
                    "{:<16} {:>12} {:>24} {:>24}",
                    m.name(),
                    plain.fixed_n,
                    cell(&plain),
                    cell(&tuned)
                );
                detections.push(plain);
            }
            Err(e) => {
                all = false;
                println!("{:<16} {e}", m.name());
            }
        }
    }
    println!(
        "note: \"with design_n\" is the test with `design_n = <its fixed-n n>` in its config, \
         which tunes the mixture to that n (docs/STATISTICS.md §10.3); the level holds either way"
    );
    if mechanisms
        .iter()
        .any(|m| matches!(m, PlanMechanism::Olh { .. }))
    {
        println!(
            "note: OLH's sequential test is the Gaussian mixture on the support counts' \
             whitened statistic (ν = d − 1, asymptotic; docs/STATISTICS.md §10.1), planned \
             as with fresh hashes; a pool beyond 4,096 categories falls back on the exact \
             mixture over its pool_size × g cells, which detects far later"
        );
    }
    Ok(if all { detections } else { Vec::new() })
}

fn print_plan(args: &PlanArgs, h: &Hypotheses, rows: &[PlanRow]) {
    println!(
        "plan: d = {}, ε = {}, α = {}, null = {}, alternative = {} (TV distance {:.4})",
        h.domain(),
        args.epsilon,
        args.alpha,
        args.null,
        args.alternative.as_deref().unwrap_or("-"),
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
    println!(
        "note: Hadamard is planned with its rows drawn uniformly, as its randomizer draws \
         them; its tests condition on each row's report count, so unbalanced rows keep the \
         level but lower the power"
    );
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
