use thiserror::Error;

/// Errors from sources and sinks. Each names the file (and column) it concerns.
#[derive(Debug, Error)]
pub enum ConnectorError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[cfg(feature = "parquet")]
    #[error("{path}: not a readable Parquet file: {source}")]
    Parquet {
        path: String,
        #[source]
        source: parquet::errors::ParquetError,
    },
    #[error("{path}: {source}")]
    Arrow {
        path: String,
        #[source]
        source: arrow_schema::ArrowError,
    },
    #[error("no input file matches {pattern:?}")]
    NoMatch { pattern: String },
    #[error("bad input pattern {pattern:?}: {message}")]
    BadPattern { pattern: String, message: String },
    #[error("{path}: column {column:?} not found (expected {expected}); the file has columns: {available}")]
    MissingColumn {
        path: String,
        column: String,
        expected: String,
        available: String,
    },
    #[error("{path}: column {column:?} has type {found}, expected {expected}")]
    WrongType {
        path: String,
        column: String,
        expected: String,
        found: String,
    },
    /// A column chunk read page by page (the dictionary-key path) that cannot be decoded.
    /// The cause is the reader's own error type (`parquet::page_error::PageError`),
    /// boxed so that this module, which every reader imports, imports none of them.
    #[error("{path}: column {column:?}, row group {row_group}: {source}")]
    ColumnChunk {
        path: String,
        column: String,
        row_group: usize,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A file whose metadata contradicts itself or its size (crafted or damaged).
    #[error("{path}: not a readable Parquet file: {message}")]
    Corrupt { path: String, message: String },
    #[error("{path:?} has no file name")]
    NoFileName { path: String },
    #[error("{what}: {message}")]
    Distribution { what: String, message: String },
    /// A librdkafka call that failed; `context` says which and for whom.
    #[cfg(feature = "kafka")]
    #[error("Kafka {context}: {source}")]
    Kafka {
        context: String,
        #[source]
        source: rdkafka::error::KafkaError,
    },
    /// A Kafka or Parquet source or sink in a build without its feature (the Python
    /// package has neither).
    #[error("{what} needs the connectors' `{feature}` feature, which this build of ldpstream does not include; run it with the `ldpstream` binary")]
    NotBuilt { what: String, feature: &'static str },
    #[error("Kafka topic {topic:?} does not exist (or has no partitions) on {brokers}")]
    NoSuchTopic { topic: String, brokers: String },
    /// The first request to the brokers failed: unreachable, a failed TLS handshake, or
    /// credentials the broker rejected. The message names the brokers, the protocol and
    /// SASL mechanism (never a secret), the request, librdkafka's error for it and what
    /// librdkafka reported about the connection.
    #[error("{message}")]
    Unreachable { message: String },
    #[error(
        "{owner}: Kafka option {option:?} comes from environment variable {var}, which is not set"
    )]
    MissingEnv {
        owner: String,
        option: String,
        var: String,
    },
    /// A scale-out state topic that cannot be created, has the wrong shape, or cannot be
    /// read to its end.
    #[error("Kafka state topic {topic:?} {message}")]
    StateTopic { topic: String, message: String },
    #[error(
        "transactional producer {transactional_id:?} was fenced: another instance owns its \
         partition now"
    )]
    Fenced { transactional_id: String },
    /// Records the broker did not acknowledge.
    #[error("Kafka sink (topic {topic:?}): {message}")]
    Delivery { topic: String, message: String },
    #[error("serializing a record: {0}")]
    Serialize(#[source] serde_json::Error),
    #[error(transparent)]
    Stream(#[from] ldpstream_engine::stream::StreamError),
    #[error(transparent)]
    Engine(#[from] ldpstream_engine::EngineError),
}

/// Whose fault an error is: it decides the exit code and what the message asks of the
/// reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The command line, the config or an environment variable (exit 2).
    User,
    /// A file, a broker or the operating system (exit 1).
    External,
    /// A bug in ldpstream (exit 1).
    Internal,
}

impl ConnectorError {
    pub fn fault(&self) -> Fault {
        use ConnectorError::*;
        match self {
            BadPattern { .. }
            | NoFileName { .. }
            | Distribution { .. }
            | MissingEnv { .. }
            | NotBuilt { .. } => Fault::User,
            Io { .. }
            | NoMatch { .. }
            | Arrow { .. }
            | MissingColumn { .. }
            | WrongType { .. }
            | ColumnChunk { .. }
            | Corrupt { .. }
            | NoSuchTopic { .. }
            | Unreachable { .. }
            | StateTopic { .. }
            | Fenced { .. }
            | Delivery { .. } => Fault::External,
            #[cfg(feature = "kafka")]
            Kafka { .. } => Fault::External,
            #[cfg(feature = "parquet")]
            Parquet { .. } => Fault::External,
            Stream(e) if e.is_input() => Fault::External,
            Stream(_) | Serialize(_) | Engine(_) => Fault::Internal,
        }
    }
}
