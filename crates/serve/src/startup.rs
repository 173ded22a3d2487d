//! Startup: the state the HTTP handlers share, the HTTP endpoint, the checkpoint and the
//! privacy ledgers restored, and every stream's threads started from where it left off.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ldpstream_config::{Config, SourceConfig, StreamConfig};
use ldpstream_connectors::{Position, Source};
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::stream::{stream_pane_width, ReportLayout, SequentialLatches};
use ldpstream_engine::window::PaneStore;
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::checkpoint::{self, StreamCheckpoint};
use super::group_labels::GroupLabels;
use super::history::History;
use super::rate::ReportRates;
use super::shared::StreamInfo;
use super::{
    https, scale_out, spawn_stream, state_dir, Metrics, Running, ServeOptions, Shared, StateFiles,
    StreamRuntime, StreamState, WorkerEvent,
};
use crate::error::Error;
use ldpstream_jobs::ledger::file::{input_fingerprint, open_ledger};
use ldpstream_jobs::ledger::rules::canonical;
use ldpstream_jobs::ledger::store::LedgerFile;
use ldpstream_jobs::state_codec::{describe_changes, settings_of};
use ldpstream_jobs::Error as JobsError;

/// The metrics registry and what the HTTP handlers read, before any stream runs.
pub(super) fn shared_state(config: &Config) -> Result<Arc<Shared>, Error> {
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
    Ok(Arc::new(Shared {
        metrics,
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
    }))
}

/// The running HTTP server and how to stop it.
pub(super) struct Http {
    pub(super) stop: tokio::sync::oneshot::Sender<()>,
    pub(super) task: tokio::task::JoinHandle<()>,
}

/// Binds `serve.listen` (or `--listen`), refuses an unauthenticated non-loopback address
/// unless the config allows it, and serves the API (over TLS when configured).
pub(super) async fn start_http(
    config: &Config,
    options: &ServeOptions,
    shared: &Arc<Shared>,
) -> Result<Http, Error> {
    let listen = options
        .listen
        .clone()
        .unwrap_or_else(|| config.serve.listen.clone());
    let listen_err = |source| Error::Listen {
        address: listen.clone(),
        source,
    };
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .map_err(listen_err)?;
    let local = listener.local_addr().map_err(listen_err)?;
    let token = auth_token(config)?;
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
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let app = super::http::router(shared.clone(), token);
    let stopped = async move {
        let _ = stopped.await;
    };
    let task = tokio::spawn(super::http_server::serve(listener, tls, app, stopped));
    Ok(Http { stop, task })
}

/// The bearer token from `serve.auth_token_env`, if configured; an unset or empty
/// variable is an error rather than an open endpoint.
fn auth_token(config: &Config) -> Result<Option<String>, Error> {
    let Some(variable) = &config.serve.auth_token_env else {
        return Ok(None);
    };
    let refuse = |message: String| Error::AuthToken {
        variable: variable.clone(),
        message,
    };
    match std::env::var(variable) {
        Ok(t) if !t.trim().is_empty() => Ok(Some(t)),
        Ok(_) => Err(refuse("is empty".into())),
        Err(e) => Err(refuse(e.to_string())),
    }
}

/// What the state directory held at start.
pub(super) struct Restored {
    pub(super) files: StateFiles,
    /// Per stream name, its checkpointed state; taken out as the streams start, so what
    /// is left belongs to streams the config no longer has.
    pub(super) streams: BTreeMap<String, StreamCheckpoint>,
}

