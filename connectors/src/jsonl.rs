//! Result files, written atomically: a reader never sees half a result file. JSON Lines by
//! default; a path ending in `.parquet` gets Parquet (see [`crate::record_parquet`]).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use ldpstream_engine::record::TestRecord;

use crate::error::ConnectorError;

/// Writes one JSON object per line to `path` (`-` for stdout), or a Parquet file when the
/// path ends in `.parquet`. A file is written to a temporary name in the same directory,
/// synced, then renamed over the target.
pub fn write_records(path: &str, records: &[TestRecord]) -> Result<(), ConnectorError> {
    let io = |source| ConnectorError::Io {
        path: path.to_string(),
        source,
    };
    if path == "-" {
        let stdout = std::io::stdout();
        let mut out = BufWriter::new(stdout.lock());
        write_lines(&mut out, records).map_err(io)?;
        return out.flush().map_err(io);
    }
    let target = Path::new(path);
    if target
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("parquet"))
    {
        return crate::record_parquet::write_records_parquet(target, records);
    }
    write_atomically(target, |file| {
        let mut out = BufWriter::new(file);
        write_lines(&mut out, records).map_err(io)?;
        out.into_inner().map_err(|e| io(e.into_error()))
    })
}

/// Runs `write` on a temporary file beside `target`, then syncs it and renames it over
/// `target`. On any error the temporary file is removed and `target` is untouched.
pub(crate) fn write_atomically(
    target: &Path,
    write: impl FnOnce(File) -> Result<File, ConnectorError>,
) -> Result<(), ConnectorError> {
    let shown = target.display().to_string();
    let io = |source| ConnectorError::Io {
        path: shown.clone(),
        source,
    };
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let file_name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| {
            ConnectorError::Invalid(format!("output path {shown:?} has no file name"))
        })?;
    let tmp = dir.join(format!(".{file_name}.tmp-{}", std::process::id()));
    let result = File::create(&tmp)
        .map_err(io)
        .and_then(write)
        .and_then(|file| file.sync_all().map_err(io))
        .and_then(|()| std::fs::rename(&tmp, target).map_err(io));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn write_lines(out: &mut impl Write, records: &[TestRecord]) -> std::io::Result<()> {
    for r in records {
        serde_json::to_writer(&mut *out, r)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}
