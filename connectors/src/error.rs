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
        source: arrow::error::ArrowError,
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
    #[error("{path}: column {column:?}, row group {row_group}: {source}")]
    ColumnChunk {
        path: String,
        column: String,
        row_group: usize,
        #[source]
        source: crate::parquet_dict::PageError,
    },
    #[error(transparent)]
    Engine(#[from] ldpstream_engine::EngineError),
    #[error("{0}")]
    Invalid(String),
    /// A checkpoint that cannot be restored; the service refuses to start rather than
    /// count reports twice or lose them.
    #[error("checkpoint {path}: {message}")]
    Checkpoint { path: String, message: String },
}