/// Locks the state directory, reads its newest usable checkpoint, moves any privacy
/// ledgers it holds (older versions kept them there) into the ledger file, and opens
/// every budgeted stream's ledger there.
pub(super) fn restore(config: &Config, options: &ServeOptions) -> Result<Restored, Error> {
    let dir = options.state.dir().map(Path::to_path_buf);
    if let (Some(dir), Some(ledger)) = (&dir, &options.ledger) {
        refuse_ledger_inside(ledger, dir)?;
    }
    // Held until serve returns: a second instance on the same directory is refused.
    let lock = match &dir {
        Some(dir) => Some(state_dir::prepare(dir, &options.state)?),
        None => None,
    };
    let checkpoint = match &dir {
        Some(dir) => checkpoint::read_latest(dir),
        None => Ok(None),
    };
    let (streams, unusable): (BTreeMap<String, StreamCheckpoint>, _) = match checkpoint {
        Ok(streams) => (
            streams
                .unwrap_or_default()
                .into_iter()
                .map(|s| (s.name.clone(), s))
                .collect(),
            None,
        ),
        Err(e) => (BTreeMap::new(), Some(e)),
    };
    let old = dir
        .as_deref()
        .map(|d| ldpstream_jobs::ledger::import::read_old(d, &streams))
        .transpose()?;
    // Even when the checkpoint is unusable, the journal's spends are moved to safety
    // first: the error then advises moving the directory aside.
    open_ledgers(config, options, old.as_ref())?;
    if let Some(e) = unusable {
        return Err(e);
    }
    if !streams.is_empty() {
        info!(streams = streams.len(), "restoring the checkpoint");
    }
    state_dir::log_where_state_lives(config, &options.state, !streams.is_empty());
    if let Some(ledger) = &options.ledger {
        eprintln!("ldpstream serve: privacy ledger: {}", ledger.describe());
    }
    Ok(Restored {
        files: StateFiles {
            dir,
            ledger: options.ledger.clone(),
            _lock: lock,
        },
        streams,
    })
}

/// The ledger inside the checkpoint directory would go with it when the directory is
/// moved aside to start fresh, and give the budget back. Judged by the file the ledger
/// resolves to: a symlink outside the directory to a file inside it is inside.
fn refuse_ledger_inside(ledger: &LedgerFile, dir: &Path) -> Result<(), Error> {
    // A ledger that cannot be resolved (its directory, the checkpoint directory, is made
    // later) is judged by its name; locking it reports why it cannot be opened.
    let real = ledger
        .resolved()
        .unwrap_or_else(|_| ledger.path().to_path_buf());
    let parent = real.parent().unwrap_or(Path::new("/"));
    if Path::new(&canonical(parent)).starts_with(canonical(dir)) {
        return Err(Error::Jobs(JobsError::LedgerLocation {
            message: format!(
                "{} is inside the checkpoint directory {}: the ledger must live apart from \
                 the recoverable state, which may be moved aside to start over; name a file \
                 outside it",
                ledger.describe(),
                dir.display()
            ),
        }));
    }
    Ok(())
}

/// Under the ledger file's lock: adds the state directory's old ledgers (`old`), opens
/// every budgeted stream's ledger (refusing a changed budget or a renamed stream over
/// charged input, unless reset), and saves, so that the file names each stream's input
/// before anything is spent. Then removes the old journal.
fn open_ledgers(
    config: &Config,
    options: &ServeOptions,
    old: Option<&ldpstream_jobs::ledger::import::OldLedgers>,
) -> Result<(), Error> {
    let Some(file) = &options.ledger else {
        return match old {
            Some(old) if !old.streams.is_empty() => Err(Error::Jobs(JobsError::LedgerLocation {
                message: format!(
                    "the state directory holds the privacy ledgers of stream(s) {} (kept \
                     there by an older ldpstream); name the deployment's ledger file (the \
                     top-level key ledger = \"/var/lib/ldpstream/ledger.json\", or --ledger \
                     PATH) so that serve moves them there: they are never dropped",
                    old.names()
                ),
            })),
            _ => Ok(()),
        };
    };
    let mut locked = file.lock()?;
    let imported = old.is_some_and(|o| o.add_to(&mut locked.book, file.path()));
    let known = locked.book.streams.clone();
    let origin = file.path().display().to_string();
    for stream in config.streams.iter().filter(|s| s.budget_epsilon.is_some()) {
        let input = input_fingerprint(stream, &[]);
        if let Some(entry) = open_ledger(&known, stream, &input, &options.reset_ledgers, &origin)? {
            locked.book.streams.insert(stream.name.clone(), entry);
        }
    }
    let changed = imported || locked.book.streams != known;
    if changed {
        locked.save()?;
    }
    if let Some(old) = old {
        old.remove_journal();
    }
    Ok(())
}

