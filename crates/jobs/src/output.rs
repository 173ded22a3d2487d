//! Where the batch job's records go: JSON Lines by default (`-` for stdout), Parquet when
//! the path ends in `.parquet`. Either way the file appears whole or not at all.
//!
//! Writing is two-phase ([`prepare_records`], then [`PreparedRecords::commit`]): the
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
    /// Staged beside the file, renamed over it at commit.
    File(Prepared<'static>),
}

impl PreparedRecords {
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
    let parquet = path != "-"
        && target
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("parquet"));
    let bytes = if parquet {
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

/// Writes `records` to `path` at once ([`prepare_records`], then commit).
pub fn write_records(path: &str, records: &[TestRecord]) -> Result<(), Error> {
    prepare_records(path, records)?.commit()
}
