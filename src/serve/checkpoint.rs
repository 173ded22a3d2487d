//! Checkpoints: every stream's panes (as [`Sketch::to_bytes`]), watermark state and source
//! position, written together, atomically (temporary file, fsync, rename, fsync of the
//! directory), so that a restart neither loses nor double-counts a report (rule 5).
//!
//! Layout, little-endian: `"LDPC"`, format version (u8), stream count (u32), then per
//! stream: name, pane width (i64), max event time, late count, finalized-through, first
//! pane (options are a u8 flag then an i64), source position (u32 count of
//! (string, u64) pairs), retired groups, pane count (u32) and per pane its start (i64) and
//! groups. Groups: count (u32), then per group the key (u32 count of optional strings)
//! and the sketch bytes (u32 length first). Version 2 adds, per stream after the panes, the
//! privacy-budget ledger of curator-model streams (u8 flag, then its JSON as a string).
//! Version 3 adds, per stream after the ledger, the settings its sketches were counted
//! under ([`settings_of`]: u32 count of (string, string) pairs), so that a restart under
//! another mechanism, ε, column or window is refused instead of merging incompatible
//! counts. Version 4 ends in a CRC-32C (Castagnoli, as Kafka's record batches use) of
//! everything before it; versions 1 to 3 end in an FNV-1a 64 hash instead, and still read
//! (1 and 2 without settings, so unchecked).
//!
//! The directory keeps the last two checkpoints: `checkpoint.ldpc` and the one before it,
//! `checkpoint.prev.ldpc`. A newest checkpoint that is missing, truncated or fails its
//! checksum is passed over, with a warning, for the previous one; only when both are
//! unusable does the restart fail (it never silently starts from nothing).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use ldpstream_engine::sketch::Sketch;
use ldpstream_engine::window::{GroupKey, Grouped, PaneStore, RestoredPanes};

use ldpstream_config::{compact, MechanismConfig, StreamConfig, WindowConfig};
use ldpstream_connectors::atomic_file;
use ldpstream_connectors::{ConnectorError, Position};

use crate::error::Error;
use crate::ledger_file::LedgerEntry;
use tracing::warn;

pub const MAGIC: [u8; 4] = *b"LDPC";
pub const VERSION: u8 = 4;
/// The file name of the latest checkpoint inside the checkpoint directory.
pub const FILE_NAME: &str = "checkpoint.ldpc";
/// The checkpoint before the newest one.
pub const PREVIOUS_FILE_NAME: &str = "checkpoint.prev.ldpc";

/// One stream's checkpointed state.
#[derive(Debug, Clone)]
pub struct StreamCheckpoint {
    pub name: String,
    pub pane_width: i64,
    pub panes: RestoredPanes,
    pub position: Position,
    /// Curator-model streams: the privacy-budget ledger, so spends survive restarts.
    pub ledger: Option<LedgerEntry>,
    /// The settings the sketches were counted under; None in files before version 3.
    pub settings: Option<Settings>,
}

/// A stream's settings that its sketches depend on, as (name, value) pairs.
pub type Settings = Vec<(String, String)>;

/// The mechanism and its parameters, the columns read, and the set of windows: what must
/// not change between a checkpoint and the config that restores it.
pub fn settings_of(stream: &StreamConfig) -> Settings {
    let mut out: Settings = Vec::new();
    let mut put = |k: &str, v: String| out.push((k.to_string(), v));
    let m = &stream.mechanism;
    put("mechanism kind", m.kind().to_string());
    match m {
        MechanismConfig::Grr { epsilon, .. }
        | MechanismConfig::Bitflip { epsilon, .. }
        | MechanismConfig::Laplace { epsilon, .. }
        | MechanismConfig::Hadamard { epsilon, .. } => put("mechanism epsilon", compact(*epsilon)),
        MechanismConfig::Cohort {
            epsilon,
            cohorts,
            seed,
            ..
        } => {
            put("mechanism epsilon", compact(*epsilon));
            put("mechanism cohorts", cohorts.to_string());
            put("mechanism seed", seed.to_string());
        }
        MechanismConfig::Gauss { rho, .. } => put("mechanism rho", compact(*rho)),
        MechanismConfig::Matrix { matrix } => put("mechanism matrix", format!("{matrix:?}")),
        MechanismConfig::Raw { .. } => {}
    }
    put("mechanism domain", m.domain().to_string());
    let c = &stream.columns;
    put("column report", format!("{:?}", c.report));
    match m {
        MechanismConfig::Hadamard { .. } => put("column row", format!("{:?}", c.row)),
        MechanismConfig::Cohort { .. } => put("column cohort", format!("{:?}", c.cohort)),
        _ => {}
    }
    put("column ts", format!("{:?}", c.ts));
    put("columns group_by", format!("{:?}", c.group_by));
    let mut windows: Vec<String> = stream
        .tests
        .iter()
        .map(|t| match t.window {
            WindowConfig::Global => "global".to_string(),
            WindowConfig::Cumulative => "cumulative".to_string(),
            WindowConfig::Tumbling { size } => format!("tumbling {size}"),
            WindowConfig::Sliding { size, slide } => format!("sliding {size} by {slide}"),
        })
        .collect();
    windows.sort();
    windows.dedup();
    put("windows", format!("[{}]", windows.join(", ")));
    out
}

