//! Consumer-group membership, the one rebalance dispatch of every ldpstream consumer (the
//! standard source, the scale-out fold and merge). The group decides which partitions an
//! instance reads; the consumer's owner, through its [`PartitionHandler`], decides where
//! each one starts (ARCHITECTURE.md invariant 5: committed offsets are progress reports only, except where a
//! transaction commits them). The rebalance callback runs inside `poll` on the polling
//! thread, so the handler sees exactly the messages its owner has taken.

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
use crate::error::ConnectorError;
use crate::position::{KafkaPosition, TopicPartition};

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Only plain maps are behind these locks; a panic elsewhere leaves them consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Where an assigned partition starts reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    Beginning,
    Offset(i64),
    /// The group's committed offset, else `auto.offset.reset`.
    Committed,
}

impl StartAt {
    pub(crate) fn offset(self) -> Offset {
        match self {
            StartAt::Beginning => Offset::Beginning,
            StartAt::Offset(o) => Offset::Offset(o),
            StartAt::Committed => Offset::Stored,
        }
    }
}

/// What a consumer's owner does when the group moves partitions. Both calls run inside
/// `poll`, on the polling thread, before any message of an assigned partition is read
/// and after the last one of a revoked partition was.
pub trait PartitionHandler: Send + Sync + 'static {
    /// `partitions` are this instance's now (an empty list: the instance is in the group
    /// but was given nothing). Returns where each starts, in the same order.
    fn assigned(&self, partitions: &[TopicPartition]) -> Vec<StartAt>;
    /// `partitions` are read elsewhere now; `read` holds the next offset of each as far as
    /// this instance had taken it.
    fn revoked(&self, partitions: &[TopicPartition], read: &KafkaPosition);
    /// The consumer could not take the partitions it was assigned.
    fn assign_failed(&self, error: ConnectorError) {
        error!(%error, "partition assignment failed");
    }
}

/// The context of every group consumer: the rebalance dispatch, and the client-level
/// errors and statistics.
pub struct GroupContext<H> {
    stream: String,
    handler: H,
    /// Where broker reachability and partition lag go; None: nowhere (the scale-out
    /// stages, which report neither).
    events: Option<Arc<dyn SourceEvents>>,
    assigned: Mutex<Vec<TopicPartition>>,
    /// Set by every assignment (even an empty one), cleared by [`take_assignment`].
    changed: AtomicBool,
    /// The newest client-level error librdkafka reported (a failed TLS handshake, rejected
    /// SASL credentials, a refused connection), named in the error when the first request
    /// to the brokers fails; librdkafka's own error for that request only says it timed out.
    last_error: Mutex<Option<(Option<RDKafkaErrorCode>, String)>>,
    /// librdkafka said every broker connection is down, and no broker was seen up since.
    unreachable: AtomicBool,
}

impl<H: PartitionHandler> GroupContext<H> {
    pub fn new(stream: &str, handler: H, events: Option<Arc<dyn SourceEvents>>) -> Self {
        GroupContext {
            stream: stream.to_string(),
            handler,
            events,
            assigned: Mutex::new(Vec::new()),
            changed: AtomicBool::new(false),
            last_error: Mutex::new(None),
            unreachable: AtomicBool::new(false),
        }
    }

    pub fn handler(&self) -> &H {
        &self.handler
    }

