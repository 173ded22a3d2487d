//! The counters a folded batch adds to: reports, late and rejected reports by reason,
//! groups kept and reports over `max_groups`. Shared by both ways `serve` folds: one
//! store per stream, and the scale-out mode's store per input partition.

use ldpstream_engine::sketch::RejectReason;
use ldpstream_engine::stream::PanedDelta;

use super::metrics::Metrics;

/// The reports a delta's fold rejected, by reason.
pub(super) fn rejected_counts(delta: &PanedDelta) -> [u64; RejectReason::COUNT] {
    let mut rejected = [0u64; RejectReason::COUNT];
    for grouped in delta.panes.values().chain(std::iter::once(&delta.untimed)) {
        for sketch in grouped.values() {
            for (i, reason) in RejectReason::ALL.iter().enumerate() {
                rejected[i] += sketch.rejected().get(*reason);
            }
        }
    }
    rejected
}

/// The counters of one folded batch.
pub(super) fn export_fold(
    metrics: &Metrics,
    name: &str,
    rows: u64,
    late: u64,
    rejected: &[u64; RejectReason::COUNT],
    groups_kept: usize,
    overflow_reports: u64,
) {
    metrics.reports.with_label_values(&[name]).inc_by(rows);
    metrics.late.with_label_values(&[name]).inc_by(late);
    metrics
        .groups_kept
        .with_label_values(&[name])
        .set(i64::try_from(groups_kept).unwrap_or(i64::MAX));
    metrics
        .overflow_reports
        .with_label_values(&[name])
        .inc_by(overflow_reports);
    for (i, reason) in RejectReason::ALL.iter().enumerate() {
        if rejected[i] > 0 {
            metrics
                .rejected
                .with_label_values(&[name, reason.name()])
                .inc_by(rejected[i]);
        }
    }
}