/// "stream s: mechanism epsilon changed from 1 to 3; ...", or None when nothing changed.
pub fn describe_changes(stream: &str, old: &Settings, new: &Settings) -> Option<String> {
    let find = |s: &Settings, k: &str| s.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let mut keys: Vec<&String> = old.iter().chain(new.iter()).map(|(k, _)| k).collect();
    // Keep the order settings_of gives, old keys first.
    let mut seen = std::collections::HashSet::new();
    keys.retain(|k| seen.insert(*k));
    let changes: Vec<String> = keys
        .into_iter()
        .filter_map(|k| {
            let (was, now) = (find(old, k), find(new, k));
            (was != now).then(|| {
                let show = |v: Option<String>| v.unwrap_or_else(|| "(none)".to_string());
                format!("{k} changed from {} to {}", show(was), show(now))
            })
        })
        .collect();
    (!changes.is_empty()).then(|| format!("stream {stream}: {}", changes.join("; ")))
}

impl StreamCheckpoint {
    /// Copies a store's state (call with the store locked, together with the position).
    pub fn capture(name: &str, store: &PaneStore, position: Position) -> Self {
        StreamCheckpoint {
            name: name.to_string(),
            pane_width: store.width(),
            panes: RestoredPanes {
                max_event: store.max_event(),
                late: store.late(),
                finalized_through: store.finalized_through(),
                first_pane: store.first_pane(),
                retired: store.retired().clone(),
                panes: store.panes().clone(),
            },
            position,
            ledger: None,
            settings: None,
        }
    }
}

