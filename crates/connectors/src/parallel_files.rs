//! The sibling of [`crate::Source`] for bounded input read all at once (`batch`,
//! `batch --emit-sketches`): the row groups of checked Parquet files, read in parallel on
//! the current rayon pool. A [`Source`](crate::Source) runs on one thread and sends
//! batches in order, which a service needs for its positions; a job over files needs
//! neither order nor positions, only every row once, as fast as the cores allow.
//!
//! Each row group reaches the caller's fold as [`RowGroupInput`]s: its Arrow batches, or,
//! when the dictionary-key fast path takes it ([`crate::parquet::dictionary`]), its
//! report column counted by dictionary key. The fold (the engine's) is the caller's; this
//! module only reads.

use arrow_array::RecordBatch;
use ldpstream_engine::stream::ReportLayout;

use crate::error::ConnectorError;
use crate::parquet::contained::contain;
use crate::parquet::dictionary::{count_report_keys, KeyCounts};
use crate::parquet::files::InputFile;
use crate::parquet::reader::read_row_group_batches;
use crate::per_thread::fold_per_thread;

/// What a row group hands to the fold.
pub enum RowGroupInput<'a> {
    /// A decoded batch with its block columns; `origin` names the file in errors and `ts`
    /// is the event-time column (None when the file has none).
    Batch {
        batch: &'a RecordBatch,
        origin: &'a str,
        ts: Option<&'a str>,
    },
    /// The whole row group's report column counted by dictionary key: offered only for a
    /// count-sketch mechanism with nothing grouped, windowed or blocked, where folding the
    /// counts gives the sketch folding the batches would.
    KeyCounts(&'a KeyCounts),
}

/// The row groups of checked files, to be folded in parallel.
pub struct ParallelFiles<'a> {
    files: &'a [InputFile],
    layout: &'a ReportLayout,
}

impl<'a> ParallelFiles<'a> {
    /// `files` as [`crate::parquet::inspect`] checked them against `layout`.
    pub fn new(files: &'a [InputFile], layout: &'a ReportLayout) -> Self {
        ParallelFiles { files, layout }
    }

    /// Folds every row group on the current rayon pool: each thread starts from `init()`
    /// and hands the inputs of the row groups it takes to `fold` one after the other, and
    /// the threads' results are combined with `merge`, which must be exact and order-free
    /// (sketch merges are), so the result does not depend on the number of threads or the
    /// order tasks finish in. An accumulator per thread ([`fold_per_thread`]), not per row
    /// group or per split of the work, keeps as few alive as there are threads.
    /// `progress` gets each finished row group's rows.
    pub fn fold<T: Send>(
        &self,
        init: impl Fn() -> T + Sync + Send,
        fold: impl Fn(&mut T, RowGroupInput<'_>) -> Result<(), ConnectorError> + Sync,
        merge: impl Fn(T, T) -> Result<T, ConnectorError> + Sync + Send,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<T, ConnectorError> {
        // Each unit's first row in stream order (files sorted, row groups in file order),
        // so that stream-order blocks survive the parallel fold.
        let mut units: Vec<(&InputFile, usize, u64)> = Vec::new();
        let mut offset = 0u64;
        for f in self.files {
            for (rg, rows) in f.row_group_rows.iter().enumerate() {
                units.push((f, rg, offset));
                offset += rows;
            }
        }
        fold_per_thread(
            &units,
            init,
            |acc, (file, rg, first_row)| {
                self.read_row_group(file, *rg, *first_row, |input| fold(acc, input))?;
                progress(file.row_group_rows[*rg]);
                Ok(())
            },
            merge,
        )
    }

    /// Hands row group `rg` of `file` to `each`: its dictionary-key counts when the fast
    /// path takes it, else its batches. A panic inside the parquet crate's decoders is the
    /// file's error ([`contain`]).
    pub fn read_row_group(
        &self,
        file: &InputFile,
        rg: usize,
        first_row: u64,
        mut each: impl FnMut(RowGroupInput<'_>) -> Result<(), ConnectorError>,
    ) -> Result<(), ConnectorError> {
        contain(
            &file.path,
            || format!("row group {rg}"),
            || {
                if let Some(counts) = count_report_keys(file, rg, self.layout)? {
                    return each(RowGroupInput::KeyCounts(&counts));
                }
                read_row_group_batches(file, rg, first_row, self.layout, |batch, origin, ts| {
                    each(RowGroupInput::Batch { batch, origin, ts })
                })
            },
        )
    }
}
