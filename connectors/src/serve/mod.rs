//! `ldpstream serve`: the long-running service.
//!
//! Per stream, a source thread decodes batches and a fold thread folds each one into a
//! per-pane delta *outside* any lock, then merges the delta into the stream's
//! [`PaneStore`] under a short lock. The tokio scheduler ticks every `snapshot_interval`,
//! copies the due windows under the same short lock and evaluates the tests on the copies,
//! so a snapshot never waits for a fold and a fold never waits for a test.

mod checkpoint;
mod dead_letter;
mod http;
mod kafka;
mod kafka_client;
mod kafka_group;
mod metrics;
mod replay;
mod simulator;
mod sink_kafka;
mod sink_parquet;
mod sinks;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use arrow::record_batch::RecordBatch;
use ldpstream_config::{Config, SourceConfig, StreamConfig};
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::record::TestRecord;
use ldpstream_engine::sketch::RejectReason;
use ldpstream_engine::window::PaneStore;
use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;
use tracing::{error, info, warn};

pub use metrics::{group_label, Metrics};

use crate::batch::layout;
use crate::error::ConnectorError;
use crate::paned::{fold_paned_batch, PanedDelta};
use crate::parquet_in::{inspect, resolve_inputs, ReportLayout};
use crate::windows::{evaluate_snapshot, stream_pane_width, take_due};
use checkpoint::{Position, StreamCheckpoint};
use sinks::Sinks;

/// A decoded batch and the source position just after it.
pub(crate) struct SourceBatch {
    pub batch: RecordBatch,
    /// Absolute positions (e.g. next offset per partition), merged key by key.
    pub position: Position,
}

/// Command-line overrides of the config's `[serve]` table.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// Stop (as on SIGTERM) after this long.
    pub duration: Option<Duration>,
    /// Replaces `serve.listen`.
    pub listen: Option<String>,
}

/// One stream's state, shared by its fold thread, the scheduler and the HTTP handlers.
struct StreamRuntime {
    config: StreamConfig,
    mechanism: Mechanism,
    layout: ReportLayout,
    store: Mutex<PaneStore>,
    /// Where the source had got to when the store last changed; updated under the store's
    /// lock so a checkpoint sees the two together.
    position: Mutex<Position>,
    /// Curator-model streams: the privacy-budget ledger, written into every checkpoint.
    ledger: Mutex<Option<ldpstream_engine::curator::ledger::PrivacyLedger>>,
}

impl StreamRuntime {
    fn store(&self) -> MutexGuard<'_, PaneStore> {
        // A fold thread that panicked mid-merge is a bug; the store is still the best
        // state there is, so keep serving it.
        self.store.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn position(&self) -> MutexGuard<'_, Position> {
        self.position.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// State the HTTP handlers read.
pub struct Shared {
    metrics: Metrics,
    /// Newest record per (stream, test, group label).
    results: Mutex<BTreeMap<(String, String, String), TestRecord>>,
    /// The checkpoint (if any) is restored and every stream's threads are running.
    ready: AtomicBool,
    /// Sources still connecting (a Kafka source counts down once its partitions are
    /// assigned); `/readyz` answers 200 only when this is 0 and `ready` is set.
    connecting: AtomicUsize,
}

impl Shared {
    fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire) && self.connecting.load(Ordering::Acquire) == 0
    }
}

/// What a stream's worker reports to the scheduler.
enum WorkerEvent {
    /// A bounded source delivered all its input; every window of the stream is closed.
    Ended(String),
    Failed(String, ConnectorError),
}

