//! `ldpstream serve`: the long-running service.
//!
//! Per stream, a source thread decodes batches and a fold thread folds each one into a
//! per-pane delta *outside* any lock, then merges the delta into the stream's
//! [`PaneStore`] under a short lock. The tokio scheduler ticks every `snapshot_interval`,
//! copies the due windows under the same short lock and evaluates the tests on the copies,
//! so a snapshot never waits for a fold and a fold never waits for a test.

pub mod checkpoint;
mod events;
mod fold_counters;
mod group_labels;
mod history;
mod http;
mod https;
mod metrics;
mod rate;
mod scale_out;
mod shared;
mod state_dir;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ldpstream_config::{Config, SourceConfig, StateLocation, StreamConfig};
use ldpstream_connectors::{Position, Sinks, Source, SourceBatch};
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::record::TestRecord;
use ldpstream_engine::stream::{
    evaluate_look, evaluate_snapshot, fold_paned_batch, stream_pane_width, take_due, take_looks,
    PanedDelta, Private, ReportLayout, SequentialLatches,
};
use ldpstream_engine::window::PaneStore;
use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;
use tracing::{error, info, warn};

use group_labels::GroupLabels;
pub use metrics::Metrics;
pub use shared::Shared;

use crate::error::Error;
use crate::ledger_file::{
    check_reset_names, input_fingerprint, open_ledger, LedgerBook, LedgerEntry,
    BOOK_VERSION as LEDGER_BOOK_VERSION,
};
use checkpoint::StreamCheckpoint;
use fold_counters::{export_fold, rejected_counts};
use history::unix_millis;
use history::History;
use rate::ReportRates;
use shared::StreamInfo;

/// How long open HTTP connections may delay the exit once the service stops.
const HTTP_SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// Command-line overrides of the config's `[serve]` table.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Stop (as on SIGTERM) after this long.
    pub duration: Option<Duration>,
    /// Replaces `serve.listen`.
    pub listen: Option<String>,
    /// Streams whose privacy ledgers start afresh (`--reset-ledger`).
    pub reset_ledgers: Vec<String>,
    /// Where the checkpoint lives (`Config::state_location`), resolved against the config
    /// file's path, which only the caller knows.
    pub state: StateLocation,
}

/// What changes together and is checkpointed together: the panes, where the source had
/// got to when they last changed, and (curator-model streams) the privacy-budget ledger.
struct StreamState {
    store: PaneStore,
    position: Position,
    ledger: Option<LedgerEntry>,
    /// Sequential tests: each open window's running maximum e-value and rejection latch.
    /// Not checkpointed: the e-values are recomputed exactly from the restored sketches;
    /// a restart forgets only a latch whose window's e-value has since fallen back.
    sequential: SequentialLatches,
    /// The watermark through which event-time looks (the window key `looks`) were taken.
    /// Starts at the restored watermark: looks before it were published before the
    /// checkpoint (those between it and a crash are published again, like other records).
    looked_through: Option<i64>,
}

/// One stream, shared by its fold thread, the scheduler and the HTTP handlers.
struct StreamRuntime {
    config: StreamConfig,
    mechanism: Mechanism,
    layout: ReportLayout,
    state: Mutex<StreamState>,
}

