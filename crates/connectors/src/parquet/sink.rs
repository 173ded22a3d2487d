//! The Parquet sink: records go into a file that is renamed into view only when complete
//! (Parquet is unreadable without its footer). A file rolls every `roll_interval` and on
//! shutdown; every tick is one row group, so memory stays at one tick's records.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ldpstream_engine::record::TestRecord;
use parquet::arrow::ArrowWriter;
use tracing::{info, warn};

use super::record_schema::{record_writer, records_to_batch};
use crate::error::ConnectorError;

const IN_PROGRESS: &str = ".inprogress";

struct OpenFile {
    writer: ArrowWriter<File>,
    tmp: PathBuf,
    done: PathBuf,
    opened: Instant,
}

pub struct ParquetSink {
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
    pub fn open(dir: &str, roll: Duration) -> Result<Self, ConnectorError> {
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

    pub fn write(&mut self, records: &[TestRecord]) -> Result<(), ConnectorError> {
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
    pub fn close(&mut self) -> Result<(), ConnectorError> {
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
    // The rename is what makes the records visible: it must survive a power loss too.
    let dir = done
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    crate::atomic_file::sync_dir(dir).map_err(io_err(&done))?;
    info!(file = %done.display(), "Parquet result file complete");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parquet::record_schema::tests::sparse;
    use parquet::file::reader::{FileReader, SerializedFileReader};

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn files_appear_only_when_complete() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink =
            ParquetSink::open(dir.path().to_str().unwrap(), Duration::from_secs(3600)).unwrap();
        sink.write(&[sparse(), sparse()]).unwrap();
        sink.write(&[sparse()]).unwrap();
        let open = names(dir.path());
        assert_eq!(open.len(), 1);
        assert!(open[0].starts_with(".results-") && open[0].ends_with(".parquet.inprogress"));
        sink.close().unwrap();
        let done = names(dir.path());
        assert_eq!(done.len(), 1);
        assert!(done[0].starts_with("results-") && done[0].ends_with(".parquet"));
        // One row group per tick.
        let reader =
            SerializedFileReader::new(File::open(dir.path().join(&done[0])).unwrap()).unwrap();
        assert_eq!(reader.metadata().num_row_groups(), 2);
        assert_eq!(reader.metadata().file_metadata().num_rows(), 3);
        // Closing twice is harmless.
        sink.close().unwrap();
    }

    #[test]
    fn files_roll_when_old_enough() {
        let dir = tempfile::tempdir().unwrap();
        let mut sink = ParquetSink::open(dir.path().to_str().unwrap(), Duration::ZERO).unwrap();
        sink.write(&[sparse()]).unwrap();
        sink.write(&[sparse()]).unwrap();
        let done = names(dir.path());
        assert_eq!(done.len(), 2, "{done:?}");
        assert!(done
            .iter()
            .all(|n| n.starts_with("results-") && n.ends_with(".parquet")));
    }
}
