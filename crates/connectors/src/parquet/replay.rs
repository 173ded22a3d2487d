//! Parquet as a bounded `serve` source: replays the files in path order, one batch of at
//! most `max_batch_rows` at a time, then reports the end of input.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;

use std::time::{Duration, Instant};

use parquet::arrow::ProjectionMask;

use ldpstream_engine::stream::ReportLayout;

use super::contained::contain;
use super::files::{open, InputFile};
use crate::emit::SourceBatch;
use crate::error::ConnectorError;
use crate::position::Position;

/// Sends every row of `files` after the first `resume` rows, at most `rate` rows per
/// second when given; returns the number of rows sent. Stops early when `stop` is set or
/// the receiver hangs up.
pub fn run_replay(
    files: &[InputFile],
    layout: &ReportLayout,
    max_batch_rows: usize,
    rate: Option<f64>,
    resume: &Position,
    stop: &AtomicBool,
    out: &SyncSender<SourceBatch>,
) -> Result<u64, ConnectorError> {
    let skip = match resume {
        Position::Replay { rows } => *rows,
        _ => 0,
    };
    let started = Instant::now();
    // Rows of the input already behind us, sent now or before a restart.
    let mut offset = 0u64;
    let mut sent = 0u64;
    for file in files {
        let path = &file.path;
        let shown = || path.display().to_string();
        let builder = open(path)?;
        let schema = builder.schema().clone();
        let ts = file.has_ts.then_some(layout.ts.as_str());
        let roots = layout
            .columns()
            .map(String::as_str)
            .chain(ts)
            .map(|c| schema.index_of(c))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| ConnectorError::Arrow {
                path: shown(),
                source,
            })?;
        let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
        let mut reader = builder
            .with_projection(mask)
            .with_batch_size(max_batch_rows)
            .build()
            .map_err(|source| ConnectorError::Parquet {
                path: shown(),
                source,
            })?;
        let mut offset_in_file = 0u64;
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(sent);
            }
            let next = contain(
                path,
                || format!("the rows after row {offset_in_file}"),
                || Ok(reader.next()),
            )?;
            let Some(batch) = next else { break };
            let batch = batch.map_err(|source| ConnectorError::Arrow {
                path: shown(),
                source,
            })?;
            offset_in_file += batch.num_rows() as u64;
            let rows = batch.num_rows() as u64;
            let end = offset + rows;
            if end <= skip {
                offset = end;
                continue;
            }
            let batch = if offset < skip {
                let drop = (skip - offset) as usize;
                batch.slice(drop, batch.num_rows() - drop)
            } else {
                batch
            };
            offset = end;
            sent += batch.num_rows() as u64;
            if let Some(rate) = rate {
                let due = Duration::from_secs_f64(sent as f64 / rate);
                if let Some(wait) = due.checked_sub(started.elapsed()) {
                    std::thread::sleep(wait);
                }
            }
            let position = Position::Replay { rows: end };
            if out.send(SourceBatch { batch, position }).is_err() {
                return Ok(sent);
            }
        }
    }
    Ok(sent)
}
