//! The stream layer that the batch job and the service share: which columns a stream
//! reads ([`layout`]), the one-pass grouped and paned fold of decoded batches
//! ([`group_fold`], over dense key ids) and what it hands on ([`paned`]), the per-group
//! reference fold it is tested against ([`grouped`], [`groups`]), which windows are due a result
//! ([`due`]), the state a stream will hold ([`memory`]), a window's test records with their q-values ([`window_results`]), handed on
//! family by family ([`record_sink`]), and the running state of sequential tests across
//! looks ([`latches`]).
//!
//! Everything here takes Arrow batches and sketches and returns sketches and records: no
//! files, sockets or clocks, so `batch` and `serve` cannot disagree on a result.

pub mod due;
pub mod error;
pub mod group_fold;
pub mod group_map;
pub mod grouped;
pub mod groups;
mod key_columns;
mod keys;
pub mod latches;
pub mod layout;
pub mod looks;
pub mod memory;
pub mod paned;
pub mod paned_delta;
pub mod record_sink;
mod sketch_rows;
pub mod window_results;

pub use due::{longest_window, rfc3339, stream_pane_width, take_due, WindowSnapshot};
pub use error::StreamError;
pub use group_fold::GroupFold;
pub use group_map::{map_all, GroupEmit, GroupMap, GroupTask, Sequential};
pub use grouped::{fold_paned_batch_reference, fold_record_batch};
pub use latches::{LatchEntry, SequentialLatches};
pub use layout::{block_column, with_block_columns, ReportLayout};
pub use looks::{take_looks, Look};
pub use memory::StateEstimate;
pub use paned::{fold_paned_batch, is_event_time};
pub use paned_delta::PanedDelta;
pub use record_sink::{CollectRecords, RecordSink};
pub use window_results::{
    evaluate_look, evaluate_snapshot, evaluate_stream, evaluate_stream_into, Private,
};
