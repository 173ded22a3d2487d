//! Event-time windows built from panes (ARCHITECTURE.md invariant 4).
//!
//! Event time is cut into panes of the greatest common divisor of every window size and
//! slide of a stream, aligned to the Unix epoch. A tumbling or sliding window is the exact
//! merge of the panes it covers; cumulative and global windows merge every pane since the
//! start, including panes already retired from the bounded windows. A watermark (largest
//! event time seen minus the allowed lateness) closes panes; a report whose pane is closed
//! is late: counted, never folded.

mod panes;
mod spec;

pub use panes::{
    absorb_grouped, is_other, merge_grouped, other_key, GroupKey, Grouped, PaneStore,
    RestoredPanes, OTHER_GROUP,
};
pub use spec::{
    pane_start, pane_width, pane_width_with_looks, windows_of_pane, Bounds, DEFAULT_PANE_MS,
    EVENT_TIME_MS,
};
