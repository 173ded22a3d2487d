//! The input files a bounded job names: paths and glob patterns resolved into a sorted,
//! de-duplicated list of canonical paths. It touches no file's contents, so a ledger can
//! key its input identity on the same list whether or not the build reads Parquet.

use std::path::{Path, PathBuf};

use crate::error::ConnectorError;

/// Expands paths and glob patterns into a sorted, de-duplicated file list. A pattern that
/// matches nothing, or a path that does not exist, is an error naming it.
pub fn resolve_inputs(patterns: &[String]) -> Result<Vec<PathBuf>, ConnectorError> {
    let mut files = Vec::new();
    for pattern in patterns {
        // A path that exists is that path, even when its name has glob characters
        // (`x[1].parquet`).
        let is_glob = pattern.contains(['*', '?', '[']) && !Path::new(pattern).exists();
        if !is_glob {
            let path = PathBuf::from(pattern);
            std::fs::metadata(&path).map_err(|source| ConnectorError::Io {
                path: pattern.clone(),
                source,
            })?;
            files.push(path);
            continue;
        }
        let paths = glob::glob(pattern).map_err(|e| ConnectorError::BadPattern {
            pattern: pattern.clone(),
            message: e.to_string(),
        })?;
        let before = files.len();
        for entry in paths {
            let path = entry.map_err(|e| ConnectorError::Io {
                path: e.path().display().to_string(),
                source: std::io::Error::other(e.to_string()),
            })?;
            if path.is_file() {
                files.push(path);
            }
        }
        if files.len() == before {
            return Err(ConnectorError::NoMatch {
                pattern: pattern.clone(),
            });
        }
    }
    unique_files(files)
}

/// The files once each, by what they are rather than how they were spelled: canonical
/// paths (no `./`, `..` or symlinked directories), and one entry per (device, inode), so
/// that `data/*.parquet` beside `./data/a.parquet`, or a hard link, is not read twice.
fn unique_files(files: Vec<PathBuf>) -> Result<Vec<PathBuf>, ConnectorError> {
    use std::os::unix::fs::MetadataExt;
    let mut by_inode = std::collections::BTreeMap::new();
    for file in files {
        let io = |source| ConnectorError::Io {
            path: file.display().to_string(),
            source,
        };
        let canonical = std::fs::canonicalize(&file).map_err(io)?;
        let meta = std::fs::metadata(&canonical).map_err(io)?;
        by_inode
            .entry((meta.dev(), meta.ino()))
            .and_modify(|kept: &mut PathBuf| {
                if canonical < *kept {
                    *kept = canonical.clone();
                }
            })
            .or_insert(canonical);
    }
    let mut files: Vec<PathBuf> = by_inode.into_values().collect();
    files.sort();
    Ok(files)
}
