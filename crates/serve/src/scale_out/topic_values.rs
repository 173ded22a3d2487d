//! The messages of the scale-out state topics: a partition's partial sketch of one pane,
//! its progress (watermark, late count, end of input), and the merge's emitted-through
//! marker. Keys are short ASCII strings, so a compacted topic keeps the newest value of
//! each; sketches use the checkpoint encoding, with the settings they were counted under,
//! so an instance running a different config is refused instead of merged.

use std::collections::BTreeMap;

use ldpstream_config::StreamConfig;
use ldpstream_connectors::position::KafkaPosition;
use ldpstream_connectors::Position;
use ldpstream_engine::stream::stream_pane_width;
use ldpstream_engine::window::{Grouped, RestoredPanes};
use serde::{Deserialize, Serialize};

use crate::error::Error;
use ldpstream_jobs::state_codec::{self, describe_changes, settings_of, StreamCheckpoint};

/// Which pane of a partition: an event-time pane, or the reports without event time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pane {
    Untimed,
    At(i64),
}

/// A state-topic key, parsed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Key {
    Pane {
        partition: i32,
        pane: Pane,
    },
    Progress {
        partition: i32,
    },
    Emitted,
    /// The merge's panes that no bounded window needs any more, merged across partitions
    /// (cumulative and global windows still count them).
    Retired,
    /// A fold instance took input partition `partition` over (see [`Resumed`]).
    Resumed {
        partition: i32,
    },
    /// Every input partition ended and the merge transaction with the last final records
    /// committed: written by the merge owner after that commit succeeded.
    Done,
}

impl Key {
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Key::Pane {
                partition,
                pane: Pane::At(t),
            } => format!("pane/{partition}/{t}"),
            Key::Pane {
                partition,
                pane: Pane::Untimed,
            } => format!("pane/{partition}/untimed"),
            Key::Progress { partition } => format!("progress/{partition}"),
            Key::Emitted => "emitted".to_string(),
            Key::Retired => "retired".to_string(),
            Key::Resumed { partition } => format!("resumed/{partition}"),
            Key::Done => "done".to_string(),
        }
        .into_bytes()
    }

    /// None for a key this version does not know (written by a newer one): ignored.
    pub fn decode(bytes: &[u8]) -> Option<Key> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut parts = text.split('/');
        let key = match (parts.next()?, parts.next(), parts.next()) {
            ("pane", Some(p), Some("untimed")) => Key::Pane {
                partition: p.parse().ok()?,
                pane: Pane::Untimed,
            },
            ("pane", Some(p), Some(t)) => Key::Pane {
                partition: p.parse().ok()?,
                pane: Pane::At(t.parse().ok()?),
            },
            ("progress", Some(p), None) => Key::Progress {
                partition: p.parse().ok()?,
            },
            ("resumed", Some(p), None) => Key::Resumed {
                partition: p.parse().ok()?,
            },
            ("emitted", None, None) => Key::Emitted,
            ("retired", None, None) => Key::Retired,
            ("done", None, None) => Key::Done,
            _ => return None,
        };
        parts.next().is_none().then_some(key)
    }
}

/// Where one input partition had got to when its partials were published.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// The largest event time folded (the partition's watermark is this minus the
    /// allowed lateness).
    pub max_event: Option<i64>,
    /// Reports not folded because their pane had closed.
    pub late: u64,
    /// The partition delivered its end marker.
    pub ended: bool,
    /// The input offset this state was committed with (see [`encode_pane`]).
    #[serde(default)]
    pub next: Option<i64>,
}

/// What the merge has emitted: every bounded window ending at or before
/// `finalized_through` (i64::MAX: every window, the input having ended).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Emitted {
    pub finalized_through: i64,
    /// The first pane ever merged: the cumulative window starts there, also once that
    /// pane is retired.
    #[serde(default)]
    pub first_pane: Option<i64>,
    /// The partials-topic offset the merge transaction that wrote this committed for the
    /// merge's consumer group: a new owner takes this value only if that offset is at or
    /// below the group's committed one (else the transaction did not commit, and a broker
    /// that shows aborted transactions, as Tansu 0.6.0 does, would make it count).
    #[serde(default)]
    pub read: Option<i64>,
}

/// Written by a fold instance once it has fenced input partition `partition`'s previous
/// owner: `committed` is the input offset the last committed transaction of the partition
/// committed. Every value of the partition before this message in the partials topic and
/// tagged above `committed` is from a transaction that was aborted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resumed {
    pub committed: Option<i64>,
}

pub fn encode_json<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

pub fn decode_json<'a, T: Deserialize<'a>>(
    bytes: &'a [u8],
    stream: &str,
    what: &str,
) -> Result<T, Error> {
    serde_json::from_slice(bytes).map_err(|e| Error::ScaleOut {
        stream: stream.to_string(),
        message: format!("a {what} message in the state topics does not decode: {e}"),
    })
}

/// One pane's sketches, every group, as a partial message. `next` tags a stage-1 value
/// with the input offset its transaction commits (partition `partition` of `topic`): a
/// reader that knows the committed offset can tell a value of an aborted transaction
/// from a committed one even on a broker whose `read_committed` shows aborted
/// transactions (Tansu 0.6.0 does).
pub fn encode_pane(
    stream: &StreamConfig,
    pane: Pane,
    grouped: &Grouped,
    next: Option<(&str, i32, i64)>,
) -> Vec<u8> {
    let mut panes = RestoredPanes::default();
    match pane {
        Pane::Untimed => panes.retired = grouped.clone(),
        Pane::At(t) => {
            panes.panes.insert(t, grouped.clone());
        }
    }
    state_codec::encode(&[StreamCheckpoint {
        name: stream.name.clone(),
        pane_width: stream_pane_width(stream),
        panes,
        position: match next {
            Some((topic, partition, offset)) => Position::Kafka(KafkaPosition {
                next: [((topic.to_string(), partition), offset.max(0) as u64)].into(),
                ..KafkaPosition::default()
            }),
            None => Position::Start,
        },
        ledger: None,
        settings: Some(settings_of(stream)),
        latches: Vec::new(),
    }])
}