impl StreamRuntime {
    fn state(&self) -> MutexGuard<'_, StreamState> {
        // A fold thread that panicked mid-merge is a bug; the state is still the best
        // there is, so keep serving it.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What a stream's worker reports to the scheduler.
enum WorkerEvent {
    /// A bounded source delivered all its input; every window of the stream is closed.
    Ended(String),
    Failed(String, Error),
}

/// Runs the service until SIGINT/SIGTERM, `options.duration`, or (when every source is
/// bounded) the end of input. On the way out it stops the sources, lets each fold thread
/// finish its in-flight batch, and emits a last round of results.
pub async fn run(config: Config, options: ServeOptions) -> Result<(), Error> {
    check_reset_names(&config, &options.reset_ledgers)?;
    let started = Instant::now();
    let metrics = Metrics::new(GroupLabels::new(
        config
            .streams
            .iter()
            .flat_map(|s| s.columns.group_by.iter().map(String::as_str)),
    ))?;
    // Curator-model streams export no report counters at all (their counts are not private).
    metrics.export_zeros(
        config
            .streams
            .iter()
            .filter(|s| !s.has_private_tests())
            .map(|s| s.name.as_str()),
    );
    let shared = Arc::new(Shared {
        metrics: metrics.clone(),
        results: Mutex::new(BTreeMap::new()),
        history: Mutex::new(History::default()),
        rates: Mutex::new(ReportRates::default()),
        streams: Mutex::new(Vec::new()),
        ready: AtomicBool::new(false),
        connecting: AtomicUsize::new(
            config
                .streams
                .iter()
                .filter(|s| matches!(s.source, SourceConfig::Kafka(_)))
                .count(),
        ),
        unreachable: AtomicUsize::new(0),
    });
    let listen = options
        .listen
        .clone()
        .unwrap_or_else(|| config.serve.listen.clone());
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .map_err(|source| Error::Listen {
            address: listen.clone(),
            source,
        })?;
    let local = listener.local_addr().map_err(|source| Error::Listen {
        address: listen.clone(),
        source,
    })?;
    let token = match &config.serve.auth_token_env {
        Some(variable) => match std::env::var(variable) {
            Ok(t) if !t.trim().is_empty() => Some(t),
            Ok(_) => {
                return Err(Error::AuthToken {
                    variable: variable.clone(),
                    message: "is empty".into(),
                })
            }
            Err(e) => {
                return Err(Error::AuthToken {
                    variable: variable.clone(),
                    message: e.to_string(),
                })
            }
        },
        None => None,
    };
    if token.is_none() && !local.ip().is_loopback() {
        if !config.serve.allow_unauthenticated {
            return Err(Error::Unauthenticated {
                address: local.to_string(),
            });
        }
        warn!(
            %local,
            "HTTP is served on a non-loopback address without a token \
             (serve.allow_unauthenticated = true): anyone who can reach it can read every result"
        );
    }
    let tls = config.serve.tls.as_ref().map(https::acceptor).transpose()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    // Tests and scripts read this line to find the port when `listen` ends in `:0`.
    eprintln!("ldpstream serve: listening on {scheme}://{local}");
    info!(%local, scheme, "HTTP endpoint up");
    let (http_stop_tx, http_stop_rx) = tokio::sync::oneshot::channel::<()>();
    let http = tokio::spawn({
        let app = http::router(shared.clone(), token);
        let stop = async move {
            let _ = http_stop_rx.await;
        };
        async move {
            match tls {
                Some(acceptor) => https::serve(listener, acceptor, app, stop).await,
                None => {
                    let served = axum::serve(listener, app)
                        .with_graceful_shutdown(stop)
                        .await;
                    if let Err(e) = served {
                        error!(error = %e, "HTTP server stopped");
                    }
                }
            }
        }
    });

    let stop = Arc::new(AtomicBool::new(false));
    let (events_tx, mut events) = mpsc::unbounded_channel::<WorkerEvent>();
    let checkpoint_dir = options.state.dir().map(Path::to_path_buf);
    // Held until serve returns: a second instance on the same directory is refused.
    let _state_lock = match &checkpoint_dir {
        Some(dir) => Some(state_dir::prepare(dir, &options.state)?),
        None => None,
    };
    let mut restored: BTreeMap<String, StreamCheckpoint> = match &checkpoint_dir {
        Some(dir) => checkpoint::read_latest(dir)?
            .unwrap_or_default()
            .into_iter()
            .map(|s| (s.name.clone(), s))
            .collect(),
        None => BTreeMap::new(),
    };
    if !restored.is_empty() {
        info!(streams = restored.len(), "restoring the checkpoint");
    }
    let ck_path = checkpoint_path(&checkpoint_dir);
    let journal: Option<PathBuf> = checkpoint_dir.as_ref().map(|d| d.join(LEDGER_JOURNAL));
    // Every kept ledger, also of streams the config no longer has: a renamed stream must
    // not start a fresh budget over the same input.
    let mut known_ledgers: BTreeMap<String, LedgerEntry> = restored
        .iter()
        .filter_map(|(name, ck)| Some((name.clone(), ck.ledger.clone()?)))
        .collect();
    // The ledger journal is written before every private release, the checkpoint only
    // every checkpoint_interval: after a crash the journal may know spends the checkpoint
    // does not. Both grow by appending spends, so the longer one is the newer.
    if let Some(dir) = &checkpoint_dir {
        let journal = LedgerBook::load(&dir.join(LEDGER_JOURNAL))?;
        for (name, entry) in journal.streams {
            let newer = known_ledgers
                .get(&name)
                .is_none_or(|k| k.ledger.spends.len() < entry.ledger.spends.len());
            if newer {
                info!(stream = %name, spends = entry.ledger.spends.len(), "privacy ledger from the journal (newer than the checkpoint)");
                known_ledgers.insert(name, entry);
            }
        }
    }
    for stream in &config.streams {
        if stream.has_private_tests() && checkpoint_dir.is_none() {
            warn!(
                stream = %stream.name,
                "private tests with the state in memory: the privacy ledger is lost on a \
                 restart, which starts the budget afresh"
            );
        }
    }
    state_dir::log_where_state_lives(&config, &options.state, !restored.is_empty());
    let mut runtimes = Vec::new();
    let mut threads = Vec::new();
    let mut bounded = 0usize;
    for stream in &config.streams {
        let mechanism = Mechanism::from_config(&stream.mechanism)?;
        let layout = ReportLayout::of(stream, &mechanism);
        shared.metrics.observe_nulls(stream, mechanism.domain());
        shared
            .streams
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(StreamInfo::of(stream, mechanism.domain()));
        if let SourceConfig::Kafka(kafka) = &stream.source {
            if let Some(scale_out) = &kafka.scale_out {
                // Its state is in Kafka, not in this instance's checkpoint.
                let events = events_tx.clone();
                threads.extend(scale_out::spawn(
                    stream,
                    kafka,
                    scale_out,
                    stop.clone(),
                    shared.clone(),
                    config.serve.snapshot_interval.as_std(),
                    move |name, e| {
                        let _ = events.send(WorkerEvent::Failed(name, e));
                    },
                )?);
                continue;
            }
        }
        let width = stream_pane_width(stream);
        let lateness = stream.allowed_lateness.millis() as i64;
        if let Some(Some(old)) = restored.get(&stream.name).map(|ck| &ck.settings) {
            if let Some(changes) =
                checkpoint::describe_changes(&stream.name, old, &checkpoint::settings_of(stream))
            {
                return Err(Error::CheckpointConflict {
                    path: ck_path.clone(),
                    message: format!(
                        "{changes}. The checkpointed sketches were counted under the old \
                         settings and cannot be merged with reports under the new ones: restore \
                         the old settings, or move {ck_path} aside to start every stream from \
                         scratch (this also discards the streams' privacy ledgers)"
                    ),
                });
            }
        } else if restored.contains_key(&stream.name) {
            warn!(
                stream = %stream.name,
                "the checkpoint predates settings fingerprints (format version < 3): cannot \
                 check that the stream's mechanism, columns and windows are unchanged"
            );
        }
        let ledger = open_ledger(
            &known_ledgers,
            stream,
            &input_fingerprint(stream, &[]),
            &options.reset_ledgers,
            &ck_path,
        )?;
        let (store, position) = match restored.remove(&stream.name) {
            Some(ck) if ck.pane_width != width => {
                return Err(Error::Checkpoint {
                    path: checkpoint_path(&checkpoint_dir),
                    message: format!(
                        "stream {:?} was checkpointed with {} ms panes but the config now gives {} ms \
                         (its window sizes changed); move the checkpoint aside to start over",
                        stream.name, ck.pane_width, width
                    ),
                });
            }
            Some(ck) => {
                info!(stream = %stream.name, position = ?ck.position, "restored");
                (
                    PaneStore::restore(width, lateness, stream.max_groups, ck.panes)?,
                    ck.position,
                )
            }
            None => (
                PaneStore::new(width, lateness).with_max_groups(stream.max_groups),
                Position::Start,
            ),
        };
        let rt = Arc::new(StreamRuntime {
            config: stream.clone(),
            mechanism,
            layout,
            state: Mutex::new(StreamState {
                looked_through: store.watermark(),
                store,
                position,
                ledger,
                sequential: SequentialLatches::default(),
            }),
        });
        if Source::is_bounded(&stream.source) {
            bounded += 1;
        }
        threads.extend(spawn_stream(
            rt.clone(),
            started,
            stop.clone(),
            shared.clone(),
            events_tx.clone(),
        )?);
        runtimes.push(rt);
    }
    drop(events_tx);
    for name in restored.keys() {
        warn!(stream = %name, "the checkpoint has a stream the config does not; ignoring it");
    }
    // A removed stream's privacy ledger is carried from checkpoint to checkpoint: dropping
    // it would let a stream added later over the same input start a fresh budget.
    let orphans: Vec<StreamCheckpoint> = restored
        .into_values()
        .filter(|ck| ck.ledger.is_some())
        .collect();
    shared.ready.store(true, Ordering::Release);
    let mut last_checkpoint = Instant::now();
    let mut checkpoint_tick = tokio::time::interval(config.serve.checkpoint_interval.as_std());
    checkpoint_tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    checkpoint_tick.tick().await;

    let mut sinks = Sinks::open(&config.serve.sinks)?;
    let mut tick = tokio::time::interval(config.serve.snapshot_interval.as_std());
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    tick.tick().await;
    let deadline = async {
        match options.duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline);
    // Registered once: a signal that arrives while a snapshot round runs is not lost.
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    let mut ended = 0usize;
    let mut failure = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                snapshot_round(&runtimes, &shared, &mut sinks, true, journal.as_deref()).await?;
                if checkpoint_dir.is_some() {
                    shared.metrics.checkpoint_age.set(last_checkpoint.elapsed().as_secs_f64());
                }
            }
            _ = checkpoint_tick.tick(), if checkpoint_dir.is_some() => {
                if let Some(dir) = &checkpoint_dir {
                    // A full disk or a failing volume must not take the service down in a
                    // crash loop: the last good checkpoint stays (it is replaced only by a
                    // complete new one), the age gauge keeps growing for the alert, and the
                    // next interval retries.
                    match write_checkpoint(&runtimes, &orphans, dir).await {
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
                break;
            }
            _ = &mut deadline => {
                info!("--duration reached, shutting down");
                break;
            }
            event = events.recv() => match event {
                Some(WorkerEvent::Ended(name)) => {
                    info!(stream = %name, "bounded source exhausted");
                    ended += 1;
                    if ended == bounded && bounded == runtimes.len() {
                        break;
                    }
                }
                Some(WorkerEvent::Failed(name, e)) => {
                    error!(stream = %name, error = %e, "stream failed");
                    failure = Some(e);
                    break;
                }
                None => {}
            },
        }
    }
    stop.store(true, Ordering::Release);
    let joined = tokio::task::spawn_blocking(move || {
        for t in threads {
            if t.join().is_err() {
                warn!("a source or fold thread panicked");
            }
        }
    })
    .await;
    if joined.is_err() {
        warn!("joining the stream threads failed");
    }
    snapshot_round(&runtimes, &shared, &mut sinks, true, journal.as_deref()).await?;
    sinks.close()?;
    if let Some(dir) = &checkpoint_dir {
        if failure.is_none() {
            write_checkpoint(&runtimes, &orphans, dir).await?;
        }
    }
    let _ = http_stop_tx.send(());
    // Graceful shutdown waits for open connections; a client that never finishes its
    // request must not keep the service alive past SIGTERM or --duration.
    let http_abort = http.abort_handle();
    if tokio::time::timeout(HTTP_SHUTDOWN_GRACE, http)
        .await
        .is_err()
    {
        warn!(
            grace = ?HTTP_SHUTDOWN_GRACE,
            "HTTP connections still open after the shutdown grace period; closing them"
        );
        http_abort.abort();
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The privacy-ledger journal in the checkpoint directory, written before every private
/// release (`batch`'s ledger file format).
const LEDGER_JOURNAL: &str = "ledgers.json";

fn checkpoint_path(dir: &Option<PathBuf>) -> String {
    dir.as_ref().map_or_else(String::new, |d| {
        d.join(checkpoint::FILE_NAME).display().to_string()
    })
}

/// Captures every stream's panes and position (each under its store's lock), then encodes
/// and writes them off the runtime's worker threads.
async fn write_checkpoint(
    runtimes: &[Arc<StreamRuntime>],
    orphans: &[StreamCheckpoint],
    dir: &std::path::Path,
) -> Result<(), Error> {
    let mut parts: Vec<StreamCheckpoint> = runtimes
        .iter()
        .map(|rt| {
            let state = rt.state();
            let mut part =
                StreamCheckpoint::capture(&rt.config.name, &state.store, state.position.clone());
            part.ledger = state.ledger.clone();
            part.settings = Some(checkpoint::settings_of(&rt.config));
            part
        })
        .collect();
    parts.extend(orphans.iter().cloned());
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let bytes = checkpoint::encode(&parts);
        checkpoint::write_atomically(&dir, &bytes)
    })
    .await
    .map_err(|source| Error::Task {
        what: "checkpoint",
        source,
    })??;
    Ok(())
}

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

