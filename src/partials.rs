//! Partial sketch files, for splitting one batch job across machines:
//! `batch --emit-sketches DIR` folds its share of the Parquet files and writes the
//! integer sketches instead of testing them; `merge` adds the files up (exactly, in any
//! order) and runs the tests once, so the records equal one `batch` over all the files.
//!
//! A file is `LDPP`, a format version, a JSON header (the ldpstream version and, per
//! stream, the input files folded), the streams' sketches in the state encoding
//! ([`crate::state_codec`], with the settings they were counted under), and a CRC-32C of all
//! of it. `merge` refuses files whose settings differ from its config's, a stream missing
//! from a file, and an input file folded into two of them (which would count it twice).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use ldpstream_config::{Config, StreamConfig};
use ldpstream_connectors::position::Position;
use ldpstream_engine::stream::{stream_pane_width, PanedDelta};
use ldpstream_engine::window::RestoredPanes;
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::state_codec::{self, describe_changes, settings_of, StreamCheckpoint};

pub const MAGIC: [u8; 4] = *b"LDPP";
pub const VERSION: u8 = 1;
/// The extension `batch --emit-sketches` gives its files.
pub const EXTENSION: &str = "ldpp";

#[derive(Debug, Serialize, Deserialize)]
struct Header {
    ldpstream: String,
    /// Per stream: the absolute paths of the Parquet files folded into its sketches.
    inputs: BTreeMap<String, Vec<String>>,
}

/// One stream's share: the files it folded and their sketches.
pub struct StreamPart {
    pub inputs: Vec<PathBuf>,
    pub sketches: PanedDelta,
}

