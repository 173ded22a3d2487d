//! A partition-aware Kafka source: a group consumer of one topic whose messages are
//! decoded per partition and handed out as `(partition, SourceBatch)`, each batch from
//! one partition only. What the scale-out fold reads: it keeps a pane store per input
//! partition and commits each partition in its own transaction. The owner's
//! [`PartitionHandler`] hears of every assignment and revocation, and a partition's
//! decoder lives exactly as long as its assignment, so nothing taken before a rebalance
//! leaks into the state restored after it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ldpstream_config::{KafkaConfig, StreamConfig};
use ldpstream_engine::mechanism::Mechanism;
use tracing::debug;

use super::consumer::{GroupConsumer, GroupMetadata, Isolation, Polled};
use super::dead_letter::DeadLetters;
use super::group::{lock, PartitionHandler, StartAt};
use crate::emit::{SourceBatch, SourceEvents};
use crate::error::ConnectorError;
use crate::messages::{Decoded, MessageDecoder};
use crate::position::{KafkaPosition, Position, TopicPartition};

/// What one assigned partition has taken since its last batch.
struct Taken {
    decoder: MessageDecoder,
    /// The offset after the last message taken, if one was since the last batch.
    next: Option<u64>,
    /// An end marker came since the last batch.
    ended: bool,
}

/// The owner's handler, with the per-partition decoders the rebalance creates and drops.
pub struct Decoding<H> {
    inner: H,
    topic: String,
    stream: StreamConfig,
    mechanism: Mechanism,
    kafka: KafkaConfig,
    partitions: Mutex<BTreeMap<i32, Taken>>,
}

impl<H> Decoding<H> {
    fn fresh(&self) -> Taken {
        Taken {
            decoder: MessageDecoder::new(&self.stream, &self.mechanism, self.kafka.format)
                .with_event_time(self.kafka.event_time),
            next: None,
            ended: false,
        }
    }
}

impl<H: PartitionHandler> PartitionHandler for Decoding<H> {
    fn assigned(&self, partitions: &[TopicPartition]) -> Vec<StartAt> {
        {
            let mut taken = lock(&self.partitions);
            for (_, p) in partitions.iter().filter(|(t, _)| *t == self.topic) {
                if !taken.contains_key(p) {
                    taken.insert(*p, self.fresh());
                }
            }
        }
        self.inner.assigned(partitions)
    }

    fn revoked(&self, partitions: &[TopicPartition], read: &KafkaPosition) {
        {
            let mut taken = lock(&self.partitions);
            for (_, p) in partitions.iter().filter(|(t, _)| *t == self.topic) {
                taken.remove(p);
            }
        }
        self.inner.revoked(partitions, read);
    }

    fn assign_failed(&self, error: ConnectorError) {
        self.inner.assign_failed(error);
    }
}

/// A partition-aware source over one topic.
pub struct PartitionedSource<H: PartitionHandler> {
    consumer: GroupConsumer<Decoding<H>>,
    topic: String,
    end_marker: bool,
    max_rows: usize,
    /// Not part of any transaction: after a take-over a re-read message can be
    /// dead-lettered a second time.
    dead_letters: Option<DeadLetters>,
    events: Arc<dyn SourceEvents>,
}

impl<H: PartitionHandler> PartitionedSource<H> {
    /// Joins `kafka.group_id` and subscribes to `topic`, a `read_committed` consumer.
    pub fn subscribe(
        stream: &StreamConfig,
        kafka: &KafkaConfig,
        mechanism: &Mechanism,
        topic: &str,
        handler: H,
        events: Arc<dyn SourceEvents>,
    ) -> Result<Self, ConnectorError> {
        let decoding = Decoding {
            inner: handler,
            topic: topic.to_string(),
            stream: stream.clone(),
            mechanism: mechanism.clone(),
            kafka: kafka.clone(),
            partitions: Mutex::new(BTreeMap::new()),
        };
        let consumer = GroupConsumer::subscribe(
            kafka,
            (&stream.name, &kafka.group_id, topic),
            Isolation::Committed,
            decoding,
            None,
        )?;
        let dead_letters = kafka
            .dead_letter_topic
            .as_deref()
            .map(|t| DeadLetters::open(kafka, t))
            .transpose()?;
        Ok(PartitionedSource {
            consumer,
            topic: topic.to_string(),
            end_marker: kafka.end_marker,
            max_rows: stream.max_batch_rows,
            dead_letters,
            events,
        })
    }

