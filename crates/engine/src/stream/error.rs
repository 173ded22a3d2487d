use thiserror::Error;

use crate::EngineError;

/// Errors of the stream layer. `origin` names where the batch came from (a file path, or
/// `stream NAME` for a live source), so every message points at the input at fault.
#[derive(Debug, Error)]
pub enum StreamError {
    #[error("{origin}: {source}")]
    Arrow {
        origin: String,
        #[source]
        source: arrow_schema::ArrowError,
    },
    #[error("{origin}: column {column:?} not found (expected {expected}); the file has columns: {available}")]
    MissingColumn {
        origin: String,
        column: String,
        expected: String,
        available: String,
    },
    #[error("{origin}: column {column:?} has type {found}, expected {expected}")]
    WrongType {
        origin: String,
        column: String,
        expected: String,
        found: String,
    },
    /// A group value longer than the stream's `max_group_value_bytes` (Parquet input; a
    /// Kafka message with one is refused at decode).
    #[error(
        "{origin}: group column {column:?} has a {bytes}-byte value at row {row}, above \
         max_group_value_bytes = {limit}; long group values are refused because every pane \
         and metric series holds a copy of them. Shorten or hash the values, or raise the \
         stream's max_group_value_bytes"
    )]
    GroupValueTooLong {
        origin: String,
        column: String,
        row: usize,
        bytes: usize,
        limit: usize,
    },
    /// A curator-model test on a stream without a privacy budget (the config validator
    /// refuses this; reaching it means the config was built by hand).
    #[error("stream {stream:?} has private tests but no budget_epsilon")]
    NoBudget { stream: String },
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A [`super::RecordSink`]'s own failure (writing records out), carried whole for
    /// the sink's owner to take back out.
    #[error(transparent)]
    Sink(Box<dyn std::error::Error + Send + Sync>),
}

impl StreamError {
    /// True when the fault is in the input (a file or message), not in ldpstream.
    pub fn is_input(&self) -> bool {
        !matches!(
            self,
            StreamError::Engine(_) | StreamError::NoBudget { .. } | StreamError::Sink(_)
        )
    }
}