/// Runs the service until SIGINT/SIGTERM, `options.duration`, or (when every source is
/// bounded) the end of input. On the way out it stops the sources, lets each fold thread
/// finish its in-flight batch, and emits a last round of results.
pub async fn run(config: Config, options: ServeOptions) -> Result<(), ConnectorError> {
    let started = Instant::now();
    let metrics =
        Metrics::new().map_err(|e| ConnectorError::Invalid(format!("metrics registry: {e}")))?;
    let shared = Arc::new(Shared {
        metrics: metrics.clone(),
        results: Mutex::new(BTreeMap::new()),
        ready: AtomicBool::new(false),
        connecting: AtomicUsize::new(
            config
                .streams
                .iter()
                .filter(|s| matches!(s.source, SourceConfig::Kafka(_)))
                .count(),
        ),
    });
    let listen = options
        .listen
        .clone()
        .unwrap_or_else(|| config.serve.listen.clone());
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .map_err(|source| ConnectorError::Io {
            path: format!("listen address {listen}"),
            source,
        })?;
    let local = listener.local_addr().map_err(|source| ConnectorError::Io {
        path: format!("listen address {listen}"),
        source,
    })?;
    // Tests and scripts read this line to find the port when `listen` ends in `:0`.
    eprintln!("ldpstream serve: listening on http://{local}");
    info!(%local, "HTTP endpoint up");
    let (http_stop_tx, http_stop_rx) = tokio::sync::oneshot::channel::<()>();
    let http = tokio::spawn({
        let app = http::router(shared.clone());
        async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = http_stop_rx.await;
                })
                .await;
            if let Err(e) = served {
                error!(error = %e, "HTTP server stopped");
            }
        }
    });

    let stop = Arc::new(AtomicBool::new(false));
    let (events_tx, mut events) = mpsc::unbounded_channel::<WorkerEvent>();
    let checkpoint_dir = config.serve.checkpoint_dir.as_ref().map(PathBuf::from);
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
    let mut runtimes = Vec::new();
    let mut threads = Vec::new();
    let mut bounded = 0usize;
    for stream in &config.streams {
        let mechanism = Mechanism::from_config(&stream.mechanism)?;
        let layout = layout(stream, &mechanism);
        let width = stream_pane_width(stream);
        let lateness = stream.allowed_lateness.millis() as i64;
        let mut restored_ledger = None;
        let (store, position) = match restored.remove(&stream.name) {
            Some(ck) if ck.pane_width != width => {
                return Err(ConnectorError::Checkpoint {
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
                restored_ledger = ck.ledger;
                (PaneStore::restore(width, lateness, ck.panes)?, ck.position)
            }
            None => (PaneStore::new(width, lateness), Position::new()),
        };
        let rt = Arc::new(StreamRuntime {
            config: stream.clone(),
            mechanism,
            layout,
            store: Mutex::new(store),
            position: Mutex::new(position),
            // The config's budget applies; the spends carry over from the checkpoint.
            ledger: Mutex::new(stream.budget_epsilon.map(|budget| {
                let mut l = restored_ledger.unwrap_or_else(|| {
                    ldpstream_engine::curator::ledger::PrivacyLedger::new(budget)
                });
                l.budget = budget;
                l
            })),
        });
        if is_bounded(&stream.source) {
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
                snapshot_round(&runtimes, &shared, &mut sinks, true).await?;
                if checkpoint_dir.is_some() {
                    shared.metrics.checkpoint_age.set(last_checkpoint.elapsed().as_secs_f64());
                }
            }
            _ = checkpoint_tick.tick(), if checkpoint_dir.is_some() => {
                if let Some(dir) = &checkpoint_dir {
                    write_checkpoint(&runtimes, dir).await?;
                    last_checkpoint = Instant::now();
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
    snapshot_round(&runtimes, &shared, &mut sinks, true).await?;
    sinks.close()?;
    if let Some(dir) = &checkpoint_dir {
        if failure.is_none() {
            write_checkpoint(&runtimes, dir).await?;
        }
    }
    let _ = http_stop_tx.send(());
    let _ = http.await;
    match failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Sources whose input ends: Parquet, and Kafka with end markers.
fn is_bounded(source: &SourceConfig) -> bool {
    match source {
        SourceConfig::Parquet { .. } => true,
        SourceConfig::Kafka(k) => k.end_marker,
        SourceConfig::Simulator(_) => false,
    }
}

fn checkpoint_path(dir: &Option<PathBuf>) -> String {
    dir.as_ref().map_or_else(String::new, |d| {
        d.join(checkpoint::FILE_NAME).display().to_string()
    })
}

/// Captures every stream's panes and position (each under its store's lock), then encodes
/// and writes them off the runtime's worker threads.
async fn write_checkpoint(
    runtimes: &[Arc<StreamRuntime>],
    dir: &std::path::Path,
) -> Result<(), ConnectorError> {
    let parts: Vec<StreamCheckpoint> = runtimes
        .iter()
        .map(|rt| {
            let store = rt.store();
            let position = rt.position().clone();
            let mut part = StreamCheckpoint::capture(&rt.config.name, &store, position);
            part.ledger = rt.ledger.lock().unwrap_or_else(|p| p.into_inner()).clone();
            part
        })
        .collect();
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let bytes = checkpoint::encode(&parts);
        checkpoint::write_atomically(&dir, &bytes)
    })
    .await
    .map_err(|e| ConnectorError::Invalid(format!("checkpoint task failed: {e}")))??;
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
) -> Result<Vec<std::thread::JoinHandle<()>>, ConnectorError> {
    let metrics = shared.metrics.clone();
    // A few batches of slack: enough to hide jitter, small enough that a stop is prompt.
    let (tx, rx) = sync_channel::<SourceBatch>(4);
    let resume = rt.position().clone();
    let name = rt.config.name.clone();
    let source = match &rt.config.source {
        SourceConfig::Simulator(sim) => {
            let (rt, sim, stop, events) = (rt.clone(), sim.clone(), stop.clone(), events.clone());
            std::thread::Builder::new()
                .name(format!("source-{name}"))
                .spawn(move || {
                    let res = simulator::run_simulator(
                        &rt.config,
                        &sim,
                        &rt.mechanism,
                        started,
                        &resume,
                        &stop,
                        &tx,
                    );
                    if let Err(e) = res {
                        let _ = events.send(WorkerEvent::Failed(rt.config.name.clone(), e));
                    }
                })
        }
        SourceConfig::Kafka(kafka) => {
            let (rt, kafka, stop, events, metrics) = (
                rt.clone(),
                kafka.clone(),
                stop.clone(),
                events.clone(),
                metrics.clone(),
            );
            std::thread::Builder::new()
                .name(format!("source-{name}"))
                .spawn(move || {
                    let connected = || {
                        shared.connecting.fetch_sub(1, Ordering::AcqRel);
                    };
                    let res = kafka::run_kafka(
                        &rt.config,
                        &kafka,
                        &rt.mechanism,
                        &resume,
                        &metrics,
                        &connected,
                        &stop,
                        &tx,
                    );
                    match res {
                        Ok(true) => {
                            info!(stream = %rt.config.name, "every partition sent its end marker")
                        }
                        Ok(false) => {}
                        Err(e) => {
                            let _ = events.send(WorkerEvent::Failed(rt.config.name.clone(), e));
                        }
                    }
                })
        }
        SourceConfig::Parquet { paths, rate } => {
            let rate = *rate;
            let files = inspect(&resolve_inputs(paths)?, &rt.layout)?;
            let (rt, stop, events) = (rt.clone(), stop.clone(), events.clone());
            std::thread::Builder::new()
                .name(format!("source-{name}"))
                .spawn(move || {
                    let res = replay::run_replay(
                        &files,
                        &rt.layout,
                        rt.config.max_batch_rows,
                        rate,
                        &resume,
                        &stop,
                        &tx,
                    );
                    match res {
                        Ok(rows) => info!(stream = %rt.config.name, rows, "replay sent every row"),
                        Err(e) => {
                            let _ = events.send(WorkerEvent::Failed(rt.config.name.clone(), e));
                        }
                    }
                })
        }
    }
    .map_err(|source| ConnectorError::Io {
        path: format!("thread for stream {name}"),
        source,
    })?;
    let bounded = is_bounded(&rt.config.source);
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
                rt.store().finish();
                let _ = events.send(WorkerEvent::Ended(rt.config.name.clone()));
            }
        })
        .map_err(|source| ConnectorError::Io {
            path: format!("thread for stream {name}"),
            source,
        })?;
    Ok(vec![source, fold])
}

