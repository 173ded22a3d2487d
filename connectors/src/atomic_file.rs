//! Atomic file replacement, for results, ledgers and checkpoints alike.

use std::fs::File;
use std::path::Path;

use crate::error::ConnectorError;

/// Runs `write` on a temporary file beside `target`, syncs it, renames it over `target` and
/// syncs the directory. On any error the temporary file is removed and `target` is
/// untouched: a reader (or a restart) sees the old file or the new one, never half of one.
pub fn write_atomically(
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
        .ok_or_else(|| ConnectorError::NoFileName {
            path: shown.to_string(),
        })?;
    let tmp = dir.join(format!(".{file_name}.tmp-{}", std::process::id()));
    let result = File::create(&tmp)
        .map_err(io)
        .and_then(write)
        .and_then(|file| file.sync_all().map_err(io))
        .and_then(|()| std::fs::rename(&tmp, target).map_err(io));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return result;
    }
    // Sync the directory too, so the rename itself survives a power loss.
    File::open(&dir).and_then(|d| d.sync_all()).map_err(io)
}