    pub fn handler(&self) -> &H {
        &self.consumer.handler().inner
    }

    /// None while the consumer is not (yet) a member of the group.
    pub fn group_metadata(&self) -> Option<GroupMetadata> {
        self.consumer.group_metadata()
    }

    /// Takes one message, waiting at most `timeout`. Returns its partition's batch when
    /// one is cut: the partition's rows reached `max_batch_rows`, or its end marker came.
    pub fn next(&self, timeout: Duration) -> Result<Option<(i32, SourceBatch)>, ConnectorError> {
        let Some(message) = self.consumer.next_message(timeout) else {
            return Ok(None);
        };
        let partition = message.partition();
        let mut partitions = lock(&self.consumer.handler().partitions);
        let Some(taken) = partitions.get_mut(&partition) else {
            return Ok(None);
        };
        taken.next = Some((message.offset() + 1).max(0) as u64);
        let payload = message.payload().unwrap_or_default();
        let cut = match taken
            .decoder
            .push_with_time(payload, message.timestamp_ms())
        {
            Ok(Decoded::Report) => false,
            Ok(Decoded::Invalid(reason)) => {
                // Folded anyway: the fold rejects it and counts it in the record by reason.
                self.dead_letter(&message, reason.name());
                false
            }
            Ok(Decoded::EndMarker) if self.end_marker => {
                taken.ended = true;
                debug!(topic = %self.topic, partition, "end marker: the partition's input ended");
                true
            }
            Ok(Decoded::EndMarker) => false,
            Err(bad) => {
                self.events.bad_message(bad.reason);
                self.dead_letter(&message, &bad.detail);
                false
            }
        };
        if cut || taken.decoder.rows() >= self.max_rows {
            return Ok(Some((partition, self.cut(partition, taken)?)));
        }
        Ok(None)
    }

    /// Every partition's reports and offsets taken since its last batch, one batch each.
    pub fn flush(&self) -> Result<Vec<(i32, SourceBatch)>, ConnectorError> {
        let mut partitions = lock(&self.consumer.handler().partitions);
        let mut out = Vec::new();
        for (&p, taken) in partitions.iter_mut() {
            if taken.next.is_some() || taken.decoder.rows() > 0 {
                out.push((p, self.cut(p, taken)?));
            }
        }
        Ok(out)
    }

    /// Forgets what `partition` took since its last batch and reads it again from `start`
    /// (after a failed transaction, whose messages must be read again).
    pub fn rewind(&self, partition: i32, start: StartAt) -> Result<(), ConnectorError> {
        let decoding = self.consumer.handler();
        if let Some(taken) = lock(&decoding.partitions).get_mut(&partition) {
            *taken = decoding.fresh();
        }
        self.consumer.seek(&self.topic, partition, start)
    }

    /// Serves the dead-letter producer's deliveries (waiting for them when `stopping`).
    pub fn serve_dead_letters(&mut self, stopping: bool) {
        if let Some(dl) = &mut self.dead_letters {
            let failed = if stopping { dl.flush() } else { dl.poll() };
            self.events.dead_letters_failed(failed);
        }
    }

    fn dead_letter(&self, message: &Polled<'_>, reason: &str) {
        if let Some(dl) = &self.dead_letters {
            dl.send_message(&message.0, Some(&self.topic), reason);
        }
    }

    fn cut(&self, partition: i32, taken: &mut Taken) -> Result<SourceBatch, ConnectorError> {
        let batch = taken.decoder.finish()?;
        let mut position = KafkaPosition::default();
        let tp = (self.topic.clone(), partition);
        if let Some(next) = taken.next.take() {
            position.next.insert(tp.clone(), next);
        }
        // Said once, with the batch the marker ends.
        if std::mem::take(&mut taken.ended) {
            position.ended.insert(tp);
        }
        Ok(SourceBatch {
            batch,
            position: Position::Kafka(position),
        })
    }
}
