//! Where the batch job's records go: JSON Lines by default (`-` for stdout), Parquet when
//! the path ends in `.parquet`. Either way the file appears whole or not at all.
//!
//! Writing is two-phase ([`prepare_records`], or a [`crate::record_output::RecordWriter`]
//! that renders them as they are made, then [`PreparedRecords::commit`]): the
//! records are rendered and staged beside the target first, so a release can learn that
//! they cannot be written (a bad path, a record that does not serialize) before it spends
//! from the privacy ledger, and publish them only after the spend is saved.

use std::io::Write;
use std::path::Path;

use ldpstream_connectors::atomic_file::{prepare_atomically, Prepared};
use ldpstream_connectors::jsonl::jsonl_bytes;
#[cfg(feature = "parquet")]
use ldpstream_connectors::parquet::records_parquet_bytes;
use ldpstream_connectors::ConnectorError;
use ldpstream_engine::record::TestRecord;

use crate::error::Error;

/// Records rendered and staged, not yet published.
pub struct PreparedRecords {
    target: Target,
}

enum Target {
    /// Written to stdout at commit.
    Stdout(Vec<u8>),
    /// An anonymous file's content written to stdout at commit.
    StdoutFile(std::fs::File),
    /// Staged beside the file, renamed over it at commit.
    File(Prepared<'static>),
}

impl PreparedRecords {
    /// Records staged as a file beside their target ([`prepare_atomically`]).
    pub(crate) fn staged(prepared: Prepared<'static>) -> Self {
        PreparedRecords {
            target: Target::File(prepared),
        }
    }

    /// Records for stdout, waiting in `file` (read from where it stands).
    pub(crate) fn stdout_file(file: std::fs::File) -> Self {
        PreparedRecords {
            target: Target::StdoutFile(file),
        }
    }

    /// Publishes the records: stdout written, or the staged file put in place.
    pub fn commit(self) -> Result<(), Error> {
        match self.target {
            Target::Stdout(bytes) => {
                let mut out = std::io::stdout().lock();
                out.write_all(&bytes)
                    .and_then(|()| out.flush())
                    .map_err(|source| ConnectorError::Io {
                        path: "-".into(),
                        source,
                    })?;
                Ok(())
            }
            Target::StdoutFile(mut file) => {
                let mut out = std::io::stdout().lock();
                std::io::copy(&mut file, &mut out)
                    .and_then(|_| out.flush())
                    .map_err(|source| ConnectorError::Io {
                        path: "-".into(),
                        source,
                    })?;
                Ok(())
            }
            Target::File(prepared) => Ok(prepared.commit()?),
        }
    }
}

/// Renders `records` for `path` (`-` for stdout) and stages the file; nothing is
/// published until [`PreparedRecords::commit`].
pub fn prepare_records(path: &str, records: &[TestRecord]) -> Result<PreparedRecords, Error> {
    let target = Path::new(path);
    let io = |source| ConnectorError::Io {
        path: path.to_string(),
        source,
    };
    let bytes = if is_parquet(path) {
        #[cfg(feature = "parquet")]
        {
            records_parquet_bytes(target, records)?
        }
        #[cfg(not(feature = "parquet"))]
        return Err(ConnectorError::NotBuilt {
            what: format!("--output {path}"),
            feature: "parquet",
        }
        .into());
    } else {
        jsonl_bytes(records).map_err(io)?
    };
    if path == "-" {
        return Ok(PreparedRecords {
            target: Target::Stdout(bytes),
        });
    }
    let shown = path.to_string();
    let prepared = prepare_atomically(target, move |mut file| {
        file.write_all(&bytes)
            .map_err(|source| ConnectorError::Io {
                path: shown,
                source,
            })?;
        Ok(file)
    })?;
    Ok(PreparedRecords {
        target: Target::File(prepared),
    })
}

/// Whether records for `path` are written as Parquet (a file name ending in `.parquet`).
pub(crate) fn is_parquet(path: &str) -> bool {
    path != "-"
        && Path::new(path)
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("parquet"))
}

/// Writes `records` to `path` at once ([`prepare_records`], then commit).
pub fn write_records(path: &str, records: &[TestRecord]) -> Result<(), Error> {
    prepare_records(path, records)?.commit()
}
