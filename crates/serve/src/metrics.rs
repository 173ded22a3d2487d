//! The service's Prometheus metrics, in one registry. Names follow
//! `ldpstream_<name>_<unit>[_total]`; each is updated where its event happens.

use prometheus::{
    Encoder, Gauge, GaugeVec, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGaugeVec,
    Opts, Registry, TextEncoder,
};

use std::collections::BTreeMap;

use ldpstream_connectors::messages::MESSAGE_REASONS;
use ldpstream_engine::record::{TestRecord, MAX_RECORDED_CATEGORIES};
use ldpstream_engine::sketch::RejectReason;

use super::group_labels::GroupLabels;
use prometheus::core::Collector;
use serde::Serialize;

/// Every metric the service exports.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    pub reports: IntCounterVec,
    pub rejected: IntCounterVec,
    pub late: IntCounterVec,
    pub statistic: GaugeVec,
    pub p_value: GaugeVec,
    pub reject: IntGaugeVec,
    pub final_reject: IntGaugeVec,
    pub e_value: GaugeVec,
    pub anytime_p_value: GaugeVec,
    pub anytime_q_value: GaugeVec,
    pub null_probability: GaugeVec,
    pub window_reports: IntGaugeVec,
    pub estimate: GaugeVec,
    pub kafka_lag: IntGaugeVec,
    pub kafka_unreachable: IntGaugeVec,
    pub dead_letters_failed: IntCounterVec,
    pub budget_remaining: GaugeVec,
    pub snapshot_seconds: Histogram,
    pub checkpoint_age: Gauge,
    pub checkpoint_failures: IntCounter,
    pub groups_kept: IntGaugeVec,
    pub overflow_reports: IntCounterVec,
    /// Scale-out streams: 1 on the instance that owns the stream's merge, 0 elsewhere.
    pub scale_out_merge_owner: IntGaugeVec,
    /// The result metrics' group labels, one per group column of any stream.
    groups: GroupLabels,
}

fn register<T: prometheus::core::Collector + Clone + 'static>(
    registry: &Registry,
    metric: prometheus::Result<T>,
) -> prometheus::Result<T> {
    let metric = metric?;
    registry.register(Box::new(metric.clone()))?;
    Ok(metric)
}

/// The metrics of test results, labelled by stream, test and the group columns.
struct ResultMetrics {
    statistic: GaugeVec,
    p_value: GaugeVec,
    reject: IntGaugeVec,
    window_reports: IntGaugeVec,
    estimate: GaugeVec,
    final_reject: IntGaugeVec,
    e_value: GaugeVec,
    anytime_p_value: GaugeVec,
    anytime_q_value: GaugeVec,
    null_probability: GaugeVec,
}

impl ResultMetrics {
    fn register(
        r: &Registry,
        result_labels: &[&str],
        estimate_labels: &[&str],
    ) -> prometheus::Result<Self> {
        Ok(ResultMetrics {
            statistic: register(
                r,
                GaugeVec::new(
                    Opts::new(
                        "ldpstream_test_statistic",
                        "Test statistic of the newest window snapshot.",
                    ),
                    result_labels,
                ),
            )?,
            p_value: register(
                r,
                GaugeVec::new(
                    Opts::new(
                        "ldpstream_test_p_value",
                        "Asymptotic p-value of the newest window snapshot.",
                    ),
                    result_labels,
                ),
            )?,
            reject: register(
                r,
                IntGaugeVec::new(
                    Opts::new(
                        "ldpstream_test_reject",
                        "1 when the newest window snapshot rejects the null, else 0.",
                    ),
                    result_labels,
                ),
            )?,
            window_reports: register(
                r,
                IntGaugeVec::new(
                    Opts::new(
                        "ldpstream_window_reports",
                        "Reports folded into the newest window snapshot.",
                    ),
                    result_labels,
                ),
            )?,
            estimate: register(
                r,
                GaugeVec::new(
                    Opts::new(
                        "ldpstream_estimate",
                        "Debiased frequency estimate per category, newest window snapshot.",
                    ),
                    estimate_labels,
                ),
            )?,
            final_reject: register(
                r,
                IntGaugeVec::new(
                    Opts::new(
                        "ldpstream_test_final_reject",
                        "1 when the newest final (closed) window of a fixed-n test rejected its \
                         null, else 0. Provisional snapshots never change it: alert on this, \
                         not on ldpstream_test_reject.",
                    ),
                    result_labels,
                ),
            )?,
            e_value: register(
                r,
                GaugeVec::new(
                    Opts::new(
                        "ldpstream_test_e_value",
                        "Sequential tests: the e-value of the newest window's latest look. It \
                         rejects at 1/alpha, with P(ever >= 1/alpha | H0) <= alpha however \
                         often it is looked at.",
                    ),
                    result_labels,
                ),
            )?,
            anytime_p_value: register(
                r,
                GaugeVec::new(
                    Opts::new(
                        "ldpstream_test_anytime_p_value",
                        "Sequential tests: min(1, 1 / the largest e-value of the window so far).",
                    ),
                    result_labels,
                ),
            )?,
            anytime_q_value: register(
                r,
                GaugeVec::new(
                    Opts::new(
                        "ldpstream_test_anytime_q_value",
                        "Sequential tests: the anytime p-value adjusted by Benjamini-Hochberg \
                         across the groups of the test's window; <= alpha keeps the false \
                         discovery rate across groups at most alpha.",
                    ),
                    result_labels,
                ),
            )?,
            null_probability: register(
                r,
                GaugeVec::new(
                    Opts::new(
                        "ldpstream_null_probability",
                        "The null distribution of a goodness-of-fit or identity test, per \
                         category (set at start).",
                    ),
                    &["stream", "test", "category"],
                ),
            )?,
        })
    }
}

