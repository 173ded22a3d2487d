//! The Kafka sink: one JSON message per record, keyed so that a compacted topic keeps the
//! newest result of each (stream, test, group, window). A tick returns only once the
//! broker acknowledged its records, so a failed delivery surfaces as an error naming the
//! topic instead of a silent gap.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use ldpstream_engine::record::TestRecord;
use rdkafka::client::ClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};

use super::client::client_config;
use crate::error::ConnectorError;

/// How long a tick waits for acknowledgements before it calls the sink failed.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(30);

/// Producer defaults: idempotent (a retried send is not duplicated) and lightly batched.
const DEFAULTS: [(&str, &str); 3] = [
    ("enable.idempotence", "true"),
    ("linger.ms", "5"),
    ("compression.type", "lz4"),
];

/// Counts failed deliveries (librdkafka reports them asynchronously, while polled).
#[derive(Default)]
pub(crate) struct Deliveries {
    pub(crate) failed: AtomicU64,
    pub(crate) last_error: Mutex<Option<String>>,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = result {
            self.failed.fetch_add(1, Ordering::AcqRel);
            let mut last = self.last_error.lock().unwrap_or_else(|p| p.into_inner());
            *last = Some(e.to_string());
        }
    }
}

pub struct KafkaSink {
    topic: String,
    producer: BaseProducer<Deliveries>,
}

fn sink_err(topic: &str, what: impl std::fmt::Display) -> ConnectorError {
    ConnectorError::Delivery {
        topic: topic.to_string(),
        message: what.to_string(),
    }
}

/// The message key: the identity of a result, whose newest value a compacted topic keeps.
pub fn record_key(r: &TestRecord) -> String {
    format!(
        "{}|{}|{}|{}",
        r.stream,
        r.test,
        r.group_label(),
        r.window_start.as_deref().unwrap_or("")
    )
}

impl KafkaSink {
    pub fn open(
        brokers: &str,
        topic: &str,
        options: &std::collections::BTreeMap<String, String>,
        options_from_env: &std::collections::BTreeMap<String, String>,
    ) -> Result<Self, ConnectorError> {
        let mut config = client_config(
            &DEFAULTS,
            options,
            options_from_env,
            &format!("Kafka sink (topic {topic:?})"),
        )?;
        config.set("bootstrap.servers", brokers);
        let producer = config
            .create_with_context(Deliveries::default())
            .map_err(|e| sink_err(topic, format!("producer configuration: {e}")))?;
        Ok(KafkaSink {
            topic: topic.to_string(),
            producer,
        })
    }

    pub fn write(&mut self, records: &[TestRecord]) -> Result<(), ConnectorError> {
        let failed_before = self.producer.context().failed.load(Ordering::Acquire);
        for r in records {
            let payload = serde_json::to_vec(r).map_err(ConnectorError::Serialize)?;
            let key = record_key(r);
            let mut record = BaseRecord::to(&self.topic).key(&key).payload(&payload);
            loop {
                match self.producer.send(record) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                        // The local queue is full: serve deliveries, then try again.
                        self.producer.poll(Duration::from_millis(10));
                        record = back;
                    }
                    Err((e, _)) => return Err(sink_err(&self.topic, e)),
                }
            }
        }
        self.producer.flush(FLUSH_TIMEOUT).map_err(|e| {
            sink_err(
                &self.topic,
                format!("records not acknowledged within {FLUSH_TIMEOUT:?}: {e}"),
            )
        })?;
        let failed = self.producer.context().failed.load(Ordering::Acquire) - failed_before;
        if failed > 0 {
            let last = self
                .producer
                .context()
                .last_error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
                .unwrap_or_default();
            return Err(sink_err(
                &self.topic,
                format!("{failed} records were not delivered; last error: {last}"),
            ));
        }
        Ok(())
    }
}