/// Starts a stream's source and fold threads.
fn spawn_stream(
    rt: Arc<StreamRuntime>,
    started: Instant,
    stop: Arc<AtomicBool>,
    shared: Arc<Shared>,
    events: mpsc::UnboundedSender<WorkerEvent>,
) -> Result<Vec<std::thread::JoinHandle<()>>, Error> {
    let metrics = shared.metrics.clone();
    // A few batches of slack: enough to hide jitter, small enough that a stop is prompt.
    let (tx, rx) = sync_channel::<SourceBatch>(4);
    let resume = rt.state().position.clone();
    let name = rt.config.name.clone();
    let observer = Arc::new(events::StreamEvents::new(&name, shared.clone()));
    let source = Source::open(&rt.config, &rt.layout, resume, started, observer)?;
    let thread_err = |source| Error::Thread {
        what: format!("thread for stream {name}"),
        source,
    };
    let source = {
        let (stop, events, name) = (stop.clone(), events.clone(), name.clone());
        std::thread::Builder::new()
            .name(format!("source-{name}"))
            .spawn(move || {
                if let Err(e) = source.run(&stop, &tx) {
                    let _ = events.send(WorkerEvent::Failed(name, e.into()));
                }
            })
            .map_err(thread_err)?
    };
    let bounded = Source::is_bounded(&rt.config.source);
    let fold = std::thread::Builder::new()
        .name(format!("fold-{name}"))
        .spawn(move || {
            // The receiver drains every batch already sent, so the in-flight batch is
            // always finished before the thread exits.
            for batch in rx {
                if let Err(e) = fold_one(&rt, &metrics, batch) {
                    let _ = events.send(WorkerEvent::Failed(rt.config.name.clone(), e));
                    return;
                }
            }
            if bounded && !stop.load(Ordering::Acquire) {
                rt.state().store.finish();
                let _ = events.send(WorkerEvent::Ended(rt.config.name.clone()));
            }
        })
        .map_err(thread_err)?;
    Ok(vec![source, fold])
}

