//! The versioned encoding of streams' state: every stream's panes (as [`Sketch::to_bytes`]), watermark state and source
//! position. `serve`'s checkpoints ([`crate::serve::checkpoint`], which writes and reads the
//! files), the partial sketch files of `batch --emit-sketches` ([`crate::sketch_file`]) and
//! scale-out's state topics all hold it, so the three cannot drift apart.
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
//! (1 and 2 without settings, so unchecked). Version 5 adds, per stream after the
//! settings, the sequential tests' running maxima and rejection latches (JSON of
//! [`LatchEntry`] as a string), so that a restart keeps every rejection.

mod reader;
mod settings;

use std::collections::BTreeMap;

use ldpstream_engine::stream::LatchEntry;
use ldpstream_engine::window::{Grouped, PaneStore, RestoredPanes};

use ldpstream_connectors::Position;

use crate::error::Error;
use crate::ledger::file::LedgerEntry;
use reader::Reader;
pub use settings::{describe_changes, settings_of, Settings};

pub const MAGIC: [u8; 4] = *b"LDPC";
pub const VERSION: u8 = 5;

/// One stream's checkpointed state.
#[derive(Debug, Clone)]
pub struct StreamCheckpoint {
    pub name: String,
    pub pane_width: i64,
    pub panes: RestoredPanes,
    pub position: Position,
    /// The privacy-budget ledger older versions kept here; read only to move it into the
    /// ledger file (`ledger::import`), never written any more (always None).
    pub ledger: Option<LedgerEntry>,
    /// The settings the sketches were counted under; None in files before version 3.
    pub settings: Option<Settings>,
    /// The sequential tests' running maxima and rejection latches; empty before version 5.
    pub latches: Vec<LatchEntry>,
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
            latches: Vec::new(),
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
        // Few entries (one per open sequential window and group), read once at start:
        // JSON keeps them inspectable. Their e-values are finite by construction.
        put_str(
            &mut out,
            &serde_json::to_string(&s.latches).unwrap_or_else(|_| "[]".into()),
        );
    }
    let sum = crc32c::crc32c(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// The body of a checkpoint whose magic, version and checksum hold; the reason otherwise.
fn intact_body(bytes: &[u8]) -> Result<&[u8], String> {
    if bytes.len() < 5 || bytes[..4] != MAGIC {
        return Err("not an ldpstream checkpoint (bad magic)".into());
    }
    let version = bytes[4];
    if !(1..=VERSION).contains(&version) {
        return Err(format!(
            "unsupported checkpoint format version {version} (this build reads version \
             {VERSION}); move the file aside to start from scratch"
        ));
    }
    let trailer = if version >= 4 { 4 } else { 8 };
    if bytes.len() < 5 + trailer {
        return Err("corrupt: truncated".into());
    }
    let (body, sum) = bytes.split_at(bytes.len() - trailer);
    let intact = match *sum {
        [a, b, c, d] => crc32c::crc32c(body) == u32::from_le_bytes([a, b, c, d]),
        [a, b, c, d, e, f, g, h] => {
            fnv_checksum(body) == u64::from_le_bytes([a, b, c, d, e, f, g, h])
        }
        _ => false,
    };
    if intact {
        Ok(body)
    } else {
        Err("corrupt: checksum mismatch".into())
    }
}

/// Whether `bytes` are a checkpoint this build reads whose checksum holds: the check the
/// rotation makes before it keeps a checkpoint as the previous one.
pub fn is_intact(bytes: &[u8]) -> bool {
    intact_body(bytes).is_ok()
}

pub fn decode(bytes: &[u8], origin: &str) -> Result<Vec<StreamCheckpoint>, Error> {
    let err = |message: String| Error::Checkpoint {
        path: origin.to_string(),
        message,
    };
    let body = intact_body(bytes).map_err(err)?;
    // intact_body checked the magic and this version byte.
    let version = bytes[4];
    let mut r = Reader {
        bytes: &body[5..],
        origin,
    };
    let n = r.u32("stream count")?;
    let mut out: Vec<StreamCheckpoint> = Vec::new();
    for _ in 0..n {
        let name = r.string("stream name")?;
        // Readers look a stream up by name: with two sections one reader would take the
        // first, another the last, a third both.
        if out.iter().any(|s| s.name == name) {
            return Err(err(format!(
                "stream {name:?} has two sections; a file holds one per stream"
            )));
        }
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
            if panes.insert(start, r.grouped()?).is_some() {
                return Err(err(format!(
                    "stream {name:?} has two panes starting at {start}; a pane is stored once"
                )));
            }
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
        let latches = if version >= 5 {
            let text = r.string("sequential state")?;
            serde_json::from_str(&text)
                .map_err(|e| err(format!("corrupt sequential state of stream {name:?}: {e}")))?
        } else {
            Vec::new()
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
            latches,
        });
    }
    if !r.bytes.is_empty() {
        return Err(err("corrupt: trailing bytes".into()));
    }
    Ok(out)
}

/// Whether `bytes` start as this encoding of a version newer than this build reads.
pub fn is_newer_version(bytes: &[u8]) -> bool {
    bytes.len() >= 5 && bytes[..4] == MAGIC && bytes[4] > VERSION
}

