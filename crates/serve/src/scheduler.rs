//! The scheduler: every `snapshot_interval` a snapshot round (due windows copied under
//! each stream's lock, tested outside it, published), every `checkpoint_interval` a
//! checkpoint, until a signal, `--duration`, a failed stream, or the end of every bounded
//! source.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ldpstream_config::Config;
use ldpstream_connectors::Sinks;
use ldpstream_engine::record::TestRecord;
use ldpstream_engine::stream::{evaluate_look, evaluate_snapshot, take_due, take_looks, Private};
use ldpstream_jobs::parallel_groups::RayonGroups;
use tokio::time::MissedTickBehavior;
use tracing::{error, info};

use super::checkpoint::{self, StreamCheckpoint};
use super::history::unix_millis;
use super::{Running, Shared, StreamRuntime, WorkerEvent};
use crate::error::Error;
use ldpstream_jobs::ledger::file::LedgerEntry;
use ldpstream_jobs::ledger::release::spend_then_publish;
use ldpstream_jobs::ledger::store::{LedgerFile, LockedLedger};
use ldpstream_jobs::state_codec::settings_of;
use ldpstream_jobs::Error as JobsError;

/// Ticks until the service is to stop. Returns the stream failure that stopped it, if
/// one did; an error of a snapshot round itself ends the service at once.
pub(super) async fn run(
    config: &Config,
    duration: Option<Duration>,
    running: &mut Running,
    shared: &Arc<Shared>,
    sinks: &mut Sinks,
) -> Result<Option<Error>, Error> {
    let mut last_checkpoint = Instant::now();
    let mut checkpoint_tick = interval(config.serve.checkpoint_interval.as_std()).await;
    let mut tick = interval(config.serve.snapshot_interval.as_std()).await;
    let deadline = async {
        match duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline);
    // Registered once: a signal that arrives while a snapshot round runs is not lost.
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    let checkpointing = running.files.dir.is_some();
    let mut ended = 0usize;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                snapshot_round(&running.runtimes, shared, sinks, true, running.files.ledger.as_ref()).await?;
                if checkpointing {
                    shared.metrics.checkpoint_age.set(last_checkpoint.elapsed().as_secs_f64());
                }
            }
            _ = checkpoint_tick.tick(), if checkpointing => {
                if let Some(dir) = &running.files.dir {
                    // A full disk or a failing volume must not take the service down in a
                    // crash loop: the last good checkpoint stays (it is replaced only by a
                    // complete new one), the age gauge keeps growing for the alert, and the
                    // next interval retries.
                    match write_checkpoint(&running.runtimes, dir).await {
                        Ok(()) => last_checkpoint = Instant::now(),
                        Err(e) => {
                            shared.metrics.checkpoint_failures.inc();
                            error!(error = %e, dir = %dir.display(), "checkpoint failed; keeping the last good one and retrying at the next interval");
                        }
                    }
                }
            }
            _ = &mut shutdown => {
                info!("signal received, shutting down");
                return Ok(None);
            }
            _ = &mut deadline => {
                info!("--duration reached, shutting down");
                return Ok(None);
            }
            event = running.events.recv() => match event {
                Some(WorkerEvent::Ended(name)) => {
                    info!(stream = %name, "bounded source exhausted");
                    ended += 1;
                    if ended == running.bounded && running.bounded == running.streams {
                        return Ok(None);
                    }
                }
                Some(WorkerEvent::Failed(name, e)) => {
                    error!(stream = %name, error = %e, "stream failed");
                    return Ok(Some(e));
                }
                None => {}
            },
        }
    }
}

/// An interval whose first (immediate) tick is taken, and which skips the ticks a slow
/// round missed instead of bursting to catch up.
async fn interval(period: Duration) -> tokio::time::Interval {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    tick.tick().await;
    tick
}

/// Captures every stream's panes and position (each under its store's lock), then encodes
/// and writes them off the runtime's worker threads. No privacy ledger: it lives in the
/// ledger file, apart from this recoverable state.
pub(super) async fn write_checkpoint(
    runtimes: &[Arc<StreamRuntime>],
    dir: &Path,
) -> Result<(), Error> {
    let parts: Vec<StreamCheckpoint> = runtimes
        .iter()
        .map(|rt| {
            let state = rt.state();
            let mut part =
                StreamCheckpoint::capture(&rt.config.name, &state.store, state.position.clone());
            part.settings = Some(settings_of(&rt.config));
            part.latches = state.sequential.entries();
            part
        })
        .collect();
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || checkpoint::write(&dir, &parts))
        .await
        .map_err(|source| Error::Task {
            what: "checkpoint",
            source,
        })??;
    Ok(())
}

