//! JSON Lines output, written atomically: a reader never sees half a result file.

use std::io::{BufWriter, Write};
use std::path::Path;

use ldpstream_engine::record::TestRecord;

use crate::error::ConnectorError;

/// Writes one JSON object per line to `path` (`-` for stdout). A file is written to a
/// temporary name in the same directory, synced, then renamed over the target.
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
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let file_name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| ConnectorError::Invalid(format!("output path {path:?} has no file name")))?;
    let tmp = dir.join(format!(".{file_name}.tmp-{}", std::process::id()));
    let result = (|| {
        let file = std::fs::File::create(&tmp)?;
        let mut out = BufWriter::new(file);
        write_lines(&mut out, records)?;
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, target)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(io)
}

fn write_lines(out: &mut impl Write, records: &[TestRecord]) -> std::io::Result<()> {
    for r in records {
        serde_json::to_writer(&mut *out, r)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}