/// Folds one batch into a delta without holding the store's lock, then merges it.
fn fold_one(
    rt: &StreamRuntime,
    metrics: &Metrics,
    source: SourceBatch,
) -> Result<(), ConnectorError> {
    let batch = &source.batch;
    // Only this thread advances the watermark, so a copy taken now stays exact until the
    // merge below.
    let view = rt.store().watermark_view();
    let mut delta = PanedDelta::default();
    let origin = std::path::PathBuf::from(format!("stream {}", rt.config.name));
    fold_paned_batch(
        batch,
        &rt.layout,
        &origin,
        Some(rt.layout.ts.as_str()),
        &|t| view.open_pane_of(t),
        &mut delta,
    )?;
    let mut rejected = [0u64; RejectReason::COUNT];
    for grouped in delta.panes.values().chain(std::iter::once(&delta.untimed)) {
        for sketch in grouped.values() {
            for (i, reason) in RejectReason::ALL.iter().enumerate() {
                rejected[i] += sketch.rejected().get(*reason);
            }
        }
    }
    {
        let mut store = rt.store();
        delta.apply(&mut store)?;
        rt.position().extend(source.position);
    }
    let name = rt.config.name.as_str();
    metrics
        .reports
        .with_label_values(&[name])
        .inc_by(batch.num_rows() as u64);
    metrics.late.with_label_values(&[name]).inc_by(delta.late);
    for (i, reason) in RejectReason::ALL.iter().enumerate() {
        if rejected[i] > 0 {
            metrics
                .rejected
                .with_label_values(&[name, reason.name()])
                .inc_by(rejected[i]);
        }
    }
    Ok(())
}

