//! Where a source had got to, typed per source kind. A checkpoint stores it next to the
//! sketches it produced, so a restart resumes exactly there (ARCHITECTURE.md invariant 5).

use std::collections::{BTreeMap, BTreeSet};

/// A Kafka partition.
pub type TopicPartition = (String, i32);

/// The position of one stream's source.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Position {
    /// Nothing read yet.
    #[default]
    Start,
    Kafka(KafkaPosition),
    /// Parquet replay: rows of the concatenated files already sent.
    Replay {
        rows: u64,
    },
    /// Simulator: reports generated so far (a restarted simulator generates new reports;
    /// it does not replay).
    Simulator {
        generated: u64,
    },
}

/// Kafka: the next offset to read per partition, and the partitions whose end marker was
/// folded (so a restarted bounded job knows their input ended).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KafkaPosition {
    pub next: BTreeMap<TopicPartition, u64>,
    pub ended: BTreeSet<TopicPartition>,
}

impl KafkaPosition {
    pub fn is_empty(&self) -> bool {
        self.next.is_empty() && self.ended.is_empty()
    }
}

/// A checkpoint entry that does not name a known position field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownEntry(pub String);

impl Position {
    /// Folds a newer position (from the batch just folded) into this one.
    pub fn advance(&mut self, newer: Position) {
        match (self, newer) {
            (_, Position::Start) => {}
            (Position::Kafka(old), Position::Kafka(new)) => {
                old.next.extend(new.next);
                old.ended.extend(new.ended);
            }
            (old, new) => *old = new,
        }
    }

    /// The Kafka part, or an empty one for any other source.
    pub fn kafka(&self) -> KafkaPosition {
        match self {
            Position::Kafka(k) => k.clone(),
            _ => KafkaPosition::default(),
        }
    }

    /// The flat (name, value) entries of the checkpoint format: `topic/partition` → next
    /// offset, `topic/partition/ended` → 1, `rows`, `generated`. Kafka topic names cannot
    /// contain `/`, so the keys are unambiguous.
    pub fn to_entries(&self) -> Vec<(String, u64)> {
        match self {
            Position::Start => Vec::new(),
            Position::Replay { rows } => vec![(ROWS.to_string(), *rows)],
            Position::Simulator { generated } => vec![(GENERATED.to_string(), *generated)],
            Position::Kafka(k) => {
                let mut out: BTreeMap<String, u64> = BTreeMap::new();
                for ((t, p), &o) in &k.next {
                    out.insert(format!("{t}/{p}"), o);
                }
                for (t, p) in &k.ended {
                    out.insert(format!("{t}/{p}{ENDED}"), 1);
                }
                out.into_iter().collect()
            }
        }
    }

    /// The inverse of [`to_entries`](Self::to_entries).
    pub fn from_entries(entries: Vec<(String, u64)>) -> Result<Position, UnknownEntry> {
        let mut kafka = KafkaPosition::default();
        let mut out = Position::Start;
        for (key, value) in entries {
            match key.as_str() {
                ROWS => out = Position::Replay { rows: value },
                GENERATED => out = Position::Simulator { generated: value },
                _ => {
                    let (partition, ended) = match key.strip_suffix(ENDED) {
                        Some(p) => (p, true),
                        None => (key.as_str(), false),
                    };
                    let tp = partition
                        .rsplit_once('/')
                        .and_then(|(t, p)| Some((t.to_string(), p.parse::<i32>().ok()?)))
                        .ok_or_else(|| UnknownEntry(key.clone()))?;
                    if ended {
                        kafka.ended.insert(tp);
                    } else {
                        kafka.next.insert(tp, value);
                    }
                }
            }
        }
        if !kafka.is_empty() {
            out = Position::Kafka(kafka);
        }
        Ok(out)
    }
}

const ROWS: &str = "rows";
const GENERATED: &str = "generated";
const ENDED: &str = "/ended";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_for_every_kind() {
        let mut k = KafkaPosition::default();
        k.next.insert(("events".into(), 0), 17);
        k.next.insert(("a.b-c_d".into(), 12), 3);
        k.ended.insert(("events".into(), 0));
        for p in [
            Position::Start,
            Position::Kafka(k),
            Position::Replay { rows: 42 },
            Position::Simulator { generated: 7 },
        ] {
            assert_eq!(Position::from_entries(p.to_entries()), Ok(p.clone()));
        }
        assert_eq!(
            Position::from_entries(vec![("nonsense".into(), 1)]),
            Err(UnknownEntry("nonsense".into()))
        );
    }

    #[test]
    fn advance_merges_kafka_partitions_and_replaces_counters() {
        let mut a = Position::Start;
        let mut k1 = KafkaPosition::default();
        k1.next.insert(("t".into(), 0), 5);
        a.advance(Position::Kafka(k1));
        let mut k2 = KafkaPosition::default();
        k2.next.insert(("t".into(), 1), 9);
        a.advance(Position::Kafka(k2));
        a.advance(Position::Start);
        assert_eq!(a.kafka().next.len(), 2);
        let mut r = Position::Replay { rows: 1 };
        r.advance(Position::Replay { rows: 10 });
        assert_eq!(r, Position::Replay { rows: 10 });
    }
}
