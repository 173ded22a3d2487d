//! The service's state that the HTTP handlers, the sources' events and the scheduler all
//! read: the metrics registry, the newest records, their last hour, the streams' configs,
//! and readiness.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use ldpstream_config::StreamConfig;
use ldpstream_engine::record::{TestRecord, MAX_RECORDED_CATEGORIES};
use serde::Serialize;

use super::history::History;
use super::metrics::Metrics;
use super::rate::ReportRates;

pub(super) use super::history::ResultKey;

/// State the HTTP handlers read.
pub struct Shared {
    pub(super) metrics: Metrics,
    /// Newest record per (stream, test, group): the group as its column → value map, since
    /// no joined string keeps every pair of groups apart.
    pub(super) results: Mutex<BTreeMap<ResultKey, TestRecord>>,
    /// The last hour of every (stream, test, group)'s p-values, bounded.
    pub(super) history: Mutex<History>,
    /// Each stream's report rate, sampled at every snapshot tick.
    pub(super) rates: Mutex<ReportRates>,
    /// What `/api/v1/streams` says about each stream's config, filled as streams start.
    pub(super) streams: Mutex<Vec<StreamInfo>>,
    /// The checkpoint (if any) is restored and every stream's threads are running.
    pub(super) ready: AtomicBool,
    /// Sources still connecting (a Kafka source counts down once its partitions are
    /// assigned); `/readyz` answers 200 only when this is 0 and `ready` is set.
    pub(super) connecting: AtomicUsize,
    /// Kafka sources that reach no broker now (each keeps retrying); not ready meanwhile.
    pub(super) unreachable: AtomicUsize,
}

impl Shared {
    /// Makes records visible: metrics, the newest result per key, and the history.
    pub(super) fn publish(&self, records: &[TestRecord]) {
        {
            let mut latest = self.results.lock().unwrap_or_else(|p| p.into_inner());
            for r in records {
                self.metrics.observe_record(r);
                latest.insert(
                    (r.stream.clone(), r.test.clone(), r.group.clone()),
                    r.clone(),
                );
            }
        }
        self.history
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .record(super::history::unix_millis(), records);
    }

    pub(super) fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
            && self.connecting.load(Ordering::Acquire) == 0
            && self.unreachable.load(Ordering::Acquire) == 0
    }
}

/// A stream as the status page needs it: the config's view, not the counters.
#[derive(Debug, Clone, Serialize)]
pub struct StreamInfo {
    pub name: String,
    pub domain: usize,
    /// A curator-model stream: its report counts are not private, so none is shown.
    pub private: bool,
    pub tests: Vec<TestInfo>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TestInfo {
    pub name: String,
    /// The null distribution of a goodness-of-fit or identity test, as
    /// `ldpstream_null_probability` exports it; None above
    /// [`MAX_RECORDED_CATEGORIES`], where records omit their estimates too.
    pub null: Option<Vec<f64>>,
}

impl StreamInfo {
    pub fn of(stream: &StreamConfig, domain: usize) -> StreamInfo {
        StreamInfo {
            name: stream.name.clone(),
            domain,
            private: stream.has_private_tests(),
            tests: stream
                .tests
                .iter()
                .map(|t| TestInfo {
                    name: t.name.clone(),
                    // 2^24 doubles would be 128 MiB held and ~300 MB of JSON a request.
                    null: t
                        .spec
                        .null()
                        .filter(|_| domain <= MAX_RECORDED_CATEGORIES)
                        .map(|n| n.probabilities(domain)),
                })
                .collect(),
        }
    }
}