/// The inverse of [`encode_pane`]; refuses sketches counted under other settings.
#[cfg(test)]
pub fn decode_pane(stream: &StreamConfig, pane: Pane, bytes: &[u8]) -> Result<Grouped, Error> {
    decode_tagged_pane(stream, pane, bytes).map(|(g, _)| g)
}

/// [`decode_pane`] with the input offset the value was tagged with.
pub fn decode_tagged_pane(
    stream: &StreamConfig,
    pane: Pane,
    bytes: &[u8],
) -> Result<(Grouped, Option<i64>), Error> {
    let mut parts = state_codec::decode(bytes, "partial sketch").map_err(|e| Error::ScaleOut {
        stream: stream.name.clone(),
        message: format!(
            "a partial sketch in the state topics does not decode ({e}); only ldpstream \
                 instances of this group may write to them"
        ),
    })?;
    let part = match parts.pop() {
        Some(p) if parts.is_empty() => p,
        _ => {
            return Err(Error::ScaleOut {
                stream: stream.name.clone(),
                message: "a partial message holds no stream or more than one".into(),
            })
        }
    };
    if let Some(changes) = part
        .settings
        .as_ref()
        .and_then(|old| describe_changes(&stream.name, old, &settings_of(stream)))
    {
        return Err(Error::ScaleOut {
            stream: stream.name.clone(),
            message: format!(
                "another instance publishes partials counted under other settings: {changes}. \
                 Every instance of a consumer group must run the same stream config"
            ),
        });
    }
    let tag = part
        .position
        .kafka()
        .next
        .values()
        .next()
        .map(|&o| i64::try_from(o).unwrap_or(i64::MAX));
    let mut panes: BTreeMap<i64, Grouped> = part.panes.panes;
    let grouped = match pane {
        Pane::Untimed => part.panes.retired,
        Pane::At(t) => panes.remove(&t).unwrap_or_default(),
    };
    Ok((grouped, tag))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldpstream_config::Config;
    use ldpstream_engine::mechanism::Mechanism;

    fn stream(epsilon: f64) -> StreamConfig {
        let text = format!(
            "[[stream]]\nname = \"k\"\nsource = {{ kind = \"kafka\", brokers = \"b:9092\", topics = [\"in\"], group_id = \"g\", scale_out = {{ results_topic = \"out\" }} }}\nmechanism = {{ kind = \"grr\", epsilon = {epsilon}, domain = 4 }}\n[[stream.test]]\nname = \"t\"\nkind = \"gof\"\nnull = \"uniform\"\n"
        );
        Config::from_toml_str(&text, "t").unwrap().streams[0].clone()
    }

    #[test]
    fn a_pane_round_trips_and_other_settings_are_refused_by_name() {
        let s = stream(1.0);
        let m = Mechanism::from_config(&s.mechanism).unwrap();
        let mut sketch = m.new_sketch();
        let reports = arrow_array::UInt32Array::from(vec![0, 1, 1, 3]);
        ldpstream_engine::kernels::fold_batch(&m, &mut sketch, &reports, None).unwrap();
        let g = Grouped::from([(vec![Some("a".to_string())], sketch)]);
        for pane in [Pane::At(120_000), Pane::Untimed] {
            let bytes = encode_pane(&s, pane, &g, Some(("in", 3, 1234)));
            let (back, tag) = decode_tagged_pane(&s, pane, &bytes).unwrap();
            assert_eq!(tag, Some(1234));
            assert_eq!(back.len(), 1);
            assert_eq!(back.values().next().unwrap().n(), 4);
        }
        let bytes = encode_pane(&s, Pane::At(0), &g, None);
        let e = decode_pane(&stream(2.0), Pane::At(0), &bytes)
            .unwrap_err()
            .to_string();
        assert!(e.contains("other settings") && e.contains("\"k\""), "{e}");
        // A message that is not a partial at all: an error naming the stream, no panic.
        let e = decode_pane(&s, Pane::At(0), b"garbage")
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"k\""), "{e}");
        let e = decode_json::<Progress>(b"{", "k", "progress")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("progress") && e.contains("does not decode"),
            "{e}"
        );
    }

    #[test]
    fn keys_round_trip_and_unknown_keys_are_none() {
        for k in [
            Key::Pane {
                partition: 3,
                pane: Pane::At(-60_000),
            },
            Key::Pane {
                partition: 0,
                pane: Pane::Untimed,
            },
            Key::Progress { partition: 11 },
            Key::Emitted,
            Key::Retired,
            Key::Resumed { partition: 2 },
            Key::Done,
        ] {
            assert_eq!(Key::decode(&k.encode()), Some(k));
        }
        for bad in [
            &b"pane/x/1"[..],
            b"pane/1",
            b"progress/1/2",
            b"emitted/1",
            b"resumed/",
            b"resumed/1/2",
            b"done/1",
            b"\xff",
            b"",
        ] {
            assert_eq!(Key::decode(bad), None, "{bad:?}");
        }
    }
}
