//! Where the batch job's records go: JSON Lines by default (`-` for stdout), Parquet when
//! the path ends in `.parquet`. Either way the file appears whole or not at all.

use std::path::Path;

use ldpstream_connectors::jsonl::write_jsonl;
#[cfg(feature = "parquet")]
use ldpstream_connectors::parquet::write_records_parquet;
use ldpstream_engine::record::TestRecord;

use crate::error::Error;

pub fn write_records(path: &str, records: &[TestRecord]) -> Result<(), Error> {
    let target = Path::new(path);
    let parquet = path != "-"
        && target
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("parquet"));
    if parquet {
        #[cfg(feature = "parquet")]
        write_records_parquet(target, records)?;
        #[cfg(not(feature = "parquet"))]
        return Err(ldpstream_connectors::ConnectorError::NotBuilt {
            what: format!("--output {path}"),
            feature: "parquet",
        }
        .into());
    } else {
        write_jsonl(path, records)?;
    }
    Ok(())
}