/// The metrics of the service itself: ingest, Kafka, privacy budget, snapshots, checkpoints.
struct OperationMetrics {
    reports: IntCounterVec,
    rejected: IntCounterVec,
    late: IntCounterVec,
    kafka_lag: IntGaugeVec,
    kafka_unreachable: IntGaugeVec,
    dead_letters_failed: IntCounterVec,
    budget_remaining: GaugeVec,
    snapshot_seconds: Histogram,
    groups_kept: IntGaugeVec,
    overflow_reports: IntCounterVec,
    checkpoint_failures: IntCounter,
    checkpoint_age: Gauge,
}

impl OperationMetrics {
    fn register(r: &Registry) -> prometheus::Result<Self> {
        Ok(OperationMetrics {
            reports: register(
                r,
                IntCounterVec::new(
                    Opts::new("ldpstream_reports_total", "Reports received, per stream."),
                    &["stream"],
                ),
            )?,
            rejected: register(
                r,
                IntCounterVec::new(
                    Opts::new(
                        "ldpstream_reports_rejected_total",
                        "Reports received but not folded, per stream and reason.",
                    ),
                    &["stream", "reason"],
                ),
            )?,
            late: register(
                r,
                IntCounterVec::new(
                    Opts::new(
                        "ldpstream_reports_late_total",
                        "Reports not folded because their pane had closed (behind the watermark).",
                    ),
                    &["stream"],
                ),
            )?,
            kafka_lag: register(
                r,
                IntGaugeVec::new(
                    Opts::new(
                        "ldpstream_kafka_consumer_lag",
                        "Messages behind the partition's high watermark (Kafka sources).",
                    ),
                    &["topic", "partition"],
                ),
            )?,
            kafka_unreachable: register(
                r,
                IntGaugeVec::new(
                    Opts::new(
                        "ldpstream_kafka_brokers_unreachable",
                        "1 while no broker of the stream's Kafka source can be reached (it keeps retrying; /readyz says not ready), else 0.",
                    ),
                    &["stream"],
                ),
            )?,
            dead_letters_failed: register(
                r,
                IntCounterVec::new(
                    Opts::new(
                        "ldpstream_dead_letters_failed_total",
                        "Undecodable messages that could not be delivered to the dead-letter topic.",
                    ),
                    &["stream"],
                ),
            )?,
            budget_remaining: register(
                r,
                GaugeVec::new(
                    Opts::new(
                        "ldpstream_privacy_budget_remaining",
                        "Curator-model streams: the privacy budget (epsilon) left for a release over all time.",
                    ),
                    &["stream"],
                ),
            )?,
            snapshot_seconds: register(
                r,
                Histogram::with_opts(
                    HistogramOpts::new(
                        "ldpstream_snapshot_duration_seconds",
                        "Time to copy a stream's due windows and evaluate their tests.",
                    )
                    .buckets(vec![
                        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                        2.5, 5.0, 10.0, 30.0, 60.0,
                    ]),
                ),
            )?,
            groups_kept: register(
                r,
                IntGaugeVec::new(
                    Opts::new(
                        "ldpstream_groups",
                        "Distinct groups a stream keeps apart; at most its max_groups, beyond \
                         which reports go to the \"__other__\" group.",
                    ),
                    &["stream"],
                ),
            )?,
            overflow_reports: register(
                r,
                IntCounterVec::new(
                    Opts::new(
                        "ldpstream_overflow_reports_total",
                        "Reports of groups beyond the stream's max_groups, folded into the \
                         \"__other__\" group.",
                    ),
                    &["stream"],
                ),
            )?,
            checkpoint_failures: register(
                r,
                IntCounter::with_opts(Opts::new(
                    "ldpstream_checkpoint_failures_total",
                    "Periodic checkpoints that could not be written (the last good one is kept; the next interval retries).",
                )),
            )?,
            checkpoint_age: register(
                r,
                Gauge::with_opts(Opts::new(
                    "ldpstream_checkpoint_age_seconds",
                    "Seconds since the last checkpoint was written or restored (0 without checkpoints).",
                )),
            )?,
        })
    }
}