/// The FNV-1a 64 hash that ended checkpoints before version 4.
fn fnv_checksum(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn put_opt(out: &mut Vec<u8>, v: Option<i64>) {
    out.push(u8::from(v.is_some()));
    out.extend_from_slice(&v.unwrap_or(0).to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_grouped(out: &mut Vec<u8>, g: &Grouped) {
    out.extend_from_slice(&(g.len() as u32).to_le_bytes());
    for (key, sketch) in g {
        out.extend_from_slice(&(key.len() as u32).to_le_bytes());
        for v in key {
            out.push(u8::from(v.is_some()));
            put_str(out, v.as_deref().unwrap_or(""));
        }
        let bytes = sketch.to_bytes();
        out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        out.extend_from_slice(&bytes);
    }
}

pub fn encode(streams: &[StreamCheckpoint]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.extend_from_slice(&(streams.len() as u32).to_le_bytes());
    for s in streams {
        put_str(&mut out, &s.name);
        out.extend_from_slice(&s.pane_width.to_le_bytes());
        put_opt(&mut out, s.panes.max_event);
        out.extend_from_slice(&s.panes.late.to_le_bytes());
        put_opt(&mut out, s.panes.finalized_through);
        put_opt(&mut out, s.panes.first_pane);
        let entries = s.position.to_entries();
        out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
        for (k, v) in &entries {
            put_str(&mut out, k);
            out.extend_from_slice(&v.to_le_bytes());
        }
        put_grouped(&mut out, &s.panes.retired);
        out.extend_from_slice(&(s.panes.panes.len() as u32).to_le_bytes());
        for (start, g) in &s.panes.panes {
            out.extend_from_slice(&start.to_le_bytes());
            put_grouped(&mut out, g);
        }
        // The ledger is small and rarely read: JSON keeps it inspectable.
        let ledger = s
            .ledger
            .as_ref()
            .and_then(|l| serde_json::to_string(l).ok());
        out.push(u8::from(ledger.is_some()));
        put_str(&mut out, ledger.as_deref().unwrap_or(""));
        let settings = s.settings.as_deref().unwrap_or_default();
        out.extend_from_slice(&(settings.len() as u32).to_le_bytes());
        for (k, v) in settings {
            put_str(&mut out, k);
            put_str(&mut out, v);
        }
    }
    let sum = crc32c::crc32c(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// Reads a checkpoint; `origin` names it in errors.
struct Reader<'a> {
    bytes: &'a [u8],
    origin: &'a str,
}

impl<'a> Reader<'a> {
    fn corrupt(&self, what: &str) -> Error {
        Error::Checkpoint {
            path: self.origin.to_string(),
            message: format!("corrupt: truncated or malformed while reading {what}"),
        }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Error> {
        if self.bytes.len() < n {
            return Err(self.corrupt(what));
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    fn u8(&mut self, what: &str) -> Result<u8, Error> {
        Ok(self.take(1, what)?[0])
    }

    fn u32(&mut self, what: &str) -> Result<u32, Error> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, what: &str) -> Result<u64, Error> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8, what)?);
        Ok(u64::from_le_bytes(a))
    }

    fn i64(&mut self, what: &str) -> Result<i64, Error> {
        Ok(self.u64(what)? as i64)
    }

    fn opt(&mut self, what: &str) -> Result<Option<i64>, Error> {
        let flag = self.u8(what)?;
        let v = self.i64(what)?;
        Ok((flag != 0).then_some(v))
    }

    fn string(&mut self, what: &str) -> Result<String, Error> {
        let n = self.u32(what)? as usize;
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec()).map_err(|_| self.corrupt(what))
    }

    fn grouped(&mut self) -> Result<Grouped, Error> {
        let groups = self.u32("group count")?;
        let mut g = Grouped::new();
        for _ in 0..groups {
            let cols = self.u32("group key")?;
            let mut key: GroupKey = Vec::new();
            for _ in 0..cols {
                let present = self.u8("group key value")? != 0;
                let v = self.string("group key value")?;
                key.push(present.then_some(v));
            }
            let n = self.u32("sketch length")? as usize;
            let bytes = self.take(n, "sketch")?;
            let sketch = Sketch::from_bytes(bytes).map_err(|e| Error::Checkpoint {
                path: self.origin.to_string(),
                message: format!("corrupt sketch: {e}"),
            })?;
            g.insert(key, sketch);
        }
        Ok(g)
    }
}

pub fn decode(bytes: &[u8], origin: &str) -> Result<Vec<StreamCheckpoint>, Error> {
    let err = |message: String| Error::Checkpoint {
        path: origin.to_string(),
        message,
    };
    if bytes.len() < 5 || bytes[..4] != MAGIC {
        return Err(err("not an ldpstream checkpoint (bad magic)".into()));
    }
    let version = bytes[4];
    if !(1..=VERSION).contains(&version) {
        return Err(err(format!(
            "unsupported checkpoint format version {} (this build reads version {VERSION}); \
             move the file aside to start from scratch",
            bytes[4]
        )));
    }
    let trailer = if version >= 4 { 4 } else { 8 };
    if bytes.len() < 5 + trailer {
        return Err(err("corrupt: truncated".into()));
    }
    let (body, sum) = bytes.split_at(bytes.len() - trailer);
    let intact = match *sum {
        [a, b, c, d] => crc32c::crc32c(body) == u32::from_le_bytes([a, b, c, d]),
        [a, b, c, d, e, f, g, h] => {
            fnv_checksum(body) == u64::from_le_bytes([a, b, c, d, e, f, g, h])
        }
        _ => false,
    };
    if !intact {
        return Err(err("corrupt: checksum mismatch".into()));
    }
    let mut r = Reader {
        bytes: &body[5..],
        origin,
    };
    let n = r.u32("stream count")?;
    let mut out = Vec::new();
    for _ in 0..n {
        let name = r.string("stream name")?;
        let pane_width = r.i64("pane width")?;
        let max_event = r.opt("max event time")?;
        let late = r.u64("late count")?;
        let finalized_through = r.opt("finalized-through")?;
        let first_pane = r.opt("first pane")?;
        let mut entries = Vec::new();
        for _ in 0..r.u32("position count")? {
            let k = r.string("position key")?;
            entries.push((k, r.u64("position")?));
        }
        let retired = r.grouped()?;
        let mut panes = BTreeMap::new();
        for _ in 0..r.u32("pane count")? {
            let start = r.i64("pane start")?;
            panes.insert(start, r.grouped()?);
        }
        let ledger = if version >= 2 {
            let present = r.u8("ledger flag")? != 0;
            let text = r.string("ledger")?;
            if present {
                Some(
                    serde_json::from_str(&text)
                        .map_err(|e| err(format!("corrupt ledger of stream {name:?}: {e}")))?,
                )
            } else {
                None
            }
        } else {
            None
        };
        let settings = if version >= 3 {
            let mut settings = Settings::new();
            for _ in 0..r.u32("settings count")? {
                let k = r.string("setting name")?;
                settings.push((k, r.string("setting value")?));
            }
            Some(settings)
        } else {
            None
        };
        let position = Position::from_entries(entries).map_err(|e| {
            err(format!(
                "stream {name:?}: unknown source position entry {:?}",
                e.0
            ))
        })?;
        out.push(StreamCheckpoint {
            name,
            pane_width,
            panes: RestoredPanes {
                max_event,
                late,
                finalized_through,
                first_pane,
                retired,
                panes,
            },
            position,
            ledger,
            settings,
        });
    }
    if !r.bytes.is_empty() {
        return Err(err("corrupt: trailing bytes".into()));
    }
    Ok(out)
}

/// Writes `bytes` as the directory's checkpoint, atomically (see [`crate::atomic_file`]).
pub fn write_atomically(dir: &Path, bytes: &[u8]) -> Result<PathBuf, Error> {
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| ConnectorError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let target = dir.join(FILE_NAME);
    // The newest is kept as the previous one (a hard link, no copy) before the atomic
    // replace: if the new one cannot be written (a full disk), the newest stays intact;
    // if it is written but later found damaged, the previous one is still there.
    let previous = dir.join(PREVIOUS_FILE_NAME);
    match std::fs::remove_file(&previous) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(io(&previous)(source).into()),
    }
    match std::fs::hard_link(&target, &previous) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => return Err(io(&previous)(source).into()),
    }
    atomic_file::write_atomically(&target, |mut file| {
        file.write_all(bytes).map_err(io(&target))?;
        Ok(file)
    })?;
    Ok(target)
}