/// Folds one batch into a delta without holding the store's lock, then merges it.
fn fold_one(rt: &StreamRuntime, metrics: &Metrics, source: SourceBatch) -> Result<(), Error> {
    let batch = &source.batch;
    // Only this thread advances the watermark, so a copy taken now stays exact until the
    // merge below.
    let view = rt.state().store.watermark_view();
    let mut delta = PanedDelta::default();
    let origin = format!("stream {}", rt.config.name);
    fold_paned_batch(
        batch,
        &rt.layout,
        &origin,
        Some(rt.layout.ts.as_str()),
        &|t| view.open_pane_of(t),
        &mut delta,
    )?;
    let rejected = rejected_counts(&delta);
    let late = delta.late;
    let (groups_kept, overflow_reports) = {
        let mut state = rt.state();
        let overflowed_reports = state.store.overflowed_reports();
        delta.apply(&mut state.store)?;
        if overflowed_reports == 0 && state.store.overflowed_reports() > 0 {
            warn!(
                stream = %rt.config.name,
                max_groups = rt.config.max_groups,
                "the stream has more groups than max_groups; reports of new groups are folded \
                 into the \"__other__\" group"
            );
        }
        state.position.advance(source.position);
        (
            state.store.groups_kept(),
            state.store.overflowed_reports() - overflowed_reports,
        )
    };
    // A curator-model stream's raw counts are not differentially private: its report,
    // late and rejected counters are not exported at all (README, metrics).
    if rt.config.has_private_tests() {
        return Ok(());
    }
    export_fold(
        metrics,
        &rt.config.name,
        batch.num_rows() as u64,
        late,
        &rejected,
        groups_kept,
        overflow_reports,
    );
    Ok(())
}