impl Metrics {
    /// `groups`: the group columns of every stream, each a label of the result metrics.
    pub fn new(groups: GroupLabels) -> prometheus::Result<Self> {
        let r = Registry::new();
        // The standard process_* series (CPU, resident memory, open files, start time).
        r.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))?;
        let build_info = IntGaugeVec::new(
            Opts::new(
                "ldpstream_build_info",
                "1, labelled with the running ldpstream version.",
            ),
            &["version"],
        )?;
        build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION")])
            .set(1);
        r.register(Box::new(build_info))?;
        let result_labels: Vec<&str> = ["stream", "test"]
            .into_iter()
            .chain(groups.names())
            .collect();
        let estimate_labels: Vec<&str> =
            result_labels.iter().copied().chain(["category"]).collect();
        let results = ResultMetrics::register(&r, &result_labels, &estimate_labels)?;
        let ops = OperationMetrics::register(&r)?;
        let scale_out_merge_owner = register(
            &r,
            IntGaugeVec::new(
                Opts::new(
                    "ldpstream_scale_out_merge_owner",
                    "Scale-out streams: 1 on the instance that owns the stream's merge (and \
                     writes its final records), 0 on the others.",
                ),
                &["stream"],
            ),
        )?;
        Ok(Metrics {
            scale_out_merge_owner,
            statistic: results.statistic,
            p_value: results.p_value,
            reject: results.reject,
            window_reports: results.window_reports,
            estimate: results.estimate,
            final_reject: results.final_reject,
            e_value: results.e_value,
            anytime_p_value: results.anytime_p_value,
            anytime_q_value: results.anytime_q_value,
            null_probability: results.null_probability,
            reports: ops.reports,
            rejected: ops.rejected,
            late: ops.late,
            kafka_lag: ops.kafka_lag,
            kafka_unreachable: ops.kafka_unreachable,
            dead_letters_failed: ops.dead_letters_failed,
            budget_remaining: ops.budget_remaining,
            snapshot_seconds: ops.snapshot_seconds,
            groups_kept: ops.groups_kept,
            overflow_reports: ops.overflow_reports,
            checkpoint_failures: ops.checkpoint_failures,
            checkpoint_age: ops.checkpoint_age,
            registry: r,
            groups,
        })
    }

    /// Exports every counter whose label set is known at start at 0, so that a dashboard
    /// panel or a `rate()` over it shows 0 rather than "no data" until the first event (the
    /// Prometheus instrumentation guide's advice for labels known in advance).
    pub fn export_zeros<'a>(&self, streams: impl IntoIterator<Item = &'a str>) {
        for stream in streams {
            for vec in [
                &self.reports,
                &self.late,
                &self.dead_letters_failed,
                &self.overflow_reports,
            ] {
                vec.with_label_values(&[stream]).inc_by(0);
            }
            let reasons = RejectReason::ALL.iter().map(|r| r.name());
            for reason in reasons.chain(MESSAGE_REASONS) {
                self.rejected.with_label_values(&[stream, reason]).inc_by(0);
            }
        }
    }

    /// Sets the result gauges from a record; the newest window's record wins.
    pub fn observe_record(&self, record: &TestRecord) {
        let group = self.groups.values(record);
        let labels: Vec<&str> = [record.stream.as_str(), record.test.as_str()]
            .into_iter()
            .chain(group.iter().map(String::as_str))
            .collect();
        if let Some(s) = record.statistic {
            self.statistic.with_label_values(&labels).set(s);
        }
        if let Some(p) = record.p_value {
            self.p_value.with_label_values(&labels).set(p);
        }
        self.reject
            .with_label_values(&labels)
            .set(i64::from(record.reject));
        if let Some(e) = record.e_value {
            self.e_value.with_label_values(&labels).set(e);
        }
        if let Some(q) = record.anytime_q_value {
            self.anytime_q_value.with_label_values(&labels).set(q);
        }
        if let Some(p) = record.anytime_p_value {
            self.anytime_p_value.with_label_values(&labels).set(p);
        }
        if record.is_final {
            self.final_reject
                .with_label_values(&labels)
                .set(i64::from(record.reject));
        }
        // Curator-model records carry no count (it is not private): no series at all,
        // rather than a made-up one.
        if let Some(n) = record.n {
            self.window_reports
                .with_label_values(&labels)
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        for (j, e) in record.estimate.iter().enumerate() {
            let category = j.to_string();
            let mut with_category = labels.clone();
            with_category.push(category.as_str());
            self.estimate.with_label_values(&with_category).set(*e);
        }
    }

    /// Exports the null distributions of a stream's tests that have one, up to
    /// [`MAX_RECORDED_CATEGORIES`] categories (as the estimates): one series per category
    /// at d = 2^24 was 16.7 million series and over 15 GB of RSS.
    pub fn observe_nulls(&self, stream: &ldpstream_config::StreamConfig, domain: usize) {
        if domain > MAX_RECORDED_CATEGORIES {
            return;
        }
        for test in &stream.tests {
            let Some(null) = test.spec.null() else {
                continue;
            };
            for (j, p) in null.probabilities(domain).into_iter().enumerate() {
                self.null_probability
                    .with_label_values(&[stream.name.as_str(), test.name.as_str(), &j.to_string()])
                    .set(p);
            }
        }
    }

    /// A stream's report counters, read without creating series that were never set (so
    /// `/metrics` is unchanged by a status page being open).
    pub fn stream_counts(&self, stream: &str) -> StreamCounts {
        let mut rejected_by_reason = BTreeMap::new();
        for (labels, v) in counter_samples(&self.rejected) {
            if labels.get("stream").map(String::as_str) == Some(stream) {
                let reason = labels.get("reason").cloned().unwrap_or_default();
                *rejected_by_reason.entry(reason).or_insert(0) += v;
            }
        }
        let total = |vec: &IntCounterVec| -> u64 {
            counter_samples(vec)
                .filter(|(labels, _)| labels.get("stream").map(String::as_str) == Some(stream))
                .map(|(_, v)| v)
                .sum()
        };
        StreamCounts {
            reports: total(&self.reports),
            rejected: rejected_by_reason.values().sum(),
            rejected_by_reason,
            late: total(&self.late),
        }
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        // Encoding into a Vec cannot fail on I/O; a failure would be a bad metric name,
        // which the constructor already rejected.
        if TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .is_err()
        {
            return String::new();
        }
        String::from_utf8(out).unwrap_or_default()
    }
}

/// A stream's counters, as `/api/v1/streams` reports them.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StreamCounts {
    pub reports: u64,
    pub rejected: u64,
    pub rejected_by_reason: BTreeMap<String, u64>,
    pub late: u64,
}

/// Every series of a counter vector: its labels and value.
fn counter_samples(vec: &IntCounterVec) -> impl Iterator<Item = (BTreeMap<String, String>, u64)> {
    vec.collect()
        .into_iter()
        .flat_map(|family| family.get_metric().to_vec())
        .map(|m| {
            let labels = m
                .get_label()
                .iter()
                .map(|l| (l.name().to_string(), l.value().to_string()))
                .collect();
            // Integer counters are exposed as f64; they stay exact below 2^53.
            (labels, m.get_counter().get_value() as u64)
        })
}
