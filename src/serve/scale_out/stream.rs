//! A scale-out stream as both stages see it: its config and the names of its topics.

use ldpstream_config::{KafkaConfig, ScaleOutConfig, StreamConfig};
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::stream::ReportLayout;

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
