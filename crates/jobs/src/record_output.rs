//! A bounded job's records written as they are made, published only after the spends
//! they used are saved.
//!
//! `batch` and `merge` held every record until the end, then rendered them all: at 10⁵
//! groups with a test per group that was 804 MiB against 176 MiB for the sketches alone
//! (benches/RESULTS.md, issue 45). A [`RecordWriter`] renders each JSON line as the engine
//! hands the record on ([`crate::record_spool`] keeps a family's lines until its q-values
//! are known) into an anonymous temporary file, which no other process can open and
//! which vanishes however this one ends. Nothing is published while the job runs: at
//! [`RecordWriter::finish`] the lines are staged beside the target (or kept for stdout)
//! as [`crate::output::prepare_records`] stages them, and the caller saves the ledger
//! before it commits them (`ledger::release`), so a crash can lose records, never
//! release one whose spend was not saved. Parquet output is rendered from the whole set
//! at the end, as before: its records are kept in memory.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use ldpstream_connectors::atomic_file::prepare_atomically;
use ldpstream_connectors::ConnectorError;
use ldpstream_engine::record::TestRecord;
use ldpstream_engine::stream::{CollectRecords, RecordSink, StreamError};

use crate::error::Error;
use crate::output::{is_parquet, prepare_records, PreparedRecords};
use crate::record_spool::FamilySpool;

/// Per (stream, test): the final records, and how many of them have `q < alpha`.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Summary {
    pub families: std::collections::BTreeMap<(String, String), FamilyCounts>,
    /// Final records, and those that reject H0.
    pub finals: usize,
    pub rejecting: usize,
    /// Provisional (look) records.
    pub looks: usize,
}

#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct FamilyCounts {
    pub significant: usize,
    pub results: usize,
}

impl Summary {
    /// Counts one record whose q-value is final.
    pub fn add(&mut self, record: &TestRecord) {
        self.count(
            (&record.stream, &record.test),
            record.is_final,
            record.reject,
            record.q_value.is_some_and(|q| q < record.alpha),
        );
    }

    fn count(
        &mut self,
        (stream, test): (&str, &str),
        is_final: bool,
        reject: bool,
        significant: bool,
    ) {
        if !is_final {
            self.looks += 1;
            return;
        }
        self.finals += 1;
        self.rejecting += usize::from(reject);
        let counts = self
            .families
            .entry((stream.to_string(), test.to_string()))
            .or_default();
        counts.results += 1;
        counts.significant += usize::from(significant);
    }
}

/// What a record's summary needs once its q-value is known.
struct Pending {
    is_final: bool,
    reject: bool,
    alpha: f64,
}

enum Form {
    Lines(Box<Lines>),
    Parquet(CollectRecords),
}

struct Lines {
    /// The finished families' lines, in order; anonymous.
    body: BufWriter<File>,
    family: FamilySpool,
    pending: Vec<Pending>,
    /// The current family's stream and test.
    names: Option<(String, String)>,
}

/// Records written as they are made: see the module documentation.
pub struct RecordWriter {
    output: String,
    form: Form,
    summary: Summary,
}

impl RecordWriter {
    /// A writer for `output` (`-` for stdout; `.parquet` for Parquet, else JSON Lines).
    /// The lines wait beside the target (so that they cross no file system at the end),
    /// or, for stdout, in the temporary directory.
    pub fn open(output: &str) -> Result<Self, Error> {
        let form = if is_parquet(output) {
            Form::Parquet(CollectRecords::default())
        } else {
            let dir = spool_dir(output);
            let io = |source| ConnectorError::Io {
                path: output.to_string(),
                source,
            };
            let body = BufWriter::new(tempfile::tempfile_in(&dir).map_err(io)?);
            Form::Lines(Box::new(Lines {
                body,
                family: FamilySpool::new(&dir),
                pending: Vec::new(),
                names: None,
            }))
        };
        Ok(RecordWriter {
            output: output.to_string(),
            form,
            summary: Summary::default(),
        })
    }

