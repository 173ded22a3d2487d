//! Consumer-group membership for the Kafka source. The group decides which partitions
//! this instance reads; the checkpoint, not the group's committed offsets, decides where
//! each one starts (rule 5: committed offsets are progress reports only). The rebalance
//! callback runs inside `poll` on the source thread, so it sees exactly the messages the
//! source has taken.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, RebalanceProtocol};
use rdkafka::error::{KafkaError, KafkaResult, RDKafkaErrorCode};
use rdkafka::statistics::Statistics;
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{Offset, TopicPartitionList};
use tracing::{error, info, warn};

use crate::emit::SourceEvents;
use crate::position::{KafkaPosition, TopicPartition};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Only plain maps are behind these locks; a panic elsewhere leaves them consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The rebalance handler of one stream's consumer.
pub(crate) struct GroupContext {
    stream: String,
    events: Arc<dyn SourceEvents>,
    /// Next offset per partition: the checkpoint's, then, for a partition this instance
    /// gave up in a rebalance, how far it had read, so a later re-assignment continues
    /// there instead of reading reports twice.
    resume: Mutex<KafkaPosition>,
    assigned: Mutex<Vec<(String, i32)>>,
    /// Set by every assignment (even an empty one), cleared by [`take_assignment`].
    changed: AtomicBool,
    /// The newest client-level error librdkafka reported (a failed TLS handshake, rejected
    /// SASL credentials, a refused connection), named in the error when the first request
    /// to the brokers fails; librdkafka's own error for that request only says it timed out.
    last_error: Mutex<Option<(Option<RDKafkaErrorCode>, String)>>,
    /// librdkafka said every broker connection is down, and no broker was seen up since.
    unreachable: AtomicBool,
}

impl GroupContext {
    pub(crate) fn new(stream: &str, resume: &KafkaPosition, events: Arc<dyn SourceEvents>) -> Self {
        GroupContext {
            stream: stream.to_string(),
            events,
            resume: Mutex::new(resume.clone()),
            assigned: Mutex::new(Vec::new()),
            changed: AtomicBool::new(false),
            last_error: Mutex::new(None),
            unreachable: AtomicBool::new(false),
        }
    }

    /// A broker answered (a message arrived, or the statistics show one up): the end of an
    /// outage, if there was one.
    pub(crate) fn reached(&self) {
        if self.unreachable.load(Ordering::Relaxed)
            && self.unreachable.swap(false, Ordering::AcqRel)
        {
            info!(stream = %self.stream, "Kafka brokers reachable again");
            self.events.brokers_reachable(true);
        }
    }

    /// The newest client-level error, and whether it is one that retrying cannot fix
    /// (credentials or a certificate the broker or this client rejected).
    pub(crate) fn last_error(&self) -> Option<(String, bool)> {
        lock(&self.last_error)
            .as_ref()
            .map(|(code, reason)| (reason.clone(), settled(*code, reason)))
    }

    /// The partitions assigned now, if the assignment changed since the last call.
    pub(crate) fn take_assignment(&self) -> Option<Vec<TopicPartition>> {
        // Called per message: a plain load first, the read-modify-write only on a change.
        (self.changed.load(Ordering::Acquire) && self.changed.swap(false, Ordering::AcqRel))
            .then(|| lock(&self.assigned).clone())
    }

    fn start_offsets(&self, tpl: &mut TopicPartitionList) {
        let resume = lock(&self.resume);
        let partitions: Vec<(String, i32)> = tpl
            .elements()
            .iter()
            .map(|e| (e.topic().to_string(), e.partition()))
            .collect();
        for (topic, partition) in partitions {
            // A partition the checkpoint never saw is read from its beginning: its reports
            // are in no sketch yet.
            let offset = resume
                .next
                .get(&(topic.clone(), partition))
                .map_or(Offset::Beginning, |&o| Offset::Offset(o as i64));
            if let Err(e) = tpl.set_partition_offset(&topic, partition, offset) {
                error!(stream = %self.stream, %topic, partition, error = %e, "cannot set the start offset");
            }
        }
    }

    fn remember_positions(&self, consumer: &BaseConsumer<Self>) {
        let Ok(positions) = consumer.position() else {
            return;
        };
        let mut resume = lock(&self.resume);
        for e in positions.elements() {
            if let Offset::Offset(o) = e.offset() {
                resume
                    .next
                    .insert((e.topic().to_string(), e.partition()), o.max(0) as u64);
            }
        }
    }

