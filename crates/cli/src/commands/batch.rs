//! `ldpstream batch`: the batch job over Parquet files.

use anyhow::{bail, Context, Result};
use ldpstream_config::Config;
use ldpstream_connectors::parquet::resolve_inputs;
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::stream::RecordSink;
use ldpstream_jobs::batch_job::{fold_stream, input_reports, patterns_of, run_batch};
use ldpstream_jobs::ledger::release::{release_records, Release, ReleaseOptions};
use ldpstream_jobs::ledger::store::{LedgerFile, LockedLedger};
use ldpstream_jobs::record_output::Summary;
use ldpstream_jobs::sketch_file::{self, StreamPart};

use super::UsageError;

/// More worker threads than this is a typo: each one reserves a stack, and creating tens of
/// thousands takes the operating system a minute before it refuses.
const MAX_THREADS: usize = 1024;

#[derive(clap::Args)]
pub struct BatchArgs {
    /// The TOML config (see docs/configuration.md).
    #[arg(long)]
    config: std::path::PathBuf,
    /// Parquet file or glob; repeatable. Replaces the paths of every Parquet source.
    #[arg(long = "input")]
    inputs: Vec<String>,
    /// Worker threads for the fold and the per-group tests (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// Fold only: write the sketches of this share of the input into DIR (one
    /// `sketches-*.ldpp` file) instead of testing them, for `ldpstream merge`. No test
    /// runs and no privacy budget is spent here.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["output", "reset_ledgers", "insecure_seed"])]
    emit_sketches: Option<std::path::PathBuf>,
    #[command(flatten)]
    release: ReleaseArgs,
}

/// Where the records go and what curator-model tests spend: shared by `batch` and `merge`.
#[derive(clap::Args)]
pub struct ReleaseArgs {
    /// Where to write JSON lines; "-" for stdout.
    #[arg(long, default_value = "-")]
    output: String,
    /// The privacy-budget ledger of curator-model (raw) streams, an absolute path;
    /// overrides the config's `ledger` (one of the two is required when a stream has
    /// budget_epsilon). Created if missing, locked while spent from, and updated
    /// atomically before any result is written.
    #[arg(long)]
    ledger: Option<std::path::PathBuf>,
    /// Discard the privacy ledger of this stream and start a new one (repeatable). Needed
    /// when its budget_epsilon changed, or when a renamed stream reads the input of an
    /// existing ledger; the reset is logged.
    #[arg(long = "reset-ledger", value_name = "STREAM")]
    reset_ledgers: Vec<String>,
    /// Seed the noise of private releases. Makes them reproducible and NOT private: for
    /// tests only. Without it the noise comes from a CSPRNG seeded by the OS.
    #[arg(long)]
    insecure_seed: Option<u64>,
}

pub fn run(args: BatchArgs) -> Result<()> {
    super::clean_up_on_signal();
    let config = super::load_config(&args.config)?;
    // Unreadable inputs are reported by the fold, naming the file; here they only leave
    // the estimate at its bound without reports.
    let reports = input_reports(&config, &args.inputs).unwrap_or_default();
    ldpstream_jobs::state_memory::enforce(
        &config,
        Some(ldpstream_connectors::parquet::BATCH_ROWS),
        &reports,
    )?;
    if let Some(threads) = args.threads {
        if threads == 0 || threads > MAX_THREADS {
            bail!(UsageError(format!(
                "--threads {threads}: must be from 1 to {MAX_THREADS} (the fold and the tests \
                 are CPU-bound; more threads than cores only adds overhead)"
            )));
        }
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build_global()
            .context("configuring the worker pool")?;
    }
    if let Some(dir) = &args.emit_sketches {
        return emit_sketches(&config, &args.inputs, dir);
    }
    release(&args.release, &config, |release, sink| {
        Ok(run_batch(
            &config,
            &args.inputs,
            release,
            &crate::progress::Bar::default(),
            sink,
        )?)
    })
}

fn emit_sketches(config: &Config, inputs: &[String], dir: &std::path::Path) -> Result<()> {
    let mut parts = Vec::new();
    for stream in &config.streams {
        let files = resolve_inputs(&patterns_of(stream, inputs)?)?;
        let mechanism = Mechanism::from_config(&stream.mechanism)?;
        let sketches = fold_stream(stream, &mechanism, &files, &crate::progress::Bar::default())?;
        parts.push((
            stream,
            StreamPart {
                inputs: files,
                sketches,
            },
        ));
    }
    let written = sketch_file::write(dir, &parts)?;
    let files: usize = parts.iter().map(|(_, p)| p.inputs.len()).sum();
    eprintln!(
        "sketches of {} stream(s) over {files} input file(s) written to {} (merge with `ldpstream merge`)",
        parts.len(),
        written.display()
    );
    Ok(())
}

/// Releases the records `compute` makes into the sink it is given (the spends saved
/// before the records are published: [`ldpstream_jobs::ledger::release`]), then prints a
/// summary.
pub(super) fn release(
    args: &ReleaseArgs,
    config: &Config,
    compute: impl FnOnce(Release<'_>, &mut dyn RecordSink) -> Result<Option<LockedLedger>>,
) -> Result<()> {
    let ledger = LedgerFile::locate(config, args.ledger.as_deref())?;
    if let Some(file) = &ledger {
        eprintln!("privacy ledger: {}", file.describe());
    }
    let summary = release_records(
        &ReleaseOptions {
            ledger: ledger.as_ref(),
            reset: &args.reset_ledgers,
            insecure_seed: args.insecure_seed,
            output: &args.output,
        },
        compute,
    )?;
    print_summary(&summary, &args.output);
    Ok(())
}

/// The summary on stderr. Only final records count: a window looked at 120 times is one
/// result, not 120 (look records are provisional, and outside the BH family).
fn print_summary(summary: &Summary, output: &str) {
    // Per (stream, test): final results (windows × groups) and how many stay significant
    // after Benjamini–Hochberg.
    for ((stream, test), counts) in &summary.families {
        eprintln!(
            "{stream}/{test}: {} of {} final results (windows × groups) with \
             q < alpha (Benjamini–Hochberg)",
            counts.significant, counts.results
        );
    }
    let where_to = if output == "-" { "stdout" } else { output };
    eprintln!(
        "{} final results ({} reject H0){} written to {}",
        summary.finals,
        summary.rejecting,
        if summary.looks > 0 {
            format!(", and {} look records", summary.looks)
        } else {
            String::new()
        },
        where_to
    );
}
