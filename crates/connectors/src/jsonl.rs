//! Result files as JSON Lines, written atomically: a reader never sees half a result file.

use std::io::{BufWriter, Write};
use std::path::Path;

use ldpstream_engine::record::TestRecord;

use crate::error::ConnectorError;

/// Writes one JSON object per line to `path` (`-` for stdout). A file is written to a
/// temporary name in the same directory, synced, then renamed over the target.
pub fn write_jsonl(path: &str, records: &[TestRecord]) -> Result<(), ConnectorError> {
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
    crate::atomic_file::write_atomically(target, |file| {
        let mut out = BufWriter::new(file);
        write_lines(&mut out, records).map_err(io)?;
        out.into_inner().map_err(|e| io(e.into_error()))
    })
}

/// The JSON Lines of `records`, as [`write_jsonl`] writes them.
pub fn jsonl_bytes(records: &[TestRecord]) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    write_lines(&mut out, records)?;
    Ok(out)
}

fn write_lines(out: &mut impl Write, records: &[TestRecord]) -> std::io::Result<()> {
    for r in records {
        serde_json::to_writer(&mut *out, r)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}
