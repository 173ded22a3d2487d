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
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::stream::{stream_pane_width, PanedDelta};
use ldpstream_engine::window::RestoredPanes;
use serde::{Deserialize, Serialize};
use sha2::Digest;

use crate::error::{Conflict, Error};
use crate::row_digest::RowDigest;
use crate::state_codec::{self, describe_changes, settings_of, StreamCheckpoint};

pub const MAGIC: [u8; 4] = *b"LDPP";
pub const VERSION: u8 = 1;
/// The extension `batch --emit-sketches` gives its files.
pub const EXTENSION: &str = "ldpp";

#[derive(Debug, Serialize, Deserialize)]
struct Header {
    ldpstream: String,
    /// Per stream: the canonical paths of the Parquet files folded into its sketches.
    inputs: BTreeMap<String, Vec<String>>,
    /// Per stream, in the order of `inputs`: each file's content fingerprint
    /// ([`input_id`]). Absent from files written before it existed.
    #[serde(default)]
    input_ids: BTreeMap<String, Vec<String>>,
    /// Per budgeted stream of in-memory data: the rows' multiset digest
    /// ([`crate::row_digest::RowDigest::label`]), the privacy ledger's identity of them.
    /// Absent from files of files, and from files written before it existed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    ledger_ids: BTreeMap<String, String>,
}

/// One stream's share: the files it folded and their sketches.
pub struct StreamPart {
    pub inputs: Vec<PathBuf>,
    pub sketches: PanedDelta,
}

fn absolute(p: &Path) -> String {
    std::fs::canonicalize(p)
        .or_else(|_| std::path::absolute(p))
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

/// A Parquet file's identity wherever it is read: SHA-256 of its length and its footer
/// (schema, row groups, their sizes and statistics). The same file under two spellings,
/// behind a symlink or copied to another machine has one identity, so `merge` can refuse
/// counting it twice; files on two machines that share a path but not their content do
/// not collide.
pub fn input_id(path: &Path) -> std::io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let mut tail = [0u8; 8];
    let footer = if len >= 12 {
        file.seek(SeekFrom::End(-8))?;
        file.read_exact(&mut tail)?;
        let footer_len = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
        if &tail[4..] == b"PAR1" && footer_len + 8 <= len {
            footer_len + 8
        } else {
            len.min(1 << 16)
        }
    } else {
        len
    };
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(len - footer))?;
    file.take(footer).read_to_end(&mut bytes)?;
    let mut hasher = sha2::Sha256::new();
    hasher.update(len.to_le_bytes());
    hasher.update(&bytes);
    Ok(crate::digest::sha256_label(&hasher.finalize().into()))
}