    /// A broker answered (a message arrived, or the statistics show one up): the end of an
    /// outage, if there was one.
    pub(crate) fn reached(&self) {
        if self.unreachable.load(Ordering::Relaxed)
            && self.unreachable.swap(false, Ordering::AcqRel)
        {
            info!(stream = %self.stream, "Kafka brokers reachable again");
            if let Some(events) = &self.events {
                events.brokers_reachable(true);
            }
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

    fn assign(&self, consumer: &BaseConsumer<Self>, tpl: &mut TopicPartitionList) {
        let partitions = partitions_of(tpl);
        let starts = self.handler.assigned(&partitions);
        for ((topic, partition), start) in partitions.iter().zip(starts) {
            if start == StartAt::Committed {
                continue;
            }
            if let Err(e) = tpl.set_partition_offset(topic, *partition, start.offset()) {
                error!(stream = %self.stream, %topic, partition, error = %e, "cannot set the start offset");
            }
        }
        let cooperative = is_cooperative(consumer);
        let result: KafkaResult<()> = if cooperative {
            consumer.incremental_assign(tpl)
        } else {
            consumer.assign(tpl)
        };
        if let Err(source) = result {
            self.handler.assign_failed(ConnectorError::Kafka {
                context: format!("assigning the partitions of stream {:?}", self.stream),
                source,
            });
            return;
        }
        let mut assigned = lock(&self.assigned);
        if !cooperative {
            assigned.clear();
        }
        for p in partitions {
            if !assigned.contains(&p) {
                assigned.push(p);
            }
        }
        info!(stream = %self.stream, partitions = ?*assigned, "Kafka partitions assigned by the group");
        self.changed.store(true, Ordering::Release);
    }

    fn revoke(&self, consumer: &BaseConsumer<Self>, tpl: &TopicPartitionList) {
        let read = positions(consumer);
        let cooperative = is_cooperative(consumer);
        let result = if cooperative {
            consumer.incremental_unassign(tpl)
        } else {
            consumer.unassign()
        };
        if let Err(e) = result {
            warn!(stream = %self.stream, error = %e, "partition revocation failed");
        }
        let gone = {
            let mut assigned = lock(&self.assigned);
            let gone: Vec<TopicPartition> = if cooperative {
                partitions_of(tpl)
            } else {
                assigned.clone()
            };
            assigned.retain(|p| !gone.contains(p));
            info!(stream = %self.stream, partitions = ?*assigned, "Kafka partitions revoked by the group");
            gone
        };
        self.handler.revoked(&gone, &read);
        self.changed.store(true, Ordering::Release);
    }
}

fn is_cooperative<C: ConsumerContext>(consumer: &BaseConsumer<C>) -> bool {
    matches!(
        consumer.rebalance_protocol(),
        RebalanceProtocol::Cooperative
    )
}

fn partitions_of(tpl: &TopicPartitionList) -> Vec<TopicPartition> {
    tpl.elements()
        .iter()
        .map(|e| (e.topic().to_string(), e.partition()))
        .collect()
}

/// How far the consumer has read each of its partitions (a local call, no broker request).
fn positions<C: ConsumerContext>(consumer: &BaseConsumer<C>) -> KafkaPosition {
    let mut read = KafkaPosition::default();
    if let Ok(positions) = consumer.position() {
        for e in positions.elements() {
            if let Offset::Offset(o) = e.offset() {
                read.next
                    .insert((e.topic().to_string(), e.partition()), o.max(0) as u64);
            }
        }
    }
    read
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

impl<H: PartitionHandler> ClientContext for GroupContext<H> {
    fn error(&self, error: KafkaError, reason: &str) {
        warn!(stream = %self.stream, error = %error, reason, "Kafka client error");
        let code = error.rdkafka_error_code();
        if code == Some(RDKafkaErrorCode::AllBrokersDown)
            && !self.unreachable.swap(true, Ordering::AcqRel)
        {
            warn!(stream = %self.stream, "no Kafka broker can be reached; retrying (not ready until one answers)");
            if let Some(events) = &self.events {
                events.brokers_reachable(false);
            }
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
        let Some(events) = &self.events else {
            return;
        };
        let assigned = lock(&self.assigned);
        for (topic, t) in &statistics.topics {
            for p in t.partitions.values() {
                if !assigned.contains(&(topic.clone(), p.partition)) || p.hi_offset < 0 {
                    continue;
                }
                // app_offset: one past the last message handed to the consumer's owner.
                let read = if p.app_offset >= 0 {
                    p.app_offset
                } else {
                    p.lo_offset.max(0)
                };
                events.partition_lag(topic, p.partition, (p.hi_offset - read).max(0));
            }
        }
    }
}

impl<H: PartitionHandler> ConsumerContext for GroupContext<H> {
    /// The one rebalance dispatch.
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
                // Nothing is owned any more; the next assignment starts afresh.
                error!(stream = %self.stream, error = ?other, "consumer-group rebalance failed");
                self.revoke(consumer, tpl);
            }
        }
    }
}
