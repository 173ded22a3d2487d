//! The Parquet sink: records go into a file that is renamed into view only when complete
//! (Parquet is unreadable without its footer). A file rolls every `roll_interval` and on
//! shutdown; every tick is one row group, so memory stays at one tick's records.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ldpstream_engine::record::TestRecord;
use parquet::arrow::ArrowWriter;
use tracing::{info, warn};

use crate::error::ConnectorError;
use crate::record_parquet::{record_writer, records_to_batch};

const IN_PROGRESS: &str = ".inprogress";

struct OpenFile {
    writer: ArrowWriter<File>,
    tmp: PathBuf,
    done: PathBuf,
    opened: Instant,
}

pub(super) struct ParquetSink {
    dir: PathBuf,
    roll: Duration,
    open: Option<OpenFile>,
    seq: u64,
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> ConnectorError + '_ {
    move |source| ConnectorError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn pq_err(path: &Path) -> impl Fn(parquet::errors::ParquetError) -> ConnectorError + '_ {
    move |source| ConnectorError::Parquet {
        path: path.display().to_string(),
        source,
    }
}

impl ParquetSink {
    pub(super) fn open(dir: &str, roll: Duration) -> Result<Self, ConnectorError> {
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        // A crash leaves a footerless file behind; say so rather than delete evidence.
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.ends_with(IN_PROGRESS) {
                    warn!(file = %e.path().display(), "an unfinished Parquet result file from an earlier run (unreadable: no footer)");
                }
            }
        }
        Ok(ParquetSink {
            dir,
            roll,
            open: None,
            seq: 0,
        })
    }

    fn start_file(&mut self) -> Result<OpenFile, ConnectorError> {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        // Process id and a sequence number keep names unique across instances sharing a
        // directory and across rolls within one millisecond.
        let name = format!(
            "results-{ms:013}-{}-{}.parquet",
            std::process::id(),
            self.seq
        );
        self.seq += 1;
        let done = self.dir.join(&name);
        let tmp = self.dir.join(format!(".{name}{IN_PROGRESS}"));
        let file = File::create(&tmp).map_err(io_err(&tmp))?;
        Ok(OpenFile {
            writer: record_writer(file, &tmp)?,
            tmp,
            done,
            opened: Instant::now(),
        })
    }

    pub(super) fn write(&mut self, records: &[TestRecord]) -> Result<(), ConnectorError> {
        let batch = records_to_batch(records)?;
        let mut open = match self.open.take() {
            Some(f) => f,
            None => self.start_file()?,
        };
        open.writer.write(&batch).map_err(pq_err(&open.tmp))?;
        open.writer.flush().map_err(pq_err(&open.tmp))?;
        if open.opened.elapsed() >= self.roll {
            finish(open)?;
        } else {
            self.open = Some(open);
        }
        Ok(())
    }

    /// Finishes the open file, if any, so its records become visible.
    pub(super) fn close(&mut self) -> Result<(), ConnectorError> {
        match self.open.take() {
            Some(open) => finish(open),
            None => Ok(()),
        }
    }
}

fn finish(open: OpenFile) -> Result<(), ConnectorError> {
    let OpenFile {
        writer, tmp, done, ..
    } = open;
    let file = writer.into_inner().map_err(pq_err(&tmp))?;
    file.sync_all().map_err(io_err(&tmp))?;
    std::fs::rename(&tmp, &done).map_err(io_err(&done))?;
    info!(file = %done.display(), "Parquet result file complete");
    Ok(())
}