/// Copies every stream's due windows (short lock), evaluates them off the runtime's
/// worker threads, and publishes the records to the sinks, the metrics and the API.
async fn snapshot_round(
    runtimes: &[Arc<StreamRuntime>],
    shared: &Arc<Shared>,
    sinks: &mut Sinks,
    provisional: bool,
    journal: Option<&Path>,
) -> Result<(), Error> {
    let names: Vec<String> = runtimes.iter().map(|rt| rt.config.name.clone()).collect();
    let runtimes: Vec<Arc<StreamRuntime>> = runtimes.to_vec();
    let journal_runtimes = runtimes.clone();
    let shared_for_eval = shared.clone();
    let (records, spent) =
        tokio::task::spawn_blocking(move || -> Result<(Vec<TestRecord>, bool), Error> {
            let mut records = Vec::new();
            let mut spent = false;
            for rt in &runtimes {
                let t0 = Instant::now();
                // Copy under the lock, evaluate outside it: a fold never waits for a test.
                // Only this task changes the ledger, so the copy is written back unchanged by
                // anyone else.
                let (looks, due, mut ledger) = {
                    let mut state = rt.state();
                    // Looks before the due windows: taking finals retires panes.
                    let looks = match state.store.watermark() {
                        Some(wm) if rt.config.tests.iter().any(|t| t.looks.is_some()) => {
                            let looks =
                                take_looks(&rt.config, &state.store, state.looked_through, wm)?;
                            state.looked_through = Some(wm);
                            looks
                        }
                        _ => Vec::new(),
                    };
                    let due = take_due(&rt.config, &mut state.store, provisional)?;
                    (looks, due, state.ledger.clone())
                };
                let mut noise = ldpstream_engine::curator::secure_rng();
                let mut private = Private {
                    ledger: ledger.as_mut().map(|e| &mut e.ledger),
                    noise: &mut noise,
                };
                let mut stream_records = Vec::new();
                for look in &looks {
                    stream_records.extend(evaluate_look(
                        &rt.config,
                        &rt.mechanism,
                        look,
                        &mut private,
                    )?);
                }
                for snapshot in &due {
                    stream_records.extend(evaluate_snapshot(
                        &rt.config,
                        &rt.mechanism,
                        snapshot,
                        &mut private,
                    )?);
                }
                rt.state().sequential.observe(&mut stream_records);
                records.extend(stream_records);
                if let Some(l) = ledger {
                    spent |= rt.state().ledger.as_ref() != Some(&l);
                    shared_for_eval
                        .metrics
                        .budget_remaining
                        .with_label_values(&[rt.config.name.as_str()])
                        .set(l.ledger.remaining_overall());
                    rt.state().ledger = Some(l);
                }
                shared_for_eval
                    .metrics
                    .snapshot_seconds
                    .observe(t0.elapsed().as_secs_f64());
            }
            Ok((records, spent))
        })
        .await
        .map_err(|source| Error::Task {
            what: "snapshot",
            source,
        })??;
    // Write ahead: the spends are on disk (fsynced) before any record that used them is
    // published, so a crash right after a release cannot give the budget back.
    if let (true, Some(path)) = (spent, journal) {
        let book = LedgerBook {
            version: LEDGER_BOOK_VERSION,
            streams: journal_runtimes
                .iter()
                .filter_map(|rt| Some((rt.config.name.clone(), rt.state().ledger.clone()?)))
                .collect(),
        };
        tokio::task::block_in_place(|| -> Result<(), Error> {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|source| {
                    Error::Connector(ldpstream_connectors::ConnectorError::Io {
                        path: parent.display().to_string(),
                        source,
                    })
                })?;
            }
            book.save(path)
        })?;
    }
    shared.publish(&records);
    let now = unix_millis();
    {
        let mut rates = shared.rates.lock().unwrap_or_else(|p| p.into_inner());
        for name in &names {
            rates.observe(name, now, shared.metrics.stream_counts(name).reports);
        }
    }
    // File writes, and the Kafka sink's wait for acknowledgements, block: let the runtime
    // move its other tasks (HTTP) off this worker meanwhile.
    tokio::task::block_in_place(|| sinks.write(&records))?;
    Ok(())
}
