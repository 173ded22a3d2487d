//! The `ldpstream` command line: parse the arguments, run the subcommand, turn its error
//! into a message and an exit code. The subcommands are in `cli/`, the work in the library.

mod commands;
mod progress;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ldpstream_config::ConfigError;
use ldpstream_jobs::Fault;

#[derive(Parser)]
#[command(
    name = "ldpstream",
    version,
    about = "Aggregation and hypothesis tests for locally private event logs"
)]
struct Cli {
    /// Log lines on stderr as text, or as one JSON object per line for log shippers.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Privatize synthetic data with a local randomizer and write it as Parquet.
    Simulate(commands::simulate::SimulateArgs),
    /// Fold Parquet files into sketches and run the configured tests; one JSON line per result.
    Batch(commands::batch::BatchArgs),
    /// Add up the sketch files of `batch --emit-sketches` runs and run the tests once.
    Merge(commands::merge::MergeArgs),
    /// The long-running service: ingest, window, test on a schedule, serve HTTP metrics.
    Serve(commands::serve::ServeArgs),
    /// Sample a randomizer and bound its privacy loss from below, next to the claimed ε.
    Audit(commands::audit::AuditArgs),
    /// Compare the mechanisms' identity tests: power at n, or the n for a target power.
    Plan(commands::plan::PlanArgs),
    /// Validate a config and estimate the state each stream will hold (max_state_memory).
    Check(commands::check::CheckArgs),
}

/// The error and its causes, each cause only once: most of our errors already print
/// their source (`{path}: {source}`), so anyhow's `{:#}` would print it twice.
fn message(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let part = cause.to_string();
        if !text.contains(&part) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&part);
        }
    }
    text
}

/// Exit code 2 for the user's mistakes (command line, config), 1 for everything else.
fn exit_code(error: &anyhow::Error) -> u8 {
    let user_error = error.chain().any(|e| {
        e.is::<ConfigError>()
            || e.is::<commands::UsageError>()
            || e.downcast_ref::<ldpstream_jobs::Error>()
                .is_some_and(|e| e.fault() == Fault::User)
            || e.downcast_ref::<ldpstream_serve::error::Error>()
                .is_some_and(|e| e.fault() == Fault::User)
            || e.downcast_ref::<ldpstream_connectors::ConnectorError>()
                .is_some_and(|e| e.fault() == Fault::User)
    });
    if user_error {
        2
    } else {
        1
    }
}

/// `ldpstream check … | head` closes stdout early. One-shot commands then end quietly on
/// SIGPIPE, as Unix tools do, instead of panicking in `println!`. `serve` keeps Rust's
/// default (the write fails with an error), so a closed stdout sink cannot kill it between
/// checkpoints.
fn end_quietly_on_a_closed_stdout() {
    // SAFETY: sets a signal disposition before any other thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve(_)) {
        end_quietly_on_a_closed_stdout();
    }
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let logs = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter);
    match cli.log_format {
        // Colour codes only for a person at a terminal, never into a log file or pipe.
        LogFormat::Text => logs
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        LogFormat::Json => logs.json().with_ansi(false).init(),
    }
    ldpstream_connectors::parquet::contained::quiet_contained_panics();
    let result = match cli.command {
        Command::Simulate(args) => commands::simulate::run(args),
        Command::Batch(args) => commands::batch::run(args),
        Command::Merge(args) => commands::merge::run(args),
        Command::Serve(args) => commands::serve::run(args),
        Command::Audit(args) => commands::audit::run(args),
        Command::Plan(args) => commands::plan::run(args),
        Command::Check(args) => commands::check::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", message(&e));
            ExitCode::from(exit_code(&e))
        }
    }
}