    /// Stages the records for publication (nothing is published yet) and returns them
    /// with their summary.
    pub fn finish(self) -> Result<(PreparedRecords, Summary), Error> {
        let summary = self.summary;
        let output = self.output;
        let io = |source| io_error(&output, source);
        let mut body = match self.form {
            Form::Parquet(all) => return Ok((prepare_records(&output, &all.records)?, summary)),
            Form::Lines(lines) => lines.body.into_inner().map_err(|e| io(e.into_error()))?,
        };
        body.seek(SeekFrom::Start(0)).map_err(io)?;
        if output == "-" {
            return Ok((PreparedRecords::stdout_file(body), summary));
        }
        let shown = output.clone();
        let prepared = prepare_atomically(Path::new(&output), move |mut file| {
            std::io::copy(&mut body, &mut file).map_err(|source| ConnectorError::Io {
                path: shown,
                source,
            })?;
            Ok(file)
        })?;
        Ok((PreparedRecords::staged(prepared), summary))
    }

    fn record_inner(&mut self, record: TestRecord) -> Result<(), Error> {
        match &mut self.form {
            Form::Parquet(all) => Ok(all.record(record)?),
            Form::Lines(lines) => {
                let Lines {
                    family,
                    pending,
                    names,
                    ..
                } = &mut **lines;
                names.get_or_insert_with(|| (record.stream.clone(), record.test.clone()));
                pending.push(Pending {
                    is_final: record.is_final,
                    reject: record.reject,
                    alpha: record.alpha,
                });
                family.push(record).map_err(|e| io_error(&self.output, e))
            }
        }
    }

    fn end_family_inner(
        &mut self,
        q_values: &[Option<f64>],
        anytime_q_values: &[Option<f64>],
    ) -> Result<(), Error> {
        match &mut self.form {
            Form::Parquet(all) => {
                let start = all.records.len() - q_values.len().min(all.records.len());
                all.end_family(q_values, anytime_q_values)?;
                for r in &all.records[start..] {
                    self.summary.add(r);
                }
                Ok(())
            }
            Form::Lines(lines) => {
                let Lines {
                    body,
                    family,
                    pending,
                    names,
                } = &mut **lines;
                family
                    .drain_into(body, q_values, anytime_q_values)
                    .map_err(|e| io_error(&self.output, e))?;
                let (stream, test) = names.take().unwrap_or_default();
                for (p, q) in pending.drain(..).zip(q_values) {
                    let significant = q.is_some_and(|q| q < p.alpha);
                    self.summary
                        .count((&stream, &test), p.is_final, p.reject, significant);
                }
                Ok(())
            }
        }
    }
}

impl RecordSink for RecordWriter {
    fn record(&mut self, record: TestRecord) -> Result<(), StreamError> {
        self.record_inner(record).map_err(sink_error)
    }

    fn end_family(
        &mut self,
        q_values: &[Option<f64>],
        anytime_q_values: &[Option<f64>],
    ) -> Result<(), StreamError> {
        self.end_family_inner(q_values, anytime_q_values)
            .map_err(sink_error)
    }
}

/// A writer's own error, carried through the engine whole (the jobs' `Error` takes it
/// back out, with its fault).
fn sink_error(e: Error) -> StreamError {
    StreamError::Sink(Box::new(e))
}

fn io_error(output: &str, source: std::io::Error) -> Error {
    ConnectorError::Io {
        path: output.to_string(),
        source,
    }
    .into()
}

