use parquet::errors::ParquetError;
use thiserror::Error;

use super::rle_hybrid::HybridError;

/// A column chunk that cannot be decoded.
#[derive(Debug, Error)]
pub enum PageError {
    #[error(transparent)]
    Parquet(#[from] ParquetError),
    #[error("page {page}: {source}")]
    Hybrid {
        page: usize,
        #[source]
        source: HybridError,
    },
    #[error("page {page}: {what} is truncated")]
    Truncated { page: usize, what: &'static str },
    #[error("page {page}: dictionary-encoded data page before any dictionary page")]
    NoDictionary { page: usize },
    #[error("dictionary keys: {0}")]
    Keys(#[source] HybridError),
    #[error("the pages hold {found} rows, the row group {expected}")]
    RowCount { found: u64, expected: u64 },
}
