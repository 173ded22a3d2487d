//! Errors of the jobs (batch, merge, ledger, state codec), which the service wraps in its
//! own. Each keeps its source error and says whose
//! fault it is ([`Fault`]), which the binary turns into the exit code.

use ldpstream_config::ConfigError;
use ldpstream_connectors::ConnectorError;
pub use ldpstream_connectors::Fault;
use ldpstream_engine::stream::StreamError;
use ldpstream_engine::EngineError;
use thiserror::Error;

/// A stream error, or, when it carries a record sink's failure that is one of these (the
/// jobs' `record_output` writer's), that failure itself, with its own fault.
impl From<StreamError> for Error {
    fn from(e: StreamError) -> Self {
        match e {
            StreamError::Sink(inner) => match inner.downcast::<Error>() {
                Ok(own) => *own,
                Err(other) => Error::Stream(StreamError::Sink(other)),
            },
            e => Error::Stream(e),
        }
    }
}

#[derive(Debug, Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Connector(#[from] ConnectorError),
    #[error(transparent)]
    Stream(StreamError),
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
    /// The config no longer matches a kept privacy ledger (see `ledger_file::open_ledger`).
    #[error("privacy ledger {origin}: stream {stream:?}: {message}")]
    LedgerConflict {
        origin: String,
        stream: String,
        message: String,
    },
    #[error("--reset-ledger {stream:?}: {reason}")]
    ResetLedger { stream: String, reason: String },
    /// In-memory Arrow data whose buffers do not hold what their type says (offsets past
    /// the data, strings that are not UTF-8): see `memory_check`.
    #[error("{origin}: column {column:?} is not valid Arrow data: {message}")]
    InvalidColumn {
        origin: String,
        column: String,
        message: String,
    },
    /// A partial sketch file (`batch --emit-sketches`) that cannot be read.
    #[error("sketch file {path}: {message}")]
    Partial { path: String, message: String },
    /// Partial sketch files that cannot be merged under this config without counting a
    /// report twice or under other settings.
    #[error("merge: {message}")]
    PartialConflict { kind: Conflict, message: String },
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
}

/// Why partial sketches cannot be merged: what the Python package tells apart by
/// exception class (a mechanism mismatch, or bad input).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conflict {
    /// Counted under other settings (mechanism, columns, windows) or another config.
    Settings,
    /// An input would be counted twice, or nothing shows that it is not.
    DoubleCount,
    /// Sketches that cannot be added: another shape, or counts that would overflow.
    Shape,
}

impl Error {
    pub fn fault(&self) -> Fault {
        match self {
            Error::Config(_)
            | Error::NotBatchSource { .. }
            | Error::LedgerConflict { .. }
            | Error::LedgerLocation { .. }
            | Error::ResetLedger { .. }
            | Error::PartialConflict { .. }
            | Error::StateMemory { .. } => Fault::User,
            Error::Connector(e) => e.fault(),
            Error::Stream(e) if e.is_input() => Fault::External,
            // Exit 1, like other bad input data, not 2: the config and command line are fine.
            Error::NothingToTest { .. }
            | Error::Checkpoint { .. }
            | Error::Partial { .. }
            | Error::InvalidColumn { .. }
            | Error::Ledger { .. } => Fault::External,
            Error::Stream(_) | Error::Engine(_) => Fault::Internal,
        }
    }
}
