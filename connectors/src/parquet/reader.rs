//! Parquet as a bounded source: fold the row groups of checked files ([`super::files`]) in
//! parallel, each rayon task streaming one row group batch by batch, or counting its
//! dictionary keys when it can ([`super::dictionary`]).

use ldpstream_engine::stream::{fold_paned_batch, with_block_columns, PanedDelta, ReportLayout};
use ldpstream_engine::window::pane_start;
use parquet::arrow::ProjectionMask;
use rayon::prelude::*;

use super::files::{open_inspected, InputFile};
use crate::error::ConnectorError;

/// Rows per decoded batch: large enough to amortise per-batch work, small enough that a
/// batch of a few columns stays in L2.
pub const BATCH_ROWS: usize = 64 * 1024;

/// Folds every row group of `files` into per-pane, per-group sketches (panes `pane_ms`
/// wide) on the current rayon pool. Each task owns its sketches; they are merged exactly at
/// the end, so the result does not depend on the number of threads or the order tasks
/// finish in. A bounded input has no late reports: every report lands in its pane.
pub fn fold_files(
    files: &[InputFile],
    layout: &ReportLayout,
    pane_ms: i64,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<PanedDelta, ConnectorError> {
    // Each unit's first row in stream order (files sorted, row groups in file order), so
    // that stream-order blocks survive the parallel fold.
    let mut units: Vec<(&InputFile, usize, u64)> = Vec::new();
    let mut offset = 0u64;
    for f in files {
        for (rg, rows) in f.row_group_rows.iter().enumerate() {
            units.push((f, rg, offset));
            offset += rows;
        }
    }
    units
        .par_iter()
        .map(|(file, rg, first_row)| {
            let folded = fold_row_group(file, *rg, *first_row, layout, pane_ms)?;
            progress(file.row_group_rows[*rg]);
            Ok(folded)
        })
        .try_reduce(PanedDelta::default, |mut a, b| {
            a.merge(b)?;
            Ok(a)
        })
}

fn fold_row_group(
    file: &InputFile,
    rg: usize,
    first_row: u64,
    layout: &ReportLayout,
    pane_ms: i64,
) -> Result<PanedDelta, ConnectorError> {
    super::contained::contain(
        &file.path,
        || format!("row group {rg}"),
        || {
            if let Some(counted) = super::dictionary::try_fold_row_group(file, rg, layout)? {
                return Ok(counted);
            }
            fold_row_group_arrow(file, rg, first_row, layout, pane_ms)
        },
    )
}

/// Folds one row group from the batches of the Arrow reader: every layout and encoding.
pub fn fold_row_group_arrow(
    file: &InputFile,
    rg: usize,
    first_row: u64,
    layout: &ReportLayout,
    pane_ms: i64,
) -> Result<PanedDelta, ConnectorError> {
    let path = file.path.as_path();
    let shown = || path.display().to_string();
    let arrow_err = |source| ConnectorError::Arrow {
        path: shown(),
        source,
    };
    let builder = open_inspected(file)?;
    let arrow_schema = builder.schema().clone();
    let ts = file.has_ts.then_some(layout.ts.as_str());
    let roots = layout
        .columns()
        .map(String::as_str)
        .chain(ts)
        .map(|c| arrow_schema.index_of(c).map_err(arrow_err))
        .collect::<Result<Vec<_>, _>>()?;
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let reader = builder
        .with_projection(mask)
        .with_row_groups(vec![rg])
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|source| ConnectorError::Parquet {
            path: shown(),
            source,
        })?;

    let mut out = PanedDelta::default();
    let pane_of = |t: i64| Some(pane_start(t, pane_ms));
    let mut row = first_row;
    for batch in reader {
        let batch = batch.map_err(arrow_err)?;
        let rows = batch.num_rows() as u64;
        let batch = with_block_columns(&batch, row, &layout.block_sizes).map_err(arrow_err)?;
        fold_paned_batch(&batch, layout, &shown(), ts, &pane_of, &mut out)?;
        row += rows;
    }
    Ok(out)
}