/// A pane store with three panes, groups, late reports and a finalized pane: the codec's
/// fixture, which the service's checkpoint tests share (feature `test-fixtures`).
#[cfg(any(test, feature = "test-fixtures"))]
pub mod fixtures {
    use ldpstream_config::MechanismConfig;
    use ldpstream_engine::mechanism::Mechanism;
    use ldpstream_engine::window::{Grouped, PaneStore};

    pub fn store() -> PaneStore {
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
            let arr = arrow_array::UInt32Array::from(reports);
            ldpstream_engine::kernels::fold_batch(&m, &mut s, &arr, None).unwrap();
            let g = Grouped::from([(vec![group.map(str::to_string)], s)]);
            store.merge_pane(pane, g).unwrap();
        }
        store.observe(5100);
        store.add_late(7);
        store.mark_finalized(1000).unwrap();
        store
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldpstream_config::StreamConfig;

    use super::fixtures::store;

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
            e.contains("unsupported checkpoint format version 9") && e.contains("reads version 5"),
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
        let v5 = encode(&[StreamCheckpoint::capture("s", &store(), Position::Start)]);
        // Versions 3 and 4 end the stream before its (here empty: "[]") sequential state.
        let body = &v5[..v5.len() - 4 - (4 + 2)];
        let mut v3 = body.to_vec();
        v3[4] = 3;
        let sum = fnv_checksum(&v3);
        v3.extend_from_slice(&sum.to_le_bytes());
        let old = decode(&v3, "v3").unwrap();
        assert_eq!(encode(&old), v5);
        let mut v4 = body.to_vec();
        v4[4] = 4;
        let sum = crc32c::crc32c(&v4);
        v4.extend_from_slice(&sum.to_le_bytes());
        assert_eq!(encode(&decode(&v4, "v4").unwrap()), v5);
        // The CRC-32C trailer catches a flipped bit anywhere, the version byte included.
        for i in 0..v5.len() - 4 {
            let mut flipped = v5.clone();
            flipped[i] ^= 0x01;
            assert!(decode(&flipped, "ck").is_err(), "byte {i}");
        }
    }

    /// `bytes` with its body patched by `patch` and the CRC-32C trailer recomputed, so the
    /// decoder meets the content.
    fn reframed(bytes: &[u8], patch: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
        let mut body = bytes[..bytes.len() - 4].to_vec();
        patch(&mut body);
        let sum = crc32c::crc32c(&body);
        body.extend_from_slice(&sum.to_le_bytes());
        body
    }

    fn replace(body: &mut [u8], from: &[u8], to: &[u8]) {
        let at = body
            .windows(from.len())
            .position(|w| w == from)
            .expect("pattern present");
        body[at..at + to.len()].copy_from_slice(to);
    }

    /// Issue 43 (sketch_dup): a second section for one stream, pane start or group key
    /// was accepted, and readers disagreed on which counted (the first, the last, both).
    #[test]
    fn repeated_streams_panes_and_group_keys_are_refused() {
        let ck = |name: &str| StreamCheckpoint::capture(name, &store(), Position::Start);
        let e = decode(&encode(&[ck("s"), ck("s")]), "f")
            .unwrap_err()
            .to_string();
        assert!(e.contains("stream \"s\" has two sections"), "{e}");
        assert!(decode(&encode(&[ck("s"), ck("t")]), "f").is_ok());
        // The fixture keeps one open pane, at 5000: add one at 6000, then make it 5000.
        let mut two_panes = ck("s");
        let open = two_panes.panes.panes[&5000].clone();
        two_panes.panes.panes.insert(6000, open);
        let twice = reframed(&encode(&[two_panes]), |b| {
            replace(b, &6000i64.to_le_bytes(), &5000i64.to_le_bytes())
        });
        let e = decode(&twice, "f").unwrap_err().to_string();
        assert!(e.contains("two panes starting at 5000"), "{e}");
        // Two groups "b" and "c" in one pane, then "c" renamed "b".
        let mut grouped = ck("s");
        let pane = grouped.panes.panes.get_mut(&5000).unwrap();
        let sketch = pane.values().next().unwrap().clone();
        pane.insert(vec![Some("c".into())], sketch);
        let bytes = encode(&[grouped]);
        let key = |v: u8| [1u8, 1, 0, 0, 0, v];
        let twice = reframed(&bytes, |b| replace(b, &key(b'c'), &key(b'b')));
        let e = decode(&twice, "f").unwrap_err().to_string();
        assert!(e.contains("is stored twice"), "{e}");
    }

    /// Issue 31 defect 3: the sequential tests' running state rides in the checkpoint.
    #[test]
    fn sequential_latches_round_trip() {
        let mut ck = StreamCheckpoint::capture("s", &store(), Position::Start);
        ck.latches = vec![LatchEntry {
            test: "t".into(),
            window_start: None,
            group: Some(BTreeMap::from([("g".to_string(), None)])),
            max_e: 30.5,
            rejected: true,
        }];
        let back = decode(&encode(std::slice::from_ref(&ck)), "ck").unwrap();
        assert_eq!(back[0].latches, ck.latches);
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
