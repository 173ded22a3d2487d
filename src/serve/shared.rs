//! The service's state that the HTTP handlers, the sources' events and the scheduler all
//! read: the metrics registry, the newest records, and readiness.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use ldpstream_engine::record::TestRecord;

use super::metrics::Metrics;

/// State the HTTP handlers read.
pub struct Shared {
    pub(super) metrics: Metrics,
    /// Newest record per (stream, test, group label).
    pub(super) results: Mutex<BTreeMap<(String, String, String), TestRecord>>,
    /// The checkpoint (if any) is restored and every stream's threads are running.
    pub(super) ready: AtomicBool,
    /// Sources still connecting (a Kafka source counts down once its partitions are
    /// assigned); `/readyz` answers 200 only when this is 0 and `ready` is set.
    pub(super) connecting: AtomicUsize,
}

impl Shared {
    pub(super) fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire) && self.connecting.load(Ordering::Acquire) == 0
    }
}