    fn assign(&self, consumer: &BaseConsumer<Self>, tpl: &mut TopicPartitionList) {
        self.start_offsets(tpl);
        let cooperative = matches!(
            consumer.rebalance_protocol(),
            RebalanceProtocol::Cooperative
        );
        let result: KafkaResult<()> = if cooperative {
            consumer.incremental_assign(tpl)
        } else {
            consumer.assign(tpl)
        };
        if let Err(e) = result {
            error!(stream = %self.stream, error = %e, "partition assignment failed");
            return;
        }
        let mut assigned = lock(&self.assigned);
        if !cooperative {
            assigned.clear();
        }
        for e in tpl.elements() {
            let p = (e.topic().to_string(), e.partition());
            if !assigned.contains(&p) {
                assigned.push(p);
            }
        }
        info!(stream = %self.stream, partitions = ?*assigned, "Kafka partitions assigned by the group");
        self.changed.store(true, Ordering::Release);
    }

    fn revoke(&self, consumer: &BaseConsumer<Self>, tpl: &TopicPartitionList) {
        self.remember_positions(consumer);
        let cooperative = matches!(
            consumer.rebalance_protocol(),
            RebalanceProtocol::Cooperative
        );
        let result = if cooperative {
            consumer.incremental_unassign(tpl)
        } else {
            consumer.unassign()
        };
        if let Err(e) = result {
            warn!(stream = %self.stream, error = %e, "partition revocation failed");
        }
        let mut assigned = lock(&self.assigned);
        let gone: Vec<(String, i32)> = if cooperative {
            tpl.elements()
                .iter()
                .map(|e| (e.topic().to_string(), e.partition()))
                .collect()
        } else {
            assigned.clone()
        };
        assigned.retain(|p| !gone.contains(p));
        // Another instance reads these now; a frozen last value would mislead a dashboard.
        for (topic, p) in &gone {
            self.events.partition_revoked(topic, *p);
        }
        info!(stream = %self.stream, partitions = ?*assigned, "Kafka partitions revoked by the group");
        self.changed.store(true, Ordering::Release);
    }
}

/// An error that retrying cannot fix: credentials or a certificate that the broker or
/// this client rejected.
fn settled(code: Option<RDKafkaErrorCode>, reason: &str) -> bool {
    matches!(
        code,
        Some(RDKafkaErrorCode::Authentication | RDKafkaErrorCode::SaslAuthenticationFailed)
    ) || reason.contains("SSL handshake failed")
        || reason.contains("certificate verify failed")
}

impl ClientContext for GroupContext {
    fn error(&self, error: KafkaError, reason: &str) {
        warn!(stream = %self.stream, error = %error, reason, "Kafka client error");
        let code = error.rdkafka_error_code();
        if code == Some(RDKafkaErrorCode::AllBrokersDown)
            && !self.unreachable.swap(true, Ordering::AcqRel)
        {
            warn!(stream = %self.stream, "no Kafka broker can be reached; retrying (not ready until one answers)");
            self.events.brokers_reachable(false);
        }
        let mut last = lock(&self.last_error);
        // The cause stays: "all brokers are down" after a rejected certificate says less.
        if !last.as_ref().is_some_and(|(c, r)| settled(*c, r)) || settled(code, reason) {
            *last = Some((code, reason.to_string()));
        }
    }

    /// librdkafka's statistics (every `statistics.interval.ms`) carry each partition's
    /// high watermark from the fetch responses, so the lag costs no extra broker request.
    fn stats(&self, statistics: Statistics) {
        if statistics.brokers.values().any(|b| b.state == "UP") {
            self.reached();
        }
        let assigned = lock(&self.assigned);
        for (topic, t) in &statistics.topics {
            for p in t.partitions.values() {
                if !assigned.contains(&(topic.clone(), p.partition)) || p.hi_offset < 0 {
                    continue;
                }
                // app_offset: one past the last message handed to the source.
                let read = if p.app_offset >= 0 {
                    p.app_offset
                } else {
                    p.lo_offset.max(0)
                };
                self.events
                    .partition_lag(topic, p.partition, (p.hi_offset - read).max(0));
            }
        }
    }
}

impl ConsumerContext for GroupContext {
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => self.assign(consumer, tpl),
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => self.revoke(consumer, tpl),
            other => {
                error!(stream = %self.stream, error = ?other, "consumer-group rebalance failed");
                self.revoke(consumer, tpl);
            }
        }
    }
}
