//! `ldpstream serve`: the long-running service.
//!
//! Per stream, a source thread decodes batches and a fold thread folds each one into a
//! per-pane delta *outside* any lock, then merges the delta into the stream's
//! [`PaneStore`] under a short lock. The tokio scheduler ticks every `snapshot_interval`,
//! copies the due windows under the same short lock and evaluates the tests on the copies,
//! so a snapshot never waits for a fold and a fold never waits for a test.
//!
//! [`run`] tells the service's life in three steps: [`startup`] (HTTP up, the checkpoint
//! and ledgers restored, every stream's threads started), [`scheduler`] (the ticks), and
//! [`shutdown`] (threads stopped, a last round of results and a last checkpoint).

pub mod checkpoint;
pub mod error;
mod events;
mod fold_counters;
mod group_labels;
mod history;
mod http;
mod http_server;
mod https;
mod metrics;
mod rate;
mod scale_out;
mod scheduler;
mod shared;
mod shutdown;
mod startup;
mod state_dir;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ldpstream_config::{Config, StateLocation, StreamConfig};
use ldpstream_connectors::{Position, Sinks, Source, SourceBatch};
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::stream::{fold_paned_batch, PanedDelta, ReportLayout, SequentialLatches};
use ldpstream_engine::window::PaneStore;
use tokio::sync::mpsc;
use tracing::warn;

pub use metrics::Metrics;
pub use shared::Shared;

use crate::error::Error;
use fold_counters::{export_fold, rejected_counts};
use ldpstream_jobs::ledger::file::check_reset_names;
use ldpstream_jobs::ledger::store::LedgerFile;

/// Command-line overrides of the config's `[serve]` table.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Stop (as on SIGTERM) after this long.
    pub duration: Option<Duration>,
    /// Replaces `serve.listen`.
    pub listen: Option<String>,
    /// Streams whose privacy ledgers start afresh (`--reset-ledger`).
    pub reset_ledgers: Vec<String>,
    /// The deployment's privacy-budget ledger file (the config's `ledger` or `--ledger`);
    /// None when none is named (then no stream has a budget).
    pub ledger: Option<LedgerFile>,
    /// Where the checkpoint lives (`Config::state_location`), resolved against the config
    /// file's path, which only the caller knows.
    pub state: StateLocation,
}

/// What changes together and is checkpointed together: the panes and where the source
/// had got to when they last changed. The privacy-budget ledger is not here: it lives in
/// the ledger file, apart from this recoverable state, and is re-read before each spend.
struct StreamState {
    store: PaneStore,
    position: Position,
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
    let shared = startup::shared_state(&config)?;
    let http = startup::start_http(&config, &options, &shared).await?;
    let restored = startup::restore(&config, &options)?;
    let mut running = startup::start_streams(&config, restored, &shared, started)?;
    shared.ready.store(true, Ordering::Release);
    let mut sinks = Sinks::open(&config.serve.sinks)?;
    let failure =
        scheduler::run(&config, options.duration, &mut running, &shared, &mut sinks).await?;
    shutdown::shut_down(running, &shared, sinks, http, failure).await
}

/// Where this instance keeps its state on disk (nothing when it is kept in memory).
#[derive(Default)]
struct StateFiles {
    /// The checkpoint directory.
    dir: Option<PathBuf>,
    /// The deployment's privacy-budget ledger file, spent from before every private
    /// release; never in the checkpoint directory.
    ledger: Option<LedgerFile>,
    /// The directory's lock, held until serve returns: a second instance is refused.
    _lock: Option<std::fs::File>,
}

/// What runs once startup is done: the streams and their threads, and how they report.
struct Running {
    runtimes: Vec<Arc<StreamRuntime>>,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// Streams with a bounded source (scale-out ones with `end_marker` too): when each has
    /// ended and they are all the streams, the service stops by itself.
    bounded: usize,
    /// Every stream of the config, scale-out ones included.
    streams: usize,
    events: mpsc::UnboundedReceiver<WorkerEvent>,
    /// Set to stop the sources and the scale-out workers.
    stop: Arc<AtomicBool>,
    files: StateFiles,
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
        let was_full = state.store.groups_kept() >= rt.config.max_groups;
        delta.apply(&mut state.store)?;
        // A real group named "__other__" counts there too: only a full store overflows,
        // and the warning comes once, when it first does.
        let full = state.store.groups_kept() >= rt.config.max_groups;
        if full
            && state.store.overflowed_reports() > overflowed_reports
            && (overflowed_reports == 0 || !was_full)
        {
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
