//! `ldpstream serve`: the long-running service.

use anyhow::{Context, Result};
use ldpstream_jobs::ledger::store::LedgerFile;

use super::usage;

#[derive(clap::Args)]
pub struct ServeArgs {
    /// The TOML config (see docs/configuration.md).
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
    /// The privacy-budget ledger of curator-model (raw) streams, an absolute path;
    /// overrides the config's `ledger` (one of the two is required when a stream has
    /// budget_epsilon). The same file as `batch`'s, never in the checkpoint directory.
    #[arg(long)]
    ledger: Option<std::path::PathBuf>,
    /// Discard the privacy ledger this stream has in the ledger file and start a new one
    /// (repeatable). Needed when its budget_epsilon changed, or when a renamed stream reads
    /// the input of an existing ledger; the reset is logged.
    #[arg(long = "reset-ledger", value_name = "STREAM")]
    reset_ledgers: Vec<String>,
}

pub fn run(args: ServeArgs) -> Result<()> {
    let config = super::load_config(&args.config)?;
    let ledger = LedgerFile::named(&config, args.ledger.as_deref())?;
    LedgerFile::locate(&config, args.ledger.as_deref())?;
    ldpstream_jobs::state_memory::enforce(&config, None, &Default::default())?;
    let duration = args
        .duration
        .as_deref()
        .map(|d| {
            ldpstream_config::DurationMs::parse(d)
                .map_err(|e| usage(format!("--duration: {e}")))
                .and_then(|d| match d.millis() {
                    0 => Err(usage(format!(
                        "--duration {d}: must be longer than 0 (omit it to run until a signal)"
                    ))),
                    _ => Ok(d.as_std()),
                })
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
    let state = config.state_location(&args.config);
    runtime.block_on(ldpstream_serve::run(
        config,
        ldpstream_serve::ServeOptions {
            duration,
            listen: args.listen,
            reset_ledgers: args.reset_ledgers,
            ledger,
            state,
        },
    ))?;
    Ok(())
}