/// One checkpoint file: None when it does not exist.
fn read_file(path: &Path) -> Result<Option<Vec<StreamCheckpoint>>, Error> {
    match std::fs::read(path) {
        Ok(bytes) => decode(&bytes, &path.display().to_string()).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ConnectorError::Io {
            path: path.display().to_string(),
            source,
        }
        .into()),
    }
}

/// Whether `path` holds a checkpoint of a format newer than this build reads: that is
/// not damage, and falling back to an older checkpoint would silently lose its progress.
fn is_newer_format(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|b| b.len() >= 5 && b[..4] == MAGIC && b[4] > VERSION)
}

/// The directory's newest usable checkpoint, or None when there is none yet. A damaged
/// newest checkpoint falls back to the previous one, with a warning.
pub fn read_latest(dir: &Path) -> Result<Option<Vec<StreamCheckpoint>>, Error> {
    let (newest, previous) = (dir.join(FILE_NAME), dir.join(PREVIOUS_FILE_NAME));
    let damage = match read_file(&newest) {
        Ok(Some(streams)) => return Ok(Some(streams)),
        Err(e) if is_newer_format(&newest) => return Err(e),
        Ok(None) => None,
        Err(e) => Some(e),
    };
    match (read_file(&previous), damage) {
        (Ok(Some(streams)), damage) => {
            match &damage {
                Some(e) => {
                    warn!(error = %e, previous = %previous.display(), "the newest checkpoint is unusable; restoring the previous one")
                }
                None => {
                    warn!(previous = %previous.display(), "no newest checkpoint (a write was cut short); restoring the previous one")
                }
            }
            Ok(Some(streams))
        }
        (Ok(None), None) => Ok(None),
        // Only a damaged newest one: never start from nothing without saying so.
        (Ok(None), Some(e)) => Err(e),
        (Err(e), None) => Err(e),
        (Err(previous_error), Some(e)) => Err(Error::Checkpoint {
            path: newest.display().to_string(),
            message: format!(
                "both checkpoints are unusable ({e}; and the previous one: {previous_error}); \
                 move the checkpoint directory aside to start from scratch"
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldpstream_config::MechanismConfig;
    use ldpstream_engine::mechanism::Mechanism;

    fn store() -> PaneStore {
        let m = Mechanism::from_config(&MechanismConfig::Grr {
            epsilon: 1.0,
            domain: 5,
        })
        .unwrap();
        let mut store = PaneStore::new(1000, 250);
        for (pane, group, reports) in [
            (0i64, Some("a"), vec![0u32, 1, 4, 9]),
            (1000, None, vec![2, 2, 3]),
            (5000, Some("b"), vec![1]),
        ] {
            let mut s = m.new_sketch();
            let arr = arrow::array::UInt32Array::from(reports);
            ldpstream_engine::fold::fold_batch(&m, &mut s, &arr, None).unwrap();
            let g = Grouped::from([(vec![group.map(str::to_string)], s)]);
            store.merge_pane(pane, g).unwrap();
        }
        store.observe(5100);
        store.add_late(7);
        store.mark_finalized(1000).unwrap();
        store
    }

    #[test]
    fn round_trip_restores_the_store_exactly() {
        let s = store();
        let mut kafka = ldpstream_connectors::KafkaPosition::default();
        kafka.next.insert(("events".to_string(), 0), 12);
        kafka.next.insert(("events".to_string(), 3), 7);
        let pos = Position::Kafka(kafka);
        let bytes = encode(&[StreamCheckpoint::capture("s", &s, pos.clone())]);
        let dir = tempfile::tempdir().unwrap();
        write_atomically(dir.path(), &bytes).unwrap();
        let back = read_latest(dir.path()).unwrap().unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].name, "s");
        assert_eq!(back[0].position, pos);
        let restored = PaneStore::restore(
            1000,
            250,
            usize::MAX,
            back.into_iter().next().unwrap().panes,
        )
        .unwrap();
        assert_eq!(restored.panes(), s.panes());
        assert_eq!(restored.retired(), s.retired());
        assert_eq!(restored.watermark(), s.watermark());
        assert_eq!(restored.late(), 7);
        assert_eq!(restored.finalized_through(), s.finalized_through());
        assert_eq!(restored.everything().unwrap(), s.everything().unwrap());
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(FILE_NAME)]);
    }

    #[test]
    fn corrupt_and_unknown_version_checkpoints_are_clear_errors() {
        let bytes = encode(&[StreamCheckpoint::capture("s", &store(), Position::Start)]);
        let mut flipped = bytes.clone();
        flipped[40] ^= 0x10;
        let e = decode(&flipped, "ck").unwrap_err().to_string();
        assert!(e.contains("ck") && e.contains("checksum mismatch"), "{e}");
        let mut newer = bytes.clone();
        newer[4] = 9;
        let e = decode(&newer, "ck").unwrap_err().to_string();
        assert!(
            e.contains("unsupported checkpoint format version 9") && e.contains("reads version 4"),
            "{e}"
        );
        let e = decode(b"PAR1....", "ck").unwrap_err().to_string();
        assert!(e.contains("bad magic"), "{e}");
        let e = decode(&bytes[..bytes.len() / 2], "ck")
            .unwrap_err()
            .to_string();
        assert!(e.contains("corrupt"), "{e}");
    }

    /// The privacy ledger rides in the checkpoint, so spends survive a restart.
    /// A version-3 file (FNV-1a 64 trailer) still reads: the body is the same as version 4's.
    #[test]
    fn version_3_checkpoints_with_the_fnv_trailer_still_read() {
        let v4 = encode(&[StreamCheckpoint::capture("s", &store(), Position::Start)]);
        let mut v3 = v4[..v4.len() - 4].to_vec();
        v3[4] = 3;
        let sum = fnv_checksum(&v3);
        v3.extend_from_slice(&sum.to_le_bytes());
        let old = decode(&v3, "v3").unwrap();
        assert_eq!(encode(&old), v4);
        // The CRC-32C trailer catches a flipped bit anywhere, the version byte included.
        for i in 0..v4.len() - 4 {
            let mut flipped = v4.clone();
            flipped[i] ^= 0x01;
            assert!(decode(&flipped, "ck").is_err(), "byte {i}");
        }
    }

    fn state(late: u64) -> Vec<StreamCheckpoint> {
        let mut s = store();
        s.add_late(late);
        vec![StreamCheckpoint::capture("s", &s, Position::Start)]
    }

    /// The last two checkpoints are kept; a truncated or corrupt newest one falls back to
    /// the previous one, and only two bad ones are an error.
    #[test]
    fn a_damaged_newest_checkpoint_falls_back_to_the_previous_one() {
        let dir = tempfile::tempdir().unwrap();
        // The late count tells the two states apart (store() starts with some).
        let late = |c: Vec<StreamCheckpoint>| c[0].panes.late - store().late();
        write_atomically(dir.path(), &encode(&state(1))).unwrap();
        write_atomically(dir.path(), &encode(&state(2))).unwrap();
        assert_eq!(late(read_latest(dir.path()).unwrap().unwrap()), 2);
        let newest = dir.path().join(FILE_NAME);
        let previous = dir.path().join(PREVIOUS_FILE_NAME);
        let good = std::fs::read(&newest).unwrap();

        std::fs::write(&newest, &good[..good.len() / 2]).unwrap(); // truncated
        assert_eq!(late(read_latest(dir.path()).unwrap().unwrap()), 1);
        let mut flipped = good.clone();
        flipped[20] ^= 0x40;
        std::fs::write(&newest, &flipped).unwrap(); // corrupt
        assert_eq!(late(read_latest(dir.path()).unwrap().unwrap()), 1);
        std::fs::remove_file(&newest).unwrap(); // lost
        assert_eq!(late(read_latest(dir.path()).unwrap().unwrap()), 1);

        std::fs::write(&newest, &flipped).unwrap();
        std::fs::write(&previous, b"LDPC\x04 garbage").unwrap();
        let e = read_latest(dir.path()).unwrap_err().to_string();
        assert!(e.contains("both checkpoints are unusable"), "{e}");
        // A newer format is not damage: no fallback that would lose its progress.
        let mut newer = good.clone();
        newer[4] = VERSION + 1;
        std::fs::write(&newest, &newer).unwrap();
        let e = read_latest(dir.path()).unwrap_err().to_string();
        assert!(e.contains("unsupported checkpoint format version"), "{e}");
        // Nothing at all is a fresh start.
        let empty = tempfile::tempdir().unwrap();
        assert!(read_latest(empty.path()).unwrap().is_none());
    }

    #[test]
    fn ledger_survives_the_round_trip() {
        use ldpstream_engine::curator::ledger::PrivacyLedger;
        let mut part = StreamCheckpoint::capture("raw", &store(), Position::Start);
        let mut ledger = PrivacyLedger::new(2.0);
        ledger
            .try_spend(Some(0), Some(60_000), 0.5, "raw/t")
            .unwrap();
        let entry = LedgerEntry {
            ledger,
            inputs: vec!["kafka [\"events\"], report column \"report\"".into()],
        };
        part.ledger = Some(entry.clone());
        let back = decode(&encode(&[part]), "ck").unwrap();
        assert_eq!(back[0].ledger, Some(entry));
    }

    fn stream(mechanism: &str, window: &str) -> StreamConfig {
        let text = format!(
            "[[stream]]\nname = \"s\"\nsource = {{ kind = \"parquet\", paths = [\"x\"] }}\n\
             mechanism = {mechanism}\n[[stream.test]]\nname = \"t\"\nkind = \"gof\"\n\
             null = \"uniform\"\nwindow = {window}\n"
        );
        ldpstream_config::Config::from_toml_str(&text, "t")
            .unwrap()
            .streams
            .remove(0)
    }

    /// The settings ride in the checkpoint, and a change names what changed.
    #[test]
    fn settings_survive_the_round_trip_and_changes_are_named() {
        let grr1 = stream(
            "{ kind = \"grr\", epsilon = 1.0, domain = 4 }",
            "{ kind = \"tumbling\", size = \"1h\" }",
        );
        let mut part = StreamCheckpoint::capture("s", &store(), Position::Start);
        part.settings = Some(settings_of(&grr1));
        let back = decode(&encode(&[part]), "ck").unwrap();
        let kept = back[0].settings.clone().unwrap();
        assert_eq!(kept, settings_of(&grr1));
        assert_eq!(describe_changes("s", &kept, &settings_of(&grr1)), None);
        let grr3 = stream(
            "{ kind = \"grr\", epsilon = 3.0, domain = 4 }",
            "{ kind = \"tumbling\", size = \"1h\" }",
        );
        assert_eq!(
            describe_changes("s", &kept, &settings_of(&grr3)).unwrap(),
            "stream s: mechanism epsilon changed from 1 to 3"
        );
        let raw = stream(
            "{ kind = \"raw\", domain = 4 }",
            "{ kind = \"tumbling\", size = \"2h\" }",
        );
        let e = describe_changes("s", &kept, &settings_of(&raw)).unwrap();
        assert!(
            e.contains("mechanism kind changed from grr to raw")
                && e.contains("mechanism epsilon changed from 1 to (none)")
                && e.contains("windows changed from [tumbling \"1h\"] to [tumbling \"2h\"]"),
            "{e}"
        );
    }
}
