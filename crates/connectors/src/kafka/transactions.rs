//! Kafka transactions and compacted state topics, for `serve`'s scale-out mode
//! (docs/design/scale-out.md): a transactional producer whose `init_transactions` fences
//! any older producer with the same id (and aborts its open transaction), the creation of
//! the state topics, and reading a partition of one back to its end.
//!
//! The end of a partition is found with a marker the reader writes itself, never with the
//! high watermark: Tansu 0.6.0's can run ahead of the last message. The marker is appended
//! after `init_transactions` fenced the partition's previous writer, so every message
//! before it is of a transaction that is over.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ldpstream_config::KafkaConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};

use super::block_on::block_on;
use super::client::client_config;
use super::consumer::GroupMetadata;
use super::sink::Deliveries;
use crate::error::ConnectorError;

/// How long a transaction's calls may take before the commit is called failed.
const TXN_TIMEOUT: Duration = Duration::from_secs(30);

/// The key of the marker messages that end a partition read ([`read_to_marker`]).
pub const MARKER_KEY: &[u8] = b"\x00marker";

pub(super) fn err(context: String, source: KafkaError) -> ConnectorError {
    ConnectorError::Kafka { context, source }
}

/// The client settings of `kafka` (security, options, secrets) for a state client.
pub(super) fn base_config(
    kafka: &KafkaConfig,
    owner: &str,
) -> Result<ClientConfig, ConnectorError> {
    // The source's consumer-only options would make a producer warn; only the shared
    // connection and security settings carry over.
    let connection_only = |options: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        options
            .iter()
            .filter(|(k, _)| is_connection_option(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let mut config = client_config(
        &[],
        &connection_only(&kafka.options),
        &connection_only(&kafka.options_from_env),
        owner,
    )?;
    config.set("bootstrap.servers", &kafka.brokers);
    Ok(config)
}

fn is_connection_option(key: &str) -> bool {
    [
        "security.",
        "ssl.",
        "sasl.",
        "client.",
        "socket.",
        "broker.",
    ]
    .iter()
    .any(|p| key.starts_with(p))
}

/// One message of a transaction: `payload` None is a tombstone (a compacted topic then
/// forgets the key).
pub struct Outgoing {
    pub topic: String,
    /// None: the producer's partitioner picks one by key.
    pub partition: Option<i32>,
    pub key: Vec<u8>,
    pub payload: Option<Vec<u8>>,
}

/// The consumer offset a transaction commits: `next` is where `topic`/`partition` is read
/// from after it, in the group (and generation) `group` names.
pub struct TxnOffsets<'a> {
    pub group: &'a GroupMetadata,
    pub topic: &'a str,
    pub partition: i32,
    pub next: i64,
}

/// A transactional producer. Opening it fences every older producer with the same
/// `transactional.id`: their next commit fails, and an open transaction of theirs (a
/// process killed mid-transaction) is aborted now rather than at its timeout.
pub struct TxnProducer {
    id: String,
    producer: ThreadedProducer<Deliveries>,
}

impl TxnProducer {
    pub fn open(kafka: &KafkaConfig, transactional_id: &str) -> Result<Self, ConnectorError> {
        let mut config = base_config(
            kafka,
            &format!("transactional producer {transactional_id:?}"),
        )?;
        config
            .set("transactional.id", transactional_id)
            .set("linger.ms", "5")
            .set("compression.type", "lz4")
            // A partial carries a whole pane's sketches.
            .set("message.max.bytes", "16000000")
            // Bounds how long a reader waits on a transaction a dead owner left open, when
            // no new owner fences it first.
            .set("transaction.timeout.ms", "60000");
        let producer: ThreadedProducer<Deliveries> = config
            .create_with_context(Deliveries::default())
            .map_err(|e| err(format!("transactional producer {transactional_id:?}"), e))?;
        producer.init_transactions(TXN_TIMEOUT).map_err(|e| {
            err(
                format!(
                    "init_transactions of {transactional_id:?} on {} (the brokers must support \
                     transactions)",
                    kafka.brokers
                ),
                e,
            )
        })?;
        Ok(TxnProducer {
            id: transactional_id.to_string(),
            producer,
        })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Sends `messages` and, with `offsets`, commits the consumer's offsets, all in one
    /// transaction: either all of it is visible to `read_committed` readers or none.
    /// A failed transaction is aborted; a fenced producer returns [`ConnectorError::Fenced`].
    pub fn commit(
        &self,
        messages: &[Outgoing],
        offsets: Option<TxnOffsets<'_>>,
    ) -> Result<(), ConnectorError> {
        let id = &self.id;
        let offsets = match offsets {
            Some(o) => {
                let mut tpl = TopicPartitionList::new();
                tpl.add_partition_offset(o.topic, o.partition, Offset::Offset(o.next))
                    .map_err(|e| err("offsets to commit".into(), e))?;
                Some((tpl, &o.group.0))
            }
            None => None,
        };
        self.producer
            .begin_transaction()
            .map_err(|e| self.failure("begin_transaction", e))?;
        let sent = (|| {
            for m in messages {
                let mut record = BaseRecord::<[u8], [u8]>::to(&m.topic).key(m.key.as_slice());
                if let Some(p) = m.partition {
                    record = record.partition(p);
                }
                if let Some(p) = &m.payload {
                    record = record.payload(p.as_slice());
                }
                loop {
                    match self.producer.send(record) {
                        Ok(()) => break,
                        Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                            std::thread::sleep(Duration::from_millis(5));
                            record = back;
                        }
                        Err((e, _)) => {
                            return Err(self.failure(&format!("sending to {:?}", m.topic), e))
                        }
                    }
                }
            }
            if let Some((tpl, group)) = &offsets {
                self.producer
                    .send_offsets_to_transaction(tpl, group, TXN_TIMEOUT)
                    .map_err(|e| self.failure("send_offsets_to_transaction", e))?;
            }
            self.producer
                .commit_transaction(TXN_TIMEOUT)
                .map_err(|e| self.failure("commit_transaction", e))
        })();
        if let Err(e) = sent {
            if !matches!(e, ConnectorError::Fenced { .. }) {
                if let Err(abort) = self.producer.abort_transaction(TXN_TIMEOUT) {
                    tracing::warn!(transactional_id = %id, error = %abort, "abort_transaction failed");
                }
            }
            return Err(e);
        }
        Ok(())
    }

    fn failure(&self, what: &str, e: KafkaError) -> ConnectorError {
        let fenced = matches!(
            e.rdkafka_error_code(),
            Some(RDKafkaErrorCode::ProducerFenced | RDKafkaErrorCode::InvalidProducerEpoch)
        ) || e.to_string().to_ascii_lowercase().contains("fenced");
        if fenced {
            ConnectorError::Fenced {
                transactional_id: self.id.clone(),
            }
        } else {
            err(format!("{what} (transactional.id {:?})", self.id), e)
        }
    }
}

/// Creates the topics that do not exist yet, compacted; an existing one must have the
/// partition count given (a changelog must match its input's partitions one to one).
pub fn ensure_compacted_topics(
    kafka: &KafkaConfig,
    topics: &[(String, i32)],
) -> Result<(), ConnectorError> {
    let config = base_config(kafka, "state topics")?;
    let admin: AdminClient<DefaultClientContext> = config
        .create()
        .map_err(|e| err("admin client for the state topics".into(), e))?;
    let new: Vec<NewTopic<'_>> = topics
        .iter()
        .map(|(name, partitions)| {
            NewTopic::new(name, *partitions, TopicReplication::Fixed(-1))
                .set("cleanup.policy", "compact")
        })
        .collect();
    let results = block_on(admin.create_topics(
        &new,
        &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
    ))
    .map_err(|e| err("creating the state topics".into(), e))?;
    for r in results {
        match r {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((topic, code)) => {
                return Err(ConnectorError::StateTopic {
                    topic,
                    message: format!(
                        "could not be created ({code}); create it compacted \
                         (cleanup.policy=compact) with the partition count docs/kafka.md gives"
                    ),
                })
            }
        }
    }
    for (name, partitions) in topics {
        let have = partition_count(kafka, name, Duration::from_secs(30))?;
        if have != *partitions {
            return Err(ConnectorError::StateTopic {
                topic: name.clone(),
                message: format!(
                    "has {have} partitions but needs {partitions} (one per input partition for \
                     a changelog, one for the partials)"
                ),
            });
        }
    }
    Ok(())
}

/// The number of partitions of `topic`, retried for up to `within` while it may still be
/// being created.
pub fn partition_count(
    kafka: &KafkaConfig,
    topic: &str,
    within: Duration,
) -> Result<i32, ConnectorError> {
    let mut config = base_config(kafka, &format!("metadata of {topic:?}"))?;
    config.set("group.id", "ldpstream-metadata");
    let consumer: BaseConsumer = config
        .create()
        .map_err(|e| err(format!("metadata client for {topic:?}"), e))?;
    let deadline = Instant::now() + within;
    loop {
        let found = consumer
            .fetch_metadata(Some(topic), Duration::from_secs(5))
            .map(|md| {
                md.topics()
                    .iter()
                    .find(|t| t.name() == topic)
                    .map_or(0, |t| t.partitions().len() as i32)
            });
        match found {
            Ok(n) if n > 0 => return Ok(n),
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
            Ok(_) => {
                return Err(ConnectorError::NoSuchTopic {
                    topic: topic.to_string(),
                    brokers: kafka.brokers.clone(),
                })
            }
            Err(e) => {
                return Err(err(
                    format!(
                        "metadata of {topic:?} from brokers {} (tried for {within:?})",
                        kafka.brokers
                    ),
                    e,
                ))
            }
        }
    }
}

/// Every message of `topic`/`partition` from its start up to the marker whose payload is
/// `nonce` (written by the caller just before), in order, as (key, payload). Earlier
/// markers are included, each one a take-over by an earlier reader; the caller's own is
/// not. Aborted transactions' messages are included (`read_uncommitted`): the caller
/// must tell usable values apart by their content, as it must anyway on a broker whose
/// `read_committed` shows them (Tansu 0.6.0). Under `read_committed` a
/// take-over on Tansu once never reached its marker (the last stable offset stayed
/// behind some transaction; scripts/scale_out_stress.sh).
pub fn read_to_marker(
    kafka: &KafkaConfig,
    topic: &str,
    partition: i32,
    nonce: &[u8],
    within: Duration,
) -> Result<Vec<KeyedPayload>, ConnectorError> {
    let tail = PartitionTail::open(kafka, topic, partition)?;
    let deadline = Instant::now() + within;
    let mut out = Vec::new();
    loop {
        if Instant::now() >= deadline {
            return Err(ConnectorError::StateTopic {
                topic: topic.to_string(),
                message: format!(
                    "partition {partition} was not read to its end within {within:?} (read {} \
                     messages; an open transaction of a dead owner blocks read_committed readers \
                     until transaction.timeout.ms)",
                    out.len()
                ),
            });
        }
        let Some((key, payload)) = tail.next(Duration::from_millis(100))? else {
            continue;
        };
        if key == MARKER_KEY && payload.as_deref() == Some(nonce) {
            return Ok(out);
        }
        out.push((key, payload));
    }
}

/// One partition read from its start, `read_uncommitted`, without joining a consumer
/// group: a take-over's read-back, or an instance watching a state topic it does not own.
pub struct PartitionTail {
    consumer: BaseConsumer,
    topic: String,
    partition: i32,
}

impl PartitionTail {
    pub fn open(kafka: &KafkaConfig, topic: &str, partition: i32) -> Result<Self, ConnectorError> {
        let mut config = base_config(kafka, &format!("reader of {topic:?}"))?;
        config
            .set("group.id", "ldpstream-restore")
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_uncommitted")
            .set("fetch.queue.backoff.ms", "10")
            .set("fetch.message.max.bytes", "16000000");
        let consumer: BaseConsumer = config
            .create()
            .map_err(|e| err(format!("reader of {topic:?}"), e))?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, partition, Offset::Beginning)
            .map_err(|e| err(format!("assigning {topic:?}/{partition}"), e))?;
        consumer
            .assign(&tpl)
            .map_err(|e| err(format!("assigning {topic:?}/{partition}"), e))?;
        Ok(PartitionTail {
            consumer,
            topic: topic.to_string(),
            partition,
        })
    }

    /// The next message, waiting at most `wait`; None if none came.
    pub fn next(&self, wait: Duration) -> Result<Option<KeyedPayload>, ConnectorError> {
        match self.consumer.poll(wait) {
            None => Ok(None),
            Some(Err(e)) => Err(err(
                format!("reading {:?}/{}", self.topic, self.partition),
                e,
            )),
            Some(Ok(m)) => Ok(Some((
                m.key().unwrap_or_default().to_vec(),
                m.payload().map(<[u8]>::to_vec),
            ))),
        }
    }
}

/// A message's key and payload (None: a tombstone).
pub type KeyedPayload = (Vec<u8>, Option<Vec<u8>>);

/// A fresh marker payload: unique to this process and call.
pub fn new_nonce(owner: &str) -> Vec<u8> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{owner}/{}/{nanos}", std::process::id()).into_bytes()
}
