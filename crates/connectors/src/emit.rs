//! What a running source emits: decoded batches, each with the position just after it,
//! and events for the service's metrics.

use arrow_array::RecordBatch;

use crate::position::Position;

/// A decoded batch and the source position just after it.
pub struct SourceBatch {
    pub batch: RecordBatch,
    pub position: Position,
}

/// What a source reports while it runs, for the service's metrics. One value per stream.
pub trait SourceEvents: Send + Sync {
    /// The source is connected (a Kafka source: the group assigned its partitions).
    fn connected(&self);
    /// A message that did not decode (it is counted under `reason`, one of
    /// [`crate::messages::MESSAGE_REASONS`], and dead-lettered when configured).
    fn bad_message(&self, reason: &'static str);
    /// Dead-letter deliveries that failed.
    fn dead_letters_failed(&self, count: u64);
    /// Messages behind the high watermark in a partition this instance reads.
    fn partition_lag(&self, topic: &str, partition: i32, lag: i64);
    /// A partition another instance reads now.
    fn partition_revoked(&self, topic: &str, partition: i32);
    /// No broker of a Kafka source can be reached (`false`), or one can again (`true`):
    /// called on each change only. The source keeps retrying meanwhile.
    fn brokers_reachable(&self, _reachable: bool) {}
}
