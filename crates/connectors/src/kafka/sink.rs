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
/// A JSON array `[stream, test, group, window_start]`, with the group as its object of
/// column → value (or null): injective, unlike a `k=v` join, which gave a null group and
/// `""` (or `("x,b=y", "z")` and `("x", "y,b=z")`) one key, so compaction dropped one
/// group's result.
pub fn record_key(r: &TestRecord) -> String {
    serde_json::json!([r.stream, r.test, r.group, r.window_start]).to_string()
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::record_key;
    use ldpstream_engine::record::TestRecord;

    fn record(group: Option<BTreeMap<String, Option<String>>>) -> TestRecord {
        let mut r: TestRecord = serde_json::from_value(serde_json::json!({
            "stream": "s", "test": "t", "method": "LocalExpGOF", "mechanism": "grr",
            "group": null, "window_start": "w", "window_end": null, "n": 5,
            "n1": null, "n2": null, "statistic": 1.0, "df": 3, "p_value": 0.5,
            "q_value": null, "reject": false, "alpha": 0.05, "estimate": [],
            "std_error": [], "mle": [], "mle_converged": true, "mle_iterations": 0,
            "privacy": {"kind": "grr", "epsilon": 1.0}, "calibration": "asymptotic",
            "mc_p_value": null, "critical_value": null, "tv_distance": null,
            "fit_iterations": null, "fit_converged": null, "refused": null,
            "epsilon_spent": null, "budget_remaining": null, "blocks": null,
            "block_size": null, "block": null, "rejected_reports": {},
            "inconclusive": false, "inconclusive_reason": null, "final": true,
            "late_reports": 0, "e_value": null, "anytime_p_value": null
        }))
        .unwrap();
        r.group = group;
        r
    }

    fn group(pairs: &[(&str, Option<&str>)]) -> Option<BTreeMap<String, Option<String>>> {
        Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
                .collect(),
        )
    }

    #[test]
    fn groups_that_join_alike_get_different_keys() {
        let null = record(group(&[("g", None)]));
        let empty = record(group(&[("g", Some(""))]));
        assert_eq!(null.group_label(), empty.group_label());
        assert_ne!(record_key(&null), record_key(&empty));
        let a = record(group(&[("a", Some("x,b=y")), ("b", Some("z"))]));
        let b = record(group(&[("a", Some("x")), ("b", Some("y,b=z"))]));
        assert_ne!(record_key(&a), record_key(&b));
        assert_eq!(
            record_key(&empty),
            r#"["s","t",{"g":""},"w"]"#,
            "the documented key form"
        );
    }
}