/// Every stream's input fingerprints, in the order of its inputs.
fn input_ids(
    parts: &[(&StreamConfig, StreamPart)],
) -> Result<BTreeMap<String, Vec<String>>, Error> {
    parts
        .iter()
        .map(|(s, p)| {
            let ids = p
                .inputs
                .iter()
                .map(|f| {
                    input_id(f).map_err(|e| Error::Partial {
                        path: f.display().to_string(),
                        message: format!("cannot fingerprint the input: {e}"),
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok((s.name.clone(), ids))
        })
        .collect()
}

/// The bytes of a partial sketch file for `parts` (in config order).
pub fn encode(
    parts: &[(&StreamConfig, StreamPart)],
    input_ids: BTreeMap<String, Vec<String>>,
) -> Vec<u8> {
    encode_partial(&Partial {
        inputs: parts
            .iter()
            .map(|(s, p)| {
                (
                    s.name.clone(),
                    p.inputs.iter().map(|f| absolute(f)).collect(),
                )
            })
            .collect(),
        input_ids,
        ledger_ids: BTreeMap::new(),
        streams: parts
            .iter()
            .map(|(stream, part)| stream_part(stream, &part.sketches))
            .collect(),
    })
}

/// One stream's folded sketches as a sketch file stores them, with the settings they were
/// counted under.
pub fn stream_part(stream: &StreamConfig, sketches: &PanedDelta) -> StreamCheckpoint {
    StreamCheckpoint {
        name: stream.name.clone(),
        pane_width: stream_pane_width(stream),
        panes: RestoredPanes {
            max_event: sketches.max_ts,
            late: sketches.late,
            finalized_through: None,
            first_pane: None,
            // The reports without event time, as serve keeps them.
            retired: sketches.untimed.clone(),
            panes: sketches.panes.clone(),
        },
        position: Position::Start,
        ledger: None,
        settings: Some(settings_of(stream)),
        latches: Vec::new(),
    }
}

/// The bytes of a partial sketch file holding `partial` (what [`decode`] reads back).
pub fn encode_partial(partial: &Partial) -> Vec<u8> {
    let header = Header {
        input_ids: partial.input_ids.clone(),
        ldpstream: env!("CARGO_PKG_VERSION").to_string(),
        inputs: partial.inputs.clone(),
        ledger_ids: partial.ledger_ids.clone(),
    };
    let header = serde_json::to_vec(&header).unwrap_or_default();
    let mut out = Vec::new();
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(&state_codec::encode(&partial.streams));
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
    let bytes = encode(parts, input_ids(parts)?);
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
#[derive(Debug, Clone)]
pub struct Partial {
    pub inputs: BTreeMap<String, Vec<String>>,
    pub input_ids: BTreeMap<String, Vec<String>>,
    /// Per stream, the multiset digest of its in-memory rows, for the privacy ledger
    /// ([`crate::row_digest`]); a stream without one is identified by its inputs.
    pub ledger_ids: BTreeMap<String, String>,
    pub streams: Vec<StreamCheckpoint>,
}

/// The digests of `a` and `b` together: both parts' rows. None when either has none (its
/// rows are unknown, so the sum could not name all of them).
fn add_ledger_ids(a: Option<&String>, b: Option<&String>) -> Option<String> {
    let (a, b) = (RowDigest::parse(a?)?, RowDigest::parse(b?)?);
    Some(a.plus(b).label())
}

/// The names a stream's privacy ledger knows its merged input by: the rows' digest when
/// every part had one (in-memory data, however it was chunked or partitioned), else the
/// union of the parts' inputs.
fn ledger_names(inputs: Vec<String>, digest: Option<String>) -> Vec<String> {
    match digest {
        Some(d) => vec![format!("{}{d}", crate::memory_id::MEMORY_INPUT)],
        None => inputs,
    }
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
    // The sketches use the checkpoint encoding, but the file is a sketch file: say so.
    let streams = state_codec::decode(&body[header_end..], origin).map_err(|e| match e {
        Error::Checkpoint { message, .. } => err(message),
        other => other,
    })?;
    Ok(Partial {
        inputs: header.inputs,
        input_ids: header.input_ids,
        ledger_ids: header.ledger_ids,
        streams,
    })
}

/// Which file each input of each stream came from, so that no input is counted twice.
#[derive(Default)]
struct SeenInputs {
    /// (stream, content fingerprint) → file.
    ids: BTreeMap<(String, String), String>,
    /// (stream, canonical path) → (file, whether that file had fingerprints).
    paths: BTreeMap<(String, String), (String, bool)>,
}

impl SeenInputs {
    /// Files with fingerprints are told apart by content, so two machines' files at one
    /// path do not collide; a file without them (written before fingerprints) is told
    /// apart by canonical path, from every other file.
    fn claim(
        &mut self,
        stream: &str,
        shown: &str,
        paths: &[String],
        ids: Option<&Vec<String>>,
    ) -> Result<(), Error> {
        let twice = |input: &str, first: &str| Error::PartialConflict {
            kind: Conflict::DoubleCount,
            message: format!(
                "input {input} of stream {stream:?} is in both {first} and {shown}; merging \
                 them would count its reports twice"
            ),
        };
        for (i, path) in paths.iter().enumerate() {
            let key = (stream.to_string(), path.clone());
            let id = ids.and_then(|ids| ids.get(i));
            if let Some((first, had_ids)) = self.paths.get(&key) {
                if id.is_none() || !had_ids {
                    return Err(twice(path, first));
                }
            }
            if let Some(id) = id {
                if let Some(first) = self.ids.get(&(stream.to_string(), id.clone())) {
                    return Err(twice(&format!("{path} ({id})"), first));
                }
                self.ids
                    .insert((stream.to_string(), id.clone()), shown.to_string());
            }
            self.paths.insert(key, (shown.to_string(), id.is_some()));
        }
        Ok(())
    }
}

/// One stream's part of a partial file, checked against the config: counted under the
/// same settings (a format without settings is refused: its sketches could have been
/// counted under any ε or d), with panes of the config's width and sketches of the
/// mechanism's shape.
fn checked_delta(
    stream: &StreamConfig,
    stored: &StreamCheckpoint,
    shown: &str,
) -> Result<PanedDelta, Error> {
    let conflict = |message: String| Error::PartialConflict {
        kind: Conflict::Settings,
        message,
    };
    let Some(old) = stored.settings.as_ref() else {
        return Err(conflict(format!(
            "{shown}: stream {:?} carries no settings (an older checkpoint format), so it \
             could have been counted under any mechanism; emit it again",
            stream.name
        )));
    };
    if let Some(changes) = describe_changes(&stream.name, old, &settings_of(stream)) {
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
    let mechanism = Mechanism::from_config(&stream.mechanism)?;
    let sketches = stored
        .panes
        .panes
        .values()
        .chain(std::iter::once(&stored.panes.retired))
        .flat_map(|g| g.values());
    for sketch in sketches {
        mechanism
            .check_sketch(sketch)
            .map_err(|e| Error::PartialConflict {
                kind: Conflict::Shape,
                message: format!(
                    "{shown}: stream {:?} holds a sketch its mechanism does not make: {e}",
                    stream.name
                ),
            })?;
    }
    Ok(PanedDelta {
        panes: stored.panes.panes.clone(),
        untimed: stored.panes.retired.clone(),
        late: stored.panes.late,
        max_ts: stored.panes.max_event,
        max_groups: Some(stream.max_groups),
    })
}

/// The merged sketches of every stream of `config` from the partial files `files`, and
/// per stream the union of the input files folded into them.
pub fn merge_files(
    config: &Config,
    files: &[PathBuf],
) -> Result<BTreeMap<String, (Vec<String>, PanedDelta)>, Error> {
    let mut partials = Vec::with_capacity(files.len());
    for file in files {
        let shown = file.display().to_string();
        let bytes = std::fs::read(file).map_err(|e| Error::Partial {
            path: shown.clone(),
            message: e.to_string(),
        })?;
        let partial = decode(&bytes, &shown)?;
        partials.push((shown, partial));
    }
    merge_partials(config, partials)
}

/// [`merge_files`] over decoded partials, each with the name that shows it in errors
/// (a file's path; the Python package's sketches). Every check of `merge` is here.
///
/// Per stream it returns the names the privacy ledger knows the merged input by (the
/// union of the input files, or for in-memory rows their digest: [`crate::row_digest`])
/// and the merged sketches.
pub fn merge_partials(
    config: &Config,
    partials: Vec<(String, Partial)>,
) -> Result<BTreeMap<String, (Vec<String>, PanedDelta)>, Error> {
    let conflict = |message: String| Error::PartialConflict {
        kind: Conflict::Settings,
        message,
    };
    let mut merged: BTreeMap<String, (Vec<String>, PanedDelta)> = BTreeMap::new();
    let mut digests: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut seen = SeenInputs::default();
    for (shown, partial) in partials {
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
            let delta = checked_delta(stream, stored, &shown)?;
            let inputs = claim_inputs(&mut seen, &partial, &stream.name, &shown)?;
            let ours = partial.ledger_ids.get(&stream.name);
            let digest = match digests.get(&stream.name) {
                None => ours.cloned(),
                Some(sum) => add_ledger_ids(sum.as_ref(), ours),
            };
            digests.insert(stream.name.clone(), digest);
            let entry = merged.entry(stream.name.clone()).or_default();
            entry.0.extend(inputs);
            entry
                .1
                .merge(delta)
                .map_err(|e| unaddable(&shown, &stream.name, e))?;
        }
    }
    Ok(merged
        .into_iter()
        .map(|(name, (inputs, delta))| {
            let digest = digests.remove(&name).flatten();
            (name, (ledger_names(inputs, digest), delta))
        })
        .collect())
}

/// A stream's inputs in `partial`, claimed in `seen` so that none is counted twice.
fn claim_inputs(
    seen: &mut SeenInputs,
    partial: &Partial,
    stream: &str,
    shown: &str,
) -> Result<Vec<String>, Error> {
    let conflict = |message: String| Error::PartialConflict {
        kind: Conflict::DoubleCount,
        message,
    };
    let inputs = partial.inputs.get(stream).cloned().unwrap_or_default();
    // Without its inputs a file's sketches could be merged any number of times.
    if inputs.is_empty() {
        return Err(conflict(format!(
            "{shown}: stream {stream:?} names no input files, so nothing shows that its \
             sketches are not counted twice; emit it again with `batch --emit-sketches`"
        )));
    }
    let ids = partial.input_ids.get(stream);
    if ids.is_some_and(|ids| ids.len() != inputs.len()) {
        return Err(conflict(format!(
            "{shown}: stream {stream:?} has {} inputs but {} fingerprints",
            inputs.len(),
            ids.map_or(0, Vec::len)
        )));
    }
    seen.claim(stream, shown, &inputs, ids)?;
    Ok(inputs)
}

/// Adds `other` (shown as `shown` in errors) into `into` without a config: the Python
/// package's `Sketches.merge`. A stream in both must have been counted under the same
/// settings and panes, and no input may be in both; `merge`'s messages say so. A stream
/// in one only is kept as it is. The config's own checks come later, when the merged
/// sketches are tested ([`merge_partials`]).
pub fn combine(into: &mut Partial, other: Partial, shown: &str) -> Result<(), Error> {
    let conflict = |message: String| Error::PartialConflict {
        kind: Conflict::Settings,
        message,
    };
    let mut seen = SeenInputs::default();
    let names: Vec<String> = into.streams.iter().map(|s| s.name.clone()).collect();
    for name in &names {
        claim_inputs(&mut seen, into, name, "the sketches merged into")?;
    }
    for theirs in other.streams.iter() {
        if names.contains(&theirs.name) {
            claim_inputs(&mut seen, &other, &theirs.name, shown)?;
        }
    }
    for theirs in other.streams {
        let name = theirs.name.clone();
        let (inputs, ids) = (
            other.inputs.get(&name).cloned().unwrap_or_default(),
            other.input_ids.get(&name).cloned(),
        );
        let digest = other.ledger_ids.get(&name);
        match into.streams.iter_mut().find(|s| s.name == name) {
            None => {
                into.streams.push(theirs);
                if let Some(d) = digest {
                    into.ledger_ids.insert(name.clone(), d.clone());
                }
            }
            Some(ours) => {
                // As `merge` says it: from the incoming sketches' settings to the target's.
                if let (Some(old), Some(new)) = (&theirs.settings, &ours.settings) {
                    if let Some(changes) = describe_changes(&name, old, new) {
                        return Err(conflict(format!(
                            "{shown} was counted under other settings: {changes}"
                        )));
                    }
                }
                if ours.settings.is_none() || theirs.settings.is_none() {
                    return Err(conflict(format!(
                        "{shown}: stream {name:?} carries no settings (an older checkpoint \
                         format), so it could have been counted under any mechanism; emit it again"
                    )));
                }
                if ours.pane_width != theirs.pane_width {
                    return Err(conflict(format!(
                        "{shown}: stream {name:?} has panes of {} ms, the config needs {} ms",
                        theirs.pane_width, ours.pane_width
                    )));
                }
                let mut delta = delta_of(ours);
                delta
                    .merge(delta_of(&theirs))
                    .map_err(|e| unaddable(shown, &name, e))?;
                ours.panes = panes_of(delta);
                match add_ledger_ids(into.ledger_ids.get(&name), digest) {
                    Some(sum) => into.ledger_ids.insert(name.clone(), sum),
                    None => into.ledger_ids.remove(&name),
                };
            }
        }
        into.inputs.entry(name.clone()).or_default().extend(inputs);
        if let Some(ids) = ids {
            into.input_ids.entry(name).or_default().extend(ids);
        }
    }
    Ok(())
}

/// Stored sketches that cannot be added (another domain, counts that would overflow):
/// the stored bytes are at fault, not ldpstream, so it is a conflict of the input.
fn unaddable(shown: &str, stream: &str, e: impl std::fmt::Display) -> Error {
    Error::PartialConflict {
        kind: Conflict::Shape,
        message: format!("{shown}: stream {stream:?}: the sketches cannot be added: {e}"),
    }
}

/// A stored stream's sketches as a delta (no group cap: the config's comes with it).
fn delta_of(stored: &StreamCheckpoint) -> PanedDelta {
    PanedDelta {
        panes: stored.panes.panes.clone(),
        untimed: stored.panes.retired.clone(),
        late: stored.panes.late,
        max_ts: stored.panes.max_event,
        max_groups: None,
    }
}

fn panes_of(delta: PanedDelta) -> RestoredPanes {
    RestoredPanes {
        max_event: delta.max_ts,
        late: delta.late,
        finalized_through: None,
        first_pane: None,
        retired: delta.untimed,
        panes: delta.panes,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use ldpstream_config::Config;
    use ldpstream_connectors::position::Position;
    use ldpstream_engine::sketch::{CountSketch, Sketch};
    use ldpstream_engine::window::RestoredPanes;

    use super::*;

    fn stream(domain: u32) -> StreamConfig {
        let toml = format!(
            "[[stream]]\nname = \"s\"\nsource = {{ kind = \"parquet\", paths = [\"x\"] }}\n\
             mechanism = {{ kind = \"grr\", epsilon = 1.0, domain = {domain} }}\n\
             [[stream.test]]\nname = \"t\"\nkind = \"gof\"\nnull = \"uniform\"\n"
        );
        Config::from_toml_str(&toml, "t").unwrap().streams.remove(0)
    }

    fn stored(under: &StreamConfig, sketch_domain: usize) -> StreamCheckpoint {
        let mut retired = BTreeMap::new();
        retired.insert(
            vec![],
            Sketch::Counts(CountSketch::from_counts(vec![5; sketch_domain])),
        );
        StreamCheckpoint {
            name: under.name.clone(),
            pane_width: stream_pane_width(under),
            panes: RestoredPanes {
                retired,
                ..RestoredPanes::default()
            },
            position: Position::Start,
            ledger: None,
            settings: Some(settings_of(under)),
            latches: Vec::new(),
        }
    }

    // The probe's merge_crafted: a d = 3 sketch re-wrapped into a d = 10 stream's file
    // was merged and gave a 3-entry estimate; an ε = 2 file re-wrapped in a format without
    // settings was tested as ε = 1.
    #[test]
    fn sketches_of_another_shape_or_without_settings_are_refused() {
        let ten = stream(10);
        assert!(checked_delta(&ten, &stored(&ten, 10), "f").is_ok());
        let e = checked_delta(&ten, &stored(&ten, 3), "f").unwrap_err();
        assert!(e.to_string().contains("does not make"), "{e}");
        let mut bare = stored(&ten, 10);
        bare.settings = None;
        let e = checked_delta(&ten, &bare, "f").unwrap_err();
        assert!(e.to_string().contains("carries no settings"), "{e}");
    }

    fn partial(
        under: &StreamConfig,
        sketch_domain: usize,
        input: &str,
        rows: Option<&str>,
    ) -> Partial {
        let name = under.name.clone();
        Partial {
            inputs: BTreeMap::from([(name.clone(), vec![format!("arrow:{input}")])]),
            input_ids: BTreeMap::from([(name.clone(), vec![input.to_string()])]),
            ledger_ids: rows
                .map(|r| BTreeMap::from([(name.clone(), r.to_string())]))
                .unwrap_or_default(),
            streams: vec![stored(under, sketch_domain)],
        }
    }

    /// Issue 43: a stored sketch of another domain (or counts past 2^64) made
    /// `Sketches.merge` fail as an internal error (RuntimeError); it is the input's fault.
    #[test]
    fn sketches_that_cannot_be_added_are_a_conflict_of_the_input() {
        let ten = stream(10);
        let mut ours = partial(&ten, 10, "a", None);
        let e = combine(&mut ours, partial(&ten, 5, "b", None), "theirs").unwrap_err();
        assert!(
            matches!(
                e,
                Error::PartialConflict {
                    kind: Conflict::Shape,
                    ..
                }
            ) && e
                .to_string()
                .contains("theirs: stream \"s\": the sketches cannot be added"),
            "{e}"
        );
        assert_eq!(e.fault(), crate::Fault::User);
    }

    /// Issue 43 (ledger_rechunk, part 2): row digests add up when every part has one, and
    /// the merged ledger input is then the digest, not the chunk names.
    #[test]
    fn row_digests_add_up_through_combine_and_merge() {
        let ten = stream(10);
        let (a, b) = (
            RowDigest { sum: 5, rows: 2 },
            RowDigest {
                sum: u128::MAX,
                rows: 3,
            },
        );
        let mut ours = partial(&ten, 10, "a", Some(&a.label()));
        combine(&mut ours, partial(&ten, 10, "b", Some(&b.label())), "b").unwrap();
        let sum = RowDigest { sum: 4, rows: 5 };
        assert_eq!(ours.ledger_ids["s"], sum.label());
        let config = Config::from_toml_str(
            "[[stream]]\nname = \"s\"\nsource = { kind = \"parquet\", paths = [\"x\"] }\n\
             mechanism = { kind = \"grr\", epsilon = 1.0, domain = 10 }\n\
             [[stream.test]]\nname = \"t\"\nkind = \"gof\"\nnull = \"uniform\"\n",
            "t",
        )
        .unwrap();
        let merged = merge_partials(&config, vec![("p".into(), ours.clone())]).unwrap();
        assert_eq!(merged["s"].0, [format!("arrow:{}", sum.label())]);
        // A part without a digest leaves the merged input its chunk names.
        combine(&mut ours, partial(&ten, 10, "c", None), "c").unwrap();
        assert!(!ours.ledger_ids.contains_key("s"));
        let merged = merge_partials(&config, vec![("p".into(), ours)]).unwrap();
        assert_eq!(merged["s"].0, ["arrow:a", "arrow:b", "arrow:c"]);
    }

    // The probe's nit: a damaged sketch file's error said "checkpoint f: ...".
    #[test]
    fn a_damaged_sketch_body_is_named_as_a_sketch_file() {
        let header = br#"{"ldpstream":"0","inputs":{}}"#;
        let mut bytes = MAGIC.to_vec();
        bytes.push(VERSION);
        bytes.extend_from_slice(&(header.len() as u32).to_le_bytes());
        bytes.extend_from_slice(header);
        bytes.extend_from_slice(b"not sketches");
        let sum = crc32c::crc32c(&bytes);
        bytes.extend_from_slice(&sum.to_le_bytes());
        let e = decode(&bytes, "f.ldpp").err().unwrap().to_string();
        assert!(e.starts_with("sketch file f.ldpp: "), "{e}");
    }

    #[test]
    fn one_file_under_two_spellings_has_one_identity() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("a.parquet"), b"PAR1 body \x05\x00\x00\x00PAR1").unwrap();
        std::fs::write(data.join("b.parquet"), b"PAR1 other \x05\x00\x00\x00PAR1").unwrap();
        std::os::unix::fs::symlink(&data, dir.path().join("link")).unwrap();
        let id = |p: &std::path::Path| input_id(p).unwrap();
        let a = id(&data.join("a.parquet"));
        assert_eq!(a, id(&dir.path().join("link/a.parquet")));
        assert_eq!(a, id(&data.join("./a.parquet")));
        assert_ne!(a, id(&data.join("b.parquet")));
        assert_eq!(
            absolute(&dir.path().join("link/./a.parquet")),
            absolute(&data.join("a.parquet"))
        );
    }
}
