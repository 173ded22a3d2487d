//! A real Kafka-protocol broker for the integration tests: its address (set by
//! scripts/test.sh), topics and producers.

use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

/// The suite's broker. The Kafka tests are compiled only with the
/// `kafka-integration-tests` feature, which asks for them: a missing broker then fails the
/// test instead of letting it count as passed.
pub fn brokers() -> String {
    match std::env::var("LDPSTREAM_KAFKA_BROKERS") {
        Ok(b) if !b.is_empty() => b,
        _ => panic!(
            "the kafka-integration-tests feature is on but LDPSTREAM_KAFKA_BROKERS is not set: \
             run ./scripts/test.sh (it starts a local broker), or deploy/kafka/start-local.sh \
             and export the address it prints"
        ),
    }
}

pub fn create_topic(brokers: &str, name: &str) {
    create_topic_with_partitions(brokers, name, 4);
}

pub fn create_topic_with_partitions(brokers: &str, name: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let results = rt
        .block_on(admin.create_topics(
            &[NewTopic::new(name, partitions, TopicReplication::Fixed(1))],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        ))
        .unwrap();
    for r in results {
        r.unwrap_or_else(|(t, e)| panic!("creating topic {t}: {e}"));
    }
}

pub fn produce(brokers: &str, topic: &str, messages: &[(i32, Vec<u8>)]) {
    let stamped: Vec<(i32, Option<i64>, Vec<u8>)> = messages
        .iter()
        .map(|(p, m)| (*p, None, m.clone()))
        .collect();
    produce_at(brokers, topic, &stamped);
}

/// Produces (partition, Kafka timestamp in ms or the producer's clock, payload) messages.
pub fn produce_at(brokers: &str, topic: &str, messages: &[(i32, Option<i64>, Vec<u8>)]) {
    produce_with(brokers, &[], topic, messages);
}

/// [`produce_at`] with extra librdkafka options (security settings).
pub fn produce_with(
    brokers: &str,
    options: &[(&str, &str)],
    topic: &str,
    messages: &[(i32, Option<i64>, Vec<u8>)],
) {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", brokers)
        .set("linger.ms", "5")
        .set("batch.num.messages", "100000")
        .set("queue.buffering.max.messages", "1000000");
    for (k, v) in options {
        config.set(*k, *v);
    }
    let producer: BaseProducer = config.create().unwrap();
    for (partition, timestamp, payload) in messages {
        loop {
            let mut record = BaseRecord::<(), [u8]>::to(topic)
                .partition(*partition)
                .payload(payload.as_slice());
            if let Some(ts) = timestamp {
                record = record.timestamp(*ts);
            }
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    producer.poll(Duration::from_millis(10));
                }
                Err((e, _)) => panic!("produce: {e}"),
            }
        }
    }
    producer.flush(Duration::from_secs(120)).unwrap();
}

pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{}-{nanos}", std::process::id())
}

/// One message read back from a topic.
pub struct Consumed {
    pub key: Option<String>,
    pub payload: Vec<u8>,
    pub headers: std::collections::BTreeMap<String, String>,
}

/// Reads `count` messages from every partition of `topic` (from the beginning).
pub fn consume_all(brokers: &str, topic: &str, count: usize, within: Duration) -> Vec<Consumed> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::{Headers, Message};
    use rdkafka::{Offset, TopicPartitionList};
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", unique("check"))
        .create()
        .unwrap();
    let mut all = TopicPartitionList::new();
    for p in 0..4 {
        all.add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&all).unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + within;
    while out.len() < count && Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            let headers = m
                .headers()
                .map(|h| {
                    h.iter()
                        .map(|h| {
                            (
                                h.key.to_string(),
                                String::from_utf8_lossy(h.value.unwrap_or_default()).into_owned(),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            out.push(Consumed {
                key: m.key().map(|k| String::from_utf8_lossy(k).into_owned()),
                payload: m.payload().unwrap_or_default().to_vec(),
                headers,
            });
        }
    }
    assert_eq!(out.len(), count, "messages on {topic}");
    out
}
