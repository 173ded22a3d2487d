//! What a stream's source reports while it runs, turned into metrics and readiness.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ldpstream_connectors::SourceEvents;

use super::shared::Shared;

/// The [`SourceEvents`] of one stream.
pub(super) struct StreamEvents {
    stream: String,
    shared: Arc<Shared>,
}

impl StreamEvents {
    pub(super) fn new(stream: &str, shared: Arc<Shared>) -> Self {
        StreamEvents {
            stream: stream.to_string(),
            shared,
        }
    }
}

impl SourceEvents for StreamEvents {
    fn connected(&self) {
        self.shared.connecting.fetch_sub(1, Ordering::AcqRel);
    }

    fn bad_message(&self, reason: &'static str) {
        self.shared
            .metrics
            .rejected
            .with_label_values(&[self.stream.as_str(), reason])
            .inc();
    }

    fn dead_letters_failed(&self, count: u64) {
        self.shared
            .metrics
            .dead_letters_failed
            .with_label_values(&[self.stream.as_str()])
            .inc_by(count);
    }

    fn partition_lag(&self, topic: &str, partition: i32, lag: i64) {
        self.shared
            .metrics
            .kafka_lag
            .with_label_values(&[topic, &partition.to_string()])
            .set(lag);
    }

    fn brokers_reachable(&self, reachable: bool) {
        if reachable {
            self.shared.unreachable.fetch_sub(1, Ordering::AcqRel);
        } else {
            self.shared.unreachable.fetch_add(1, Ordering::AcqRel);
        }
        self.shared
            .metrics
            .kafka_unreachable
            .with_label_values(&[self.stream.as_str()])
            .set(i64::from(!reachable));
    }

    fn partition_revoked(&self, topic: &str, partition: i32) {
        // Another instance reads it now; a frozen last value would mislead a dashboard.
        let _ = self
            .shared
            .metrics
            .kafka_lag
            .remove_label_values(&[topic, &partition.to_string()]);
    }
}