/// Where the lines wait: the directory of the file they will replace (a symlink
/// followed), or the temporary directory for stdout and for a target that is not a
/// regular file (a FIFO, a device), which is written through.
fn spool_dir(output: &str) -> PathBuf {
    let path = Path::new(output);
    let through = std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir());
    if output == "-" || through {
        return std::env::temp_dir();
    }
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    match target.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use ldpstream_config::Config;
    use ldpstream_engine::mechanism::Mechanism;
    use ldpstream_engine::sketch::{CountSketch, Sketch};
    use ldpstream_engine::stream::{evaluate_stream, evaluate_stream_into, PanedDelta, Private};
    use ldpstream_engine::window::Grouped;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    use super::*;
    use crate::parallel_groups::RayonGroups;

    /// Two tests with looks (one sequential, over a cumulative window), grouped, over
    /// several minutes: families of every kind (looks, finals, anytime q-values).
    fn folded() -> (
        ldpstream_config::StreamConfig,
        Mechanism,
        impl Fn() -> PanedDelta,
    ) {
        let toml = "[[stream]]\nname = \"s\"\nsource = { kind = \"parquet\", paths = [\"x\"] }\n\
             columns = { report = \"r\", group_by = [\"g\"], ts = \"t\" }\n\
             mechanism = { kind = \"grr\", epsilon = 1.0, domain = 6 }\n\
             [[stream.test]]\nname = \"minute\"\nkind = \"gof\"\nnull = \"uniform\"\n\
             mc_samples = 19\nwindow = { kind = \"tumbling\", size = \"1m\", looks = \"15s\" }\n\
             [[stream.test]]\nname = \"seq\"\nkind = \"gof\"\nnull = \"uniform\"\n\
             sequential = true\nwindow = { kind = \"cumulative\", looks = \"30s\" }\n";
        let stream = Config::from_toml_str(toml, "t").unwrap().streams.remove(0);
        let m = Mechanism::from_config(&stream.mechanism).unwrap();
        let delta = || {
            let panes: BTreeMap<i64, Grouped> = (0..12i64)
                .map(|pane| {
                    let grouped: Grouped = (0..30u64)
                        .map(|g| {
                            let counts = (0..6)
                                .map(|c| (g * 7 + c * 3 + pane as u64 * 5) % (4 + g % 50))
                                .collect();
                            (
                                vec![Some(format!("g{g:02}"))],
                                Sketch::Counts(CountSketch::from_counts(counts)),
                            )
                        })
                        .collect();
                    (pane * 15_000, grouped)
                })
                .collect();
            PanedDelta {
                panes,
                max_ts: Some(12 * 15_000),
                ..PanedDelta::default()
            }
        };
        (stream, m, delta)
    }

    /// What the writer publishes is, byte for byte, the JSON lines of the records kept in
    /// memory, whether a family's lines wait in memory or in a file, and its summary is
    /// the one those records give.
    #[test]
    fn the_writer_publishes_the_records_kept_in_memory() {
        let (stream, m, delta) = folded();
        let mut noise = StdRng::seed_from_u64(0);
        let mut private = Private {
            ledger: None,
            noise: &mut noise,
        };
        let records = evaluate_stream(&stream, &m, delta(), &mut private, &RayonGroups).unwrap();
        assert!(records.iter().any(|r| r.anytime_q_value.is_some()));
        assert!(records.iter().any(|r| r.look_end.is_some()));
        let expected = ldpstream_connectors::jsonl::jsonl_bytes(&records).unwrap();
        let mut summary = Summary::default();
        for r in &records {
            summary.add(r);
        }
        let dir = tempfile::tempdir().unwrap();
        for limit in [usize::MAX, 2048] {
            let out = dir.path().join(format!("out-{limit}.jsonl"));
            let mut writer = RecordWriter::open(out.to_str().unwrap()).unwrap();
            if let Form::Lines(lines) = &mut writer.form {
                lines.family = FamilySpool::with_limit(dir.path(), limit);
            }
            evaluate_stream_into(
                &stream,
                &m,
                delta(),
                &mut private,
                &RayonGroups,
                &mut writer,
            )
            .unwrap();
            let (prepared, counted) = writer.finish().unwrap();
            assert!(!out.exists(), "published before the commit");
            prepared.commit().unwrap();
            assert!(std::fs::read(&out).unwrap() == expected, "limit {limit}");
            assert_eq!(counted, summary);
        }
    }
}
