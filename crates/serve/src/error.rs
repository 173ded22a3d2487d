//! Errors of the service. The jobs' [`ldpstream_jobs::Error`] covers what the service
//! shares with `batch` (config, input, ledger, checkpoint bytes); these are the service's
//! own: its state directory, HTTP, threads and tasks, and scale-out's state in Kafka. Each
//! says whose fault it is ([`Fault`]), which the binary turns into the exit code.

use ldpstream_config::ConfigError;
use ldpstream_connectors::ConnectorError;
pub use ldpstream_connectors::Fault;
use ldpstream_engine::stream::StreamError;
use ldpstream_engine::EngineError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    #[error(transparent)]
    Jobs(#[from] ldpstream_jobs::Error),
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
    #[error("metrics registry: {0}")]
    Metrics(#[from] prometheus::Error),
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        Error::Jobs(e.into())
    }
}

impl From<ConnectorError> for Error {
    fn from(e: ConnectorError) -> Self {
        Error::Jobs(e.into())
    }
}

impl From<StreamError> for Error {
    fn from(e: StreamError) -> Self {
        Error::Jobs(e.into())
    }
}

impl From<EngineError> for Error {
    fn from(e: EngineError) -> Self {
        Error::Jobs(e.into())
    }
}

impl Error {
    pub fn fault(&self) -> Fault {
        match self {
            Error::Jobs(e) => e.fault(),
            Error::CheckpointConflict { .. }
            | Error::Unauthenticated { .. }
            | Error::HttpTls { .. }
            | Error::StateDir { .. }
            | Error::StateDirInUse { .. }
            | Error::AuthToken { .. } => Fault::User,
            Error::ScaleOut { .. } | Error::Listen { .. } | Error::Thread { .. } => Fault::External,
            Error::Task { .. } | Error::Metrics(_) => Fault::Internal,
        }
    }
}
