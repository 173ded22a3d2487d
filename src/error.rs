//! Errors of the batch job and the service. Each keeps its source error and says whose
//! fault it is ([`Fault`]), which the binary turns into the exit code.

use ldpstream_config::ConfigError;
use ldpstream_connectors::ConnectorError;
pub use ldpstream_connectors::Fault;
use ldpstream_engine::stream::StreamError;
use ldpstream_engine::EngineError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Connector(#[from] ConnectorError),
    #[error(transparent)]
    Stream(#[from] StreamError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// `batch` reads Parquet only.
    #[error("stream {stream:?} has a simulator or Kafka source, which only `serve` runs; give `batch` Parquet files with --input")]
    NotBatchSource { stream: String },
    /// A bounded input that leaves a stream or a test nothing to test (see
    /// `batch::check_testable`).
    #[error("stream {stream:?}: {message}")]
    NothingToTest { stream: String, message: String },
    /// A checkpoint that cannot be restored; the service refuses to start rather than
    /// count reports twice or lose them.
    #[error("checkpoint {path}: {message}")]
    Checkpoint { path: String, message: String },
    #[error("privacy ledger {path}: {message}")]
    Ledger { path: String, message: String },
    /// No ledger file named for budgeted streams, or one that is not absolute, or one
    /// inside the recoverable state (see `ledger_store::LedgerFile::locate`).
    #[error("privacy ledger: {message}")]
    LedgerLocation { message: String },
    /// The checkpoint directory cannot be created or written.
    #[error(
        "state directory {path}{}: {message}; set serve.checkpoint_dir to a writable \
         directory, or serve.durable_state = false to keep the state only in memory",
        if *default { " (the default, beside the config file)" } else { " (serve.checkpoint_dir)" }
    )]
    StateDir {
        path: String,
        message: String,
        default: bool,
    },
    /// Another `serve` holds the state directory's lock.
    #[error(
        "state directory {path} is in use by another serve ({holder}): two instances on one \
         directory would overwrite each other's checkpoints; give each its own \
         serve.checkpoint_dir (or its own config file)"
    )]
    StateDirInUse { path: String, holder: String },
    /// The config no longer matches a kept privacy ledger (see `ledger_file::open_ledger`).
    #[error("privacy ledger {origin}: stream {stream:?}: {message}")]
    LedgerConflict {
        origin: String,
        stream: String,
        message: String,
    },
    #[error("--reset-ledger {stream:?}: {reason}")]
    ResetLedger { stream: String, reason: String },
    /// A partial sketch file (`batch --emit-sketches`) that cannot be read.
    #[error("sketch file {path}: {message}")]
    Partial { path: String, message: String },
    /// Partial sketch files that cannot be merged under this config without counting a
    /// report twice or under other settings.
    #[error("merge: {message}")]
    PartialConflict { message: String },
    /// The scale-out mode's state in Kafka: a message that does not decode, or an
    /// instance that runs another config.
    #[error("stream {stream:?} (scale-out state in Kafka): {message}")]
    ScaleOut { stream: String, message: String },
    /// The config changed a stream in a way its checkpointed sketches cannot follow.
    #[error("checkpoint {path}: {message}")]
    CheckpointConflict { path: String, message: String },
    #[error(
        "HTTP on {address} (not loopback) needs access control: set serve.auth_token_env to \
         an environment variable holding a bearer token, or serve.allow_unauthenticated = true"
    )]
    Unauthenticated { address: String },
    #[error("serve.auth_token_env: environment variable {variable}: {message}")]
    AuthToken { variable: String, message: String },
    /// The certificate or key of `serve.tls` cannot be loaded.
    #[error("serve.tls.{key} {path}: {message}")]
    HttpTls {
        key: &'static str,
        path: String,
        message: String,
    },
    #[error("listen address {address}: {source}")]
    Listen {
        address: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what}: {source}")]
    Thread {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} task failed: {source}")]
    Task {
        what: &'static str,
        #[source]
        source: tokio::task::JoinError,
    },
    /// The config's state does not fit `max_state_memory` (see `ldpstream check`).
    #[error(
        "the configured streams would hold an estimated {total} of state, over \
         max_state_memory = {limit}; the largest is stream {stream:?}, {term}. Lower its \
         max_groups, window length or domain, or raise max_state_memory \
         (`ldpstream check --config FILE` shows every term)"
    )]
    StateMemory {
        total: bytesize::ByteSize,
        limit: bytesize::ByteSize,
        stream: String,
        term: String,
    },
    #[error("metrics registry: {0}")]
    Metrics(#[from] prometheus::Error),
}

impl Error {
    pub fn fault(&self) -> Fault {
        match self {
            Error::Config(_)
            | Error::NotBatchSource { .. }
            | Error::LedgerConflict { .. }
            | Error::LedgerLocation { .. }
            | Error::ResetLedger { .. }
            | Error::CheckpointConflict { .. }
            | Error::PartialConflict { .. }
            | Error::StateMemory { .. }
            | Error::Unauthenticated { .. }
            | Error::HttpTls { .. }
            | Error::StateDir { .. }
            | Error::StateDirInUse { .. }
            | Error::AuthToken { .. } => Fault::User,
            Error::Connector(e) => e.fault(),
            Error::Stream(e) if e.is_input() => Fault::External,
            // Exit 1, like other bad input data, not 2: the config and command line are fine.
            Error::NothingToTest { .. }
            | Error::Checkpoint { .. }
            | Error::Partial { .. }
            | Error::ScaleOut { .. }
            | Error::Ledger { .. }
            | Error::Listen { .. }
            | Error::Thread { .. } => Fault::External,
            Error::Stream(_) | Error::Engine(_) | Error::Task { .. } | Error::Metrics(_) => {
                Fault::Internal
            }
        }
    }
}
