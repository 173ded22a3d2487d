//! A scale-out stream as both stages see it: its config and the names of its topics, and
//! the lock both stages' partition handlers share with their loops.

use std::sync::{Mutex, MutexGuard};

use ldpstream_config::{KafkaConfig, ScaleOutConfig, StreamConfig};
use ldpstream_connectors::kafka::transactions::Outgoing;
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::stream::ReportLayout;

/// A handler that panicked inside a rebalance left the state as it was; keep using it.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A scale-out stream and the names of its topics.
pub(super) struct ScaleOutStream {
    pub(super) config: StreamConfig,
    pub(super) kafka: KafkaConfig,
    pub(super) scale_out: ScaleOutConfig,
    pub(super) mechanism: Mechanism,
    pub(super) layout: ReportLayout,
    pub(super) width: i64,
    pub(super) lateness: i64,
    /// The consumer group, which also names the state topics and transactional ids.
    pub(super) app: String,
    pub(super) topic: String,
    pub(super) input_partitions: i32,
    pub(super) changelog: String,
    pub(super) partials: String,
}

impl ScaleOutStream {
    /// A message for input partition `partition`'s own partition of the changelog
    /// (`payload` None: a tombstone).
    pub(super) fn to_changelog(
        &self,
        partition: i32,
        key: Vec<u8>,
        payload: Option<Vec<u8>>,
    ) -> Outgoing {
        Outgoing {
            topic: self.changelog.clone(),
            partition: Some(partition),
            key,
            payload,
        }
    }

    /// A message for the partials topic's one partition.
    pub(super) fn to_partials(&self, key: Vec<u8>, payload: Option<Vec<u8>>) -> Outgoing {
        Outgoing {
            topic: self.partials.clone(),
            partition: Some(0),
            key,
            payload,
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    //! A scale-out stream for the stages' unit tests: GenRR over 4 categories, a
    //! one-minute tumbling test and a cumulative one, two input partitions.

    use super::*;
    use ldpstream_config::{Config, SourceConfig};
    use ldpstream_engine::stream::stream_pane_width;
    use ldpstream_engine::window::Grouped;

    pub(in crate::scale_out) fn stream() -> ScaleOutStream {
        let config = Config::from_toml_str(
            r#"
[[stream]]
name = "k"
source = { kind = "kafka", brokers = "b:9092", topics = ["in"], group_id = "g", scale_out = { results_topic = "out" } }
mechanism = { kind = "grr", epsilon = 1.0, domain = 4 }
[[stream.test]]
name = "minute"
kind = "gof"
null = "uniform"
window = { kind = "tumbling", size = "1m" }
[[stream.test]]
name = "all"
kind = "gof"
null = "uniform"
window = { kind = "cumulative" }
"#,
            "test",
        )
        .unwrap();
        let config = config.streams[0].clone();
        let SourceConfig::Kafka(kafka) = config.source.clone() else {
            unreachable!()
        };
        let mechanism = Mechanism::from_config(&config.mechanism).unwrap();
        ScaleOutStream {
            layout: ReportLayout::of(&config, &mechanism),
            width: stream_pane_width(&config),
            lateness: 0,
            scale_out: kafka.scale_out.clone().unwrap(),
            kafka,
            mechanism,
            app: "g".into(),
            topic: "in".into(),
            input_partitions: 2,
            changelog: "g-changelog".into(),
            partials: "g-partials".into(),
            config,
        }
    }

    /// `n` reports of category `x`, ungrouped.
    pub(in crate::scale_out) fn pane(s: &ScaleOutStream, x: u32, n: usize) -> Grouped {
        let mut sketch = s.mechanism.new_sketch();
        let reports = arrow_array::UInt32Array::from(vec![x; n]);
        ldpstream_engine::kernels::fold_batch(&s.mechanism, &mut sketch, &reports, None).unwrap();
        Grouped::from([(Vec::new(), sketch)])
    }
}
