//! `ldpstream check`: validates a config and prints the state each stream will hold, against
//! `max_state_memory`; exits 2 when it does not fit (what `batch` and `serve` would refuse).

use anyhow::Result;
use bytesize::ByteSize;
use ldpstream_config::SourceConfig;
use ldpstream_connectors::parquet::BATCH_ROWS;
use ldpstream_engine::stream::memory::has_bounded_windows;
use ldpstream_jobs::ledger::store::LedgerFile;
use ldpstream_jobs::state_memory;

#[derive(clap::Args)]
pub struct CheckArgs {
    /// The TOML config (see docs/configuration.md).
    #[arg(long)]
    config: std::path::PathBuf,
}

pub fn run(args: CheckArgs) -> Result<()> {
    let config = super::load_config(&args.config)?;
    // A budgeted stream without a named ledger is refused as batch and serve refuse it.
    let ledger = LedgerFile::locate(&config, None)?;
    println!("config {}: valid", args.config.display());
    if let Some(file) = ledger {
        println!(
            "privacy budgets are spent from the ledger file {}",
            file.describe()
        );
    }
    println!(
        "serve keeps its state in: {}",
        config.state_location(&args.config)
    );
    for stream in &config.streams {
        if let SourceConfig::Kafka(k) = &stream.source {
            if let Some(so) = &k.scale_out {
                let (changelog, partials) = ldpstream_config::scale_out_state_topics(&k.group_id);
                println!(
                    "stream {:?} (scale_out) keeps its state in Kafka instead: {changelog}, \
                     {partials}; final records to {}",
                    stream.name, so.results_topic
                );
            }
        }
    }
    let parquet_only = config
        .streams
        .iter()
        .all(|s| matches!(s.source, SourceConfig::Parquet { .. }));
    // What `batch` would see: the reports in the Parquet footers, when the files are there.
    let reports = if parquet_only {
        ldpstream_jobs::batch_job::input_reports(&config, &[]).unwrap_or_default()
    } else {
        Default::default()
    };
    for stream in &config.streams {
        let batch_rows = match stream.source {
            SourceConfig::Parquet { .. } => Some(BATCH_ROWS),
            _ => None,
        };
        // One stream at a time, borrowed: a copy of the config per stream made `check`
        // quadratic in streams.
        let estimate = state_memory::estimate(stream, batch_rows, &reports)?;
        println!(
            "stream {:?}: estimated state {}",
            estimate.stream,
            ByteSize::b(estimate.total())
        );
        for term in &estimate.terms {
            println!(
                "  {:<18} {:>12}  ({})",
                term.what,
                ByteSize::b(term.bytes).to_string(),
                term.how
            );
        }
        olh_pool_notes(stream)?;
        if has_bounded_windows(stream) {
            println!(
                "  note: `batch` keeps every pane of its input until the end, so there the pane \
                 store grows with the input's time span"
            );
        }
    }
    match state_memory::limit(&config) {
        Some(limit) => println!(
            "max_state_memory: {limit}{}",
            if config.max_state_memory.is_none() {
                " (default: half the machine's memory)"
            } else {
                ""
            }
        ),
        None => println!("max_state_memory: none (the machine's memory could not be read)"),
    }
    // The same rule `batch` and `serve` apply; Parquet streams estimated at the reader's batch.
    state_memory::enforce(&config, parquet_only.then_some(BATCH_ROWS), &reports)?;
    println!("ok: the estimate fits");
    Ok(())
}

/// An OLH stream's pool: what it costs against fresh hashes and whether its records carry
/// the exactly unbiased estimate (docs/STATISTICS.md §1.8). Builds the pool's factor, the
/// one-time cost `serve` pays at start.
fn olh_pool_notes(stream: &ldpstream_config::StreamConfig) -> Result<()> {
    let Some((g, pool_size)) = stream.mechanism.olh_shape() else {
        return Ok(());
    };
    let d = stream.mechanism.domain();
    let gamma = ldpstream_config::olh_gamma(d, g, pool_size);
    let suggestion = ldpstream_config::olh_suggested_pool_size(d, g)
        .map(|s| format!("pool_size = {s} keeps it within 10%"))
        .unwrap_or_else(|| "no pool within the limits keeps it within 10%".into());
    if d > ldpstream_config::OLH_MAX_DENSE_DOMAIN {
        println!(
            "  olh pool: d = {d} > {}: records carry only estimate_plain, which the pool \
             biases (about sqrt(1/(g·S)) per pair of categories); γ = (d − 1)/(S(g − 1)) = \
             {gamma:.3}",
            ldpstream_config::OLH_MAX_DENSE_DOMAIN
        );
        return Ok(());
    }
    let mechanism = ldpstream_engine::mechanism::Mechanism::from_config(&stream.mechanism)?;
    let ldpstream_engine::mechanism::Mechanism::Olh(m) = &mechanism else {
        return Ok(());
    };
    let started = std::time::Instant::now();
    match m.solver() {
        Ok(solver) => {
            let factor = solver.variance_factor();
            println!(
                "  olh pool: γ = (d − 1)/(S(g − 1)) = {gamma:.3}; the unbiased estimate's \
                 variance is {factor:.3}× fresh hashes'; estimate_plain's bias is at most \
                 {:.2e}; {} standard errors; factor built in {:.2} s",
                solver.bias_bound(),
                if solver.exact_variance() {
                    "exact"
                } else {
                    "approximate (fresh-hash variance × the pool's C⁻¹ diagonal)"
                },
                started.elapsed().as_secs_f64()
            );
            if factor > 1.10 {
                println!(
                    "  warning: the pool costs {:.0}% variance against fresh hashes; {suggestion}",
                    (factor - 1.0) * 100.0
                );
            }
        }
        Err(why) => println!("  warning: {why}"),
    }
    Ok(())
}
