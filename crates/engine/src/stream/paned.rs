//! The one-batch fold the service uses, into the per-pane, per-group sketches a fold hands
//! on ([`PanedDelta`], in [`super::paned_delta`]).

use arrow_array::RecordBatch;
use arrow_schema::DataType;

use super::error::StreamError;
use super::group_fold::GroupFold;
use super::layout::ReportLayout;
use super::paned_delta::PanedDelta;

/// Whether an Arrow type can carry event time: a timestamp of any unit (converted to
/// milliseconds) or Int64 milliseconds since the epoch.
pub fn is_event_time(t: &DataType) -> bool {
    matches!(t, DataType::Timestamp(_, _) | DataType::Int64)
}

/// Folds `batch` into `out`. `ts` names the event-time column when the batch has one;
/// `pane_of` maps an event time to its open pane, or None when the report is late.
///
/// One batch through a [`GroupFold`] of its own, then merged: for callers that hand each
/// batch on (the service). A job over many batches keeps one `GroupFold` per task instead.
pub fn fold_paned_batch(
    batch: &RecordBatch,
    layout: &ReportLayout,
    origin: &str,
    ts: Option<&str>,
    pane_of: &dyn Fn(i64) -> Option<i64>,
    out: &mut PanedDelta,
) -> Result<(), StreamError> {
    let mut fold = GroupFold::new(layout);
    fold.fold_batch(batch, origin, ts, pane_of)?;
    out.merge(fold.into_delta()?)
}