/// Copies every stream's due windows (short lock), evaluates them off the runtime's
/// worker threads, and publishes the records to the sinks, the metrics and the API.
async fn snapshot_round(
    runtimes: &[Arc<StreamRuntime>],
    shared: &Arc<Shared>,
    sinks: &mut Sinks,
    provisional: bool,
) -> Result<(), ConnectorError> {
    let runtimes: Vec<Arc<StreamRuntime>> = runtimes.to_vec();
    let shared_for_eval = shared.clone();
    let records =
        tokio::task::spawn_blocking(move || -> Result<Vec<TestRecord>, ConnectorError> {
            let mut records = Vec::new();
            for rt in &runtimes {
                let t0 = Instant::now();
                let due = {
                    let mut store = rt.store();
                    take_due(&rt.config, &mut store, provisional)?
                };
                let mut ledger = rt.ledger.lock().unwrap_or_else(|p| p.into_inner());
                let mut noise = ldpstream_engine::curator::secure_rng();
                let mut private = crate::batch::Private {
                    ledger: ledger.as_mut(),
                    noise: &mut noise,
                };
                for snapshot in &due {
                    records.extend(evaluate_snapshot(
                        &rt.config,
                        &rt.mechanism,
                        snapshot,
                        &mut private,
                    )?);
                }
                if let Some(l) = private.ledger.as_deref() {
                    shared_for_eval
                        .metrics
                        .budget_remaining
                        .with_label_values(&[rt.config.name.as_str()])
                        .set(l.remaining_overall());
                }
                shared_for_eval
                    .metrics
                    .snapshot_seconds
                    .observe(t0.elapsed().as_secs_f64());
            }
            Ok(records)
        })
        .await
        .map_err(|e| ConnectorError::Invalid(format!("snapshot task failed: {e}")))??;
    {
        let mut latest = shared.results.lock().unwrap_or_else(|p| p.into_inner());
        for r in &records {
            shared.metrics.observe_record(r);
            latest.insert(
                (r.stream.clone(), r.test.clone(), group_label(r)),
                r.clone(),
            );
        }
    }
    // File writes, and the Kafka sink's wait for acknowledgements, block: let the runtime
    // move its other tasks (HTTP) off this worker meanwhile.
    tokio::task::block_in_place(|| sinks.write(&records))
}