/// Copies every stream's due windows (short lock), evaluates them off the runtime's
/// worker threads, and publishes the records to the sinks, the metrics and the API.
/// Budgeted streams spend from the ledger file as read under its lock, which is held
/// until the spends are saved (another process may spend from the same file).
pub(super) async fn snapshot_round(
    runtimes: &[Arc<StreamRuntime>],
    shared: &Arc<Shared>,
    sinks: &mut Sinks,
    provisional: bool,
    ledger: Option<&LedgerFile>,
) -> Result<(), Error> {
    let evaluated = runtimes.to_vec();
    let for_eval = shared.clone();
    let ledger = ledger
        .filter(|_| runtimes.iter().any(|rt| rt.config.budget_epsilon.is_some()))
        .cloned();
    let (records, spends) = tokio::task::spawn_blocking(
        move || -> Result<(Vec<TestRecord>, Option<LockedLedger>), Error> {
            // Locked at the first budgeted stream, so that the streams before it do not
            // hold up another process's spends.
            let mut locked: Option<LockedLedger> = None;
            let mut records = Vec::new();
            let mut spent = false;
            for rt in &evaluated {
                let t0 = Instant::now();
                let entry = match (&ledger, rt.config.budget_epsilon) {
                    (Some(file), Some(_)) => {
                        if locked.is_none() {
                            locked = Some(file.lock()?);
                        }
                        let name = rt.config.name.as_str();
                        locked.as_mut().map(|l| entry_of(l, name)).transpose()?
                    }
                    _ => None,
                };
                spent |= evaluate_stream(rt, &for_eval, provisional, entry, &mut records)?;
                for_eval
                    .metrics
                    .snapshot_seconds
                    .observe(t0.elapsed().as_secs_f64());
            }
            Ok((records, locked.filter(|_| spent)))
        },
    )
    .await
    .map_err(|source| Error::Task {
        what: "snapshot",
        source,
    })??;
    // Write ahead: the spends are on disk (fsynced) before any record that used them is
    // published, so a crash right after a release cannot give the budget back.
    // File writes, the ledger's fsync and the Kafka sink's wait for acknowledgements
    // block: let the runtime move its other tasks (HTTP) off this worker meanwhile.
    tokio::task::block_in_place(|| {
        spend_then_publish(spends, || {
            shared.publish(&records);
            let now = unix_millis();
            {
                let mut rates = shared.rates.lock().unwrap_or_else(|p| p.into_inner());
                for rt in runtimes {
                    let name = &rt.config.name;
                    rates.observe(name, now, shared.metrics.stream_counts(name).reports);
                }
            }
            Ok(sinks.write(&records)?)
        })
        .map_err(Error::from)
    })
}

/// A budgeted stream's ledger in the file as just read. Startup wrote one for every
/// budgeted stream; one gone since (the file replaced or edited) is refused rather than
/// started afresh, which would give the budget back.
fn entry_of<'a>(locked: &'a mut LockedLedger, stream: &str) -> Result<&'a mut LedgerEntry, Error> {
    let path = locked.path().display().to_string();
    locked.book.streams.get_mut(stream).ok_or_else(|| {
        Error::Jobs(JobsError::Ledger {
            path,
            message: format!(
                "stream {stream:?} has no ledger in it any more, although serve opened one \
                 there at startup: the file was replaced or edited; refusing to spend from a \
                 fresh budget (restore the file, then restart serve)"
            ),
        })
    })
}

/// Takes one stream's looks and due windows, tests them into `records`, spending from
/// `ledger` (its entry in the ledger file, budgeted streams only). Returns whether the
/// ledger spent anything (the file must be saved).
fn evaluate_stream(
    rt: &StreamRuntime,
    shared: &Shared,
    provisional: bool,
    ledger: Option<&mut LedgerEntry>,
    records: &mut Vec<TestRecord>,
) -> Result<bool, Error> {
    // Copy under the lock, evaluate outside it: a fold never waits for a test.
    let (looks, due) = {
        let mut state = rt.state();
        // Looks before the due windows: taking finals retires panes.
        let looks = match state.store.watermark() {
            Some(wm) if rt.config.tests.iter().any(|t| t.looks.is_some()) => {
                let looks = take_looks(&rt.config, &state.store, state.looked_through, wm)?;
                state.looked_through = Some(wm);
                looks
            }
            _ => Vec::new(),
        };
        let due = take_due(&rt.config, &mut state.store, provisional)?;
        (looks, due)
    };
    let before = ledger.as_ref().map(|e| e.ledger.spends.len());
    let mut noise = ldpstream_engine::curator::secure_rng();
    let mut private = Private {
        ledger: ledger.map(|e| &mut e.ledger),
        noise: &mut noise,
    };
    let mut stream_records = Vec::new();
    for look in &looks {
        stream_records.extend(evaluate_look(
            &rt.config,
            &rt.mechanism,
            look,
            &mut private,
            &RayonGroups,
        )?);
    }
    for snapshot in &due {
        stream_records.extend(evaluate_snapshot(
            &rt.config,
            &rt.mechanism,
            snapshot,
            &mut private,
            &RayonGroups,
        )?);
    }
    rt.state().sequential.observe(&mut stream_records);
    records.extend(stream_records);
    let Some(l) = private.ledger else {
        return Ok(false);
    };
    shared
        .metrics
        .budget_remaining
        .with_label_values(&[rt.config.name.as_str()])
        .set(l.remaining_overall());
    Ok(before != Some(l.spends.len()))
}

/// Resolves at the first SIGINT or SIGTERM.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