/// Starts every stream's threads from its restored state. The restored streams the config
/// no longer has are left out of the next checkpoints (their ledgers, if any, are in the
/// ledger file, which keeps them).
pub(super) fn start_streams(
    config: &Config,
    mut restored: Restored,
    shared: &Arc<Shared>,
    started: Instant,
) -> Result<Running, Error> {
    let (events_tx, events) = mpsc::unbounded_channel::<WorkerEvent>();
    let mut running = Running {
        runtimes: Vec::new(),
        threads: Vec::new(),
        bounded: 0,
        streams: config.streams.len(),
        events,
        stop: Arc::new(AtomicBool::new(false)),
        files: StateFiles::default(),
    };
    for stream in &config.streams {
        let mechanism = Mechanism::from_config(&stream.mechanism)?;
        // OLH's pool factor, once, before the first snapshot round needs it.
        if let Err(why) = mechanism.prepare() {
            tracing::warn!(stream = %stream.name, "{why}");
        }
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
                if kafka.end_marker {
                    running.bounded += 1;
                }
                running.threads.extend(scale_out::spawn(
                    stream,
                    kafka,
                    scale_out,
                    running.stop.clone(),
                    shared.clone(),
                    config.serve.snapshot_interval.as_std(),
                    move |event| {
                        let _ = events.send(event);
                    },
                )?);
                continue;
            }
        }
        let rt = Arc::new(restore_stream(stream, mechanism, &mut restored)?);
        if Source::is_bounded(&stream.source) {
            running.bounded += 1;
        }
        running.threads.extend(spawn_stream(
            rt.clone(),
            started,
            running.stop.clone(),
            shared.clone(),
            events_tx.clone(),
        )?);
        running.runtimes.push(rt);
    }
    for name in restored.streams.keys() {
        warn!(stream = %name, "the checkpoint has a stream the config does not; ignoring it");
    }
    // A removed stream's privacy ledger stays in the ledger file, which keeps every
    // stream's: a stream added later over the same input cannot start a fresh budget.
    running.files = restored.files;
    Ok(running)
}

/// One stream's runtime: its panes and position from the checkpoint (refused when it was
/// counted under other settings).
fn restore_stream(
    stream: &StreamConfig,
    mechanism: Mechanism,
    restored: &mut Restored,
) -> Result<StreamRuntime, Error> {
    let ck_path = checkpoint_path(&restored.files.dir);
    check_settings(stream, restored.streams.get(&stream.name), &ck_path)?;
    let width = stream_pane_width(stream);
    let lateness = stream.allowed_lateness.millis() as i64;
    let mut sequential = SequentialLatches::for_stream(stream);
    let (store, position) = match restored.streams.remove(&stream.name) {
        Some(ck) if ck.pane_width != width => {
            return Err(Error::Jobs(JobsError::Checkpoint {
                path: ck_path,
                message: format!(
                    "stream {:?} was checkpointed with {} ms panes but the config now gives {} ms \
                     (its window sizes changed); move the checkpoint aside to start over",
                    stream.name, ck.pane_width, width
                ),
            }));
        }
        Some(ck) => {
            info!(stream = %stream.name, position = ?ck.position, "restored");
            sequential.restore(ck.latches).map_err(|e| {
                Error::Jobs(JobsError::Checkpoint {
                    path: ck_path.clone(),
                    message: e.to_string(),
                })
            })?;
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
    let layout = ReportLayout::of(stream, &mechanism);
    Ok(StreamRuntime {
        config: stream.clone(),
        mechanism,
        layout,
        state: Mutex::new(StreamState {
            looked_through: store.watermark(),
            store,
            position,
            sequential,
        }),
    })
}

/// Refuses a checkpoint whose sketches were counted under settings the config changed.
fn check_settings(
    stream: &StreamConfig,
    checkpointed: Option<&StreamCheckpoint>,
    ck_path: &str,
) -> Result<(), Error> {
    match checkpointed.map(|ck| &ck.settings) {
        Some(Some(old)) => match describe_changes(&stream.name, old, &settings_of(stream)) {
            Some(changes) => Err(Error::CheckpointConflict {
                path: ck_path.to_string(),
                message: format!(
                    "{changes}. The checkpointed sketches were counted under the old \
                     settings and cannot be merged with reports under the new ones: restore \
                     the old settings, or move {ck_path} aside to start every stream from \
                     scratch (the privacy ledgers are kept apart, in the ledger file, and \
                     keep their spends)"
                ),
            }),
            None => Ok(()),
        },
        Some(None) => {
            warn!(
                stream = %stream.name,
                "the checkpoint predates settings fingerprints (format version < 3): cannot \
                 check that the stream's mechanism, columns and windows are unchanged"
            );
            Ok(())
        }
        None => Ok(()),
    }
}

/// The checkpoint file, as named in errors ("" when the state is in memory).
fn checkpoint_path(dir: &Option<PathBuf>) -> String {
    dir.as_ref().map_or_else(String::new, |d| {
        d.join(checkpoint::FILE_NAME).display().to_string()
    })
}