fn absolute(p: &Path) -> String {
    std::path::absolute(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

/// The bytes of a partial sketch file for `parts` (in config order).
pub fn encode(parts: &[(&StreamConfig, StreamPart)]) -> Vec<u8> {
    let header = Header {
        ldpstream: env!("CARGO_PKG_VERSION").to_string(),
        inputs: parts
            .iter()
            .map(|(s, p)| {
                (
                    s.name.clone(),
                    p.inputs.iter().map(|f| absolute(f)).collect(),
                )
            })
            .collect(),
    };
    let streams: Vec<StreamCheckpoint> = parts
        .iter()
        .map(|(stream, part)| StreamCheckpoint {
            name: stream.name.clone(),
            pane_width: stream_pane_width(stream),
            panes: RestoredPanes {
                max_event: part.sketches.max_ts,
                late: part.sketches.late,
                finalized_through: None,
                first_pane: None,
                // The reports without event time, as serve keeps them.
                retired: part.sketches.untimed.clone(),
                panes: part.sketches.panes.clone(),
            },
            position: Position::Start,
            ledger: None,
            settings: Some(settings_of(stream)),
        })
        .collect();
    let header = serde_json::to_vec(&header).unwrap_or_default();
    let mut out = Vec::new();
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(&state_codec::encode(&streams));
    let sum = crc32c::crc32c(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// Writes `parts` into `dir` (created if missing), atomically, under a name derived from
/// the input files: a retried job replaces its own file instead of adding a second copy.
pub fn write(dir: &Path, parts: &[(&StreamConfig, StreamPart)]) -> Result<PathBuf, Error> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |e: std::io::Error| Error::Partial {
            path,
            message: e.to_string(),
        }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut names: Vec<String> = parts
        .iter()
        .flat_map(|(s, p)| {
            p.inputs
                .iter()
                .map(move |f| format!("{}\n{}", s.name, absolute(f)))
        })
        .collect();
    names.sort();
    let id = crc32c::crc32c(names.join("\n").as_bytes());
    let target = dir.join(format!("sketches-{id:08x}.{EXTENSION}"));
    let bytes = encode(parts);
    ldpstream_connectors::atomic_file::write_atomically(&target, |mut file| {
        file.write_all(&bytes)
            .map_err(|source| ldpstream_connectors::ConnectorError::Io {
                path: target.display().to_string(),
                source,
            })?;
        Ok(file)
    })?;
    Ok(target)
}

/// A decoded partial sketch file.
pub struct Partial {
    pub inputs: BTreeMap<String, Vec<String>>,
    pub streams: Vec<StreamCheckpoint>,
}

/// Reads a partial sketch file; `origin` names it in errors.
pub fn decode(bytes: &[u8], origin: &str) -> Result<Partial, Error> {
    let err = |message: String| Error::Partial {
        path: origin.to_string(),
        message,
    };
    if bytes.len() < 9 + 4 || bytes[..4] != MAGIC {
        return Err(err(
            "not an ldpstream sketch file (written by `batch --emit-sketches`)".into(),
        ));
    }
    if bytes[4] != VERSION {
        return Err(err(format!(
            "format version {} (this ldpstream reads version {VERSION})",
            bytes[4]
        )));
    }
    let (body, sum) = bytes.split_at(bytes.len() - 4);
    let mut stored = [0u8; 4];
    stored.copy_from_slice(sum);
    if crc32c::crc32c(body) != u32::from_le_bytes(stored) {
        return Err(err(
            "checksum mismatch: the file is damaged or was cut short".into(),
        ));
    }
    let mut len = [0u8; 4];
    len.copy_from_slice(&body[5..9]);
    let header_end = 9usize.saturating_add(u32::from_le_bytes(len) as usize);
    let header = body
        .get(9..header_end)
        .ok_or_else(|| err("the header runs past the end of the file".into()))?;
    let header: Header = serde_json::from_slice(header).map_err(|e| err(format!("header: {e}")))?;
    let streams = state_codec::decode(&body[header_end..], origin)?;
    Ok(Partial {
        inputs: header.inputs,
        streams,
    })
}

/// The merged sketches of every stream of `config` from the partial files `files`, and
/// per stream the union of the input files folded into them.
pub fn merge_files(
    config: &Config,
    files: &[PathBuf],
) -> Result<BTreeMap<String, (Vec<String>, PanedDelta)>, Error> {
    let conflict = |message: String| Error::PartialConflict { message };
    let mut merged: BTreeMap<String, (Vec<String>, PanedDelta)> = BTreeMap::new();
    // Which file each (stream, input) came from, to refuse counting an input twice.
    let mut seen: BTreeMap<(String, String), String> = BTreeMap::new();
    for file in files {
        let shown = file.display().to_string();
        let bytes = std::fs::read(file).map_err(|e| Error::Partial {
            path: shown.clone(),
            message: e.to_string(),
        })?;
        let partial = decode(&bytes, &shown)?;
        for stored in &partial.streams {
            if !config.streams.iter().any(|s| s.name == stored.name) {
                return Err(conflict(format!(
                    "{shown} has stream {:?}, which the config does not have",
                    stored.name
                )));
            }
        }
        for stream in &config.streams {
            let stored = partial
                .streams
                .iter()
                .find(|s| s.name == stream.name)
                .ok_or_else(|| {
                    conflict(format!(
                        "{shown} has no sketches of stream {:?}: it was written under another config",
                        stream.name
                    ))
                })?;
            let now = settings_of(stream);
            if let Some(changes) = stored
                .settings
                .as_ref()
                .and_then(|old| describe_changes(&stream.name, old, &now))
            {
                return Err(conflict(format!(
                    "{shown} was counted under other settings: {changes}"
                )));
            }
            if stored.pane_width != stream_pane_width(stream) {
                return Err(conflict(format!(
                    "{shown}: stream {:?} has panes of {} ms, the config needs {} ms",
                    stream.name,
                    stored.pane_width,
                    stream_pane_width(stream)
                )));
            }
            let inputs = partial
                .inputs
                .get(&stream.name)
                .cloned()
                .unwrap_or_default();
            for input in &inputs {
                if let Some(first) =
                    seen.insert((stream.name.clone(), input.clone()), shown.clone())
                {
                    return Err(conflict(format!(
                        "input {input} of stream {:?} is in both {first} and {shown}; merging \
                         them would count its reports twice",
                        stream.name
                    )));
                }
            }
            let delta = PanedDelta {
                panes: stored.panes.panes.clone(),
                untimed: stored.panes.retired.clone(),
                late: stored.panes.late,
                max_ts: stored.panes.max_event,
                max_groups: Some(stream.max_groups),
            };
            let entry = merged.entry(stream.name.clone()).or_default();
            entry.0.extend(inputs);
            entry.1.merge(delta)?;
        }
    }
    Ok(merged)
}
