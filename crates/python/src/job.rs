//! `ldpstream.Job`: a checked config, and the batch job over in-memory Arrow data: fold
//! (the jobs' own fold of a Parquet batch), evaluate (the jobs' `test_streams`, releasing
//! through the ledger exactly as `batch` and `merge` do), and both at once.

use std::collections::BTreeMap;
use std::path::PathBuf;

use arrow_array::RecordBatch;
use ldpstream_config::{Config, StreamConfig};
use ldpstream_connectors::records::{records_to_batch, BATCH_ROWS};
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::stream::ReportLayout;
use ldpstream_jobs::evaluate::{test_streams, Release};
use ldpstream_jobs::ledger::file::input_fingerprint;
use ldpstream_jobs::ledger::release::spend_then_publish;
use ldpstream_jobs::ledger::store::LedgerFile;
use ldpstream_jobs::memory_fold::fold_batches;
use ldpstream_jobs::memory_id::{content_id, stream_roles, MEMORY_INPUT};
use ldpstream_jobs::row_digest::RowDigest;
use ldpstream_jobs::sketch_file::{merge_partials, stream_part, Partial};
use pyo3::prelude::*;
use pyo3::types::PyType;
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::arrow_in::record_batches;
use crate::arrow_out::to_pyarrow_table;
use crate::config_in::ConfigSource;
use crate::errors::{input_error, internal_error, job_error, opt_int_arg};
use crate::process_pool::contained_in_pool;
use crate::sketches::Sketches;

/// A checked ldpstream config: the batch job over in-memory Arrow data.
///
/// `config` is TOML text, a path to a TOML file (str or pathlib.Path) or a dict in the
/// TOML's shape; it is checked as `ldpstream check` checks it (ValueError with the same
/// message otherwise). `ledger` is the privacy-budget ledger file (absolute path) of
/// curator-model streams, as `--ledger`; required when a stream has `budget_epsilon` and
/// the config names no `ledger`.
///
/// Example:
///     >>> job = ldpstream.Job('''
///     ... [[stream]]
///     ... name = "s"
///     ... source = { kind = "parquet", paths = ["in-memory"] }
///     ... mechanism = { kind = "grr", epsilon = 1.0, domain = 4 }
///     ... [[stream.test]]
///     ... name = "gof"
///     ... kind = "gof"
///     ... null = "uniform"
///     ... ''')
///     >>> job.run(pyarrow.table({"report": reports})).to_pylist()
#[pyclass(module = "ldpstream._ldpstream", frozen)]
pub struct Job {
    source: ConfigSource,
    config: Config,
    ledger_flag: Option<PathBuf>,
    ledger: Option<LedgerFile>,
}

/// What pickling keeps of a job: its TOML text, the name errors show, the ledger flag.
type JobState = (String, String, Option<PathBuf>);

#[pymethods]
impl Job {
    #[new]
    #[pyo3(signature = (config, ledger=None))]
    fn new(config: &Bound<'_, PyAny>, ledger: Option<PathBuf>) -> PyResult<Self> {
        Job::from_source(ConfigSource::from_py(config)?, ledger)
    }

    /// Rebuilds a job from its TOML text (pickling: Spark and Ray ship jobs to workers).
    #[classmethod]
    #[pyo3(signature = (text, origin, ledger=None))]
    fn _from_text(
        _cls: &Bound<'_, PyType>,
        text: String,
        origin: String,
        ledger: Option<PathBuf>,
    ) -> PyResult<Self> {
        Job::from_source(ConfigSource { text, origin }, ledger)
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, JobState)> {
        let job = slf.get();
        Ok((
            slf.get_type().getattr("_from_text")?,
            (
                job.source.text.clone(),
                job.source.origin.clone(),
                job.ledger_flag.clone(),
            ),
        ))
    }

    /// The config's checked TOML text (what pickling ships): the Spark and Ray runners
    /// read the stream's column names from it.
    #[getter]
    fn _config_text(&self) -> &str {
        &self.source.text
    }

    /// The config's stream names, in order.
    #[getter]
    fn streams(&self) -> Vec<String> {
        self.config.streams.iter().map(|s| s.name.clone()).collect()
    }

    /// Folds `data` into sketches, as `batch` folds Parquet files with the same rows.
    ///
    /// `data` is any Arrow table-like object (`__arrow_c_stream__` or `__arrow_c_array__`:
    /// pyarrow Table / RecordBatch / RecordBatchReader, polars DataFrame, DuckDB result,
    /// pandas with Arrow dtypes), with the stream's columns (`report`, ...) in the types
    /// of the Parquet input. `stream` names the stream; without it, `data` is folded into
    /// every stream of the config (as `batch --input` gives every stream the same files).
    /// `input_id` is the data's identity for merge's double-count protection; by default an
    /// XXH3-128 of the columns read, row by row in order, the same however the rows are
    /// chunked. The GIL is released while folding.
    ///
    /// For a stream with `budget_epsilon`, the sketches also carry the rows' multiset
    /// digest, the privacy ledger's identity of them: the same rows in any order, chunking
    /// or partitioning (Spark, Ray) are one input to the ledger, whatever `input_id` says.
    ///
    /// Example:
    ///     >>> sk = job.fold(pyarrow.table({"report": reports}))
    #[pyo3(signature = (data, stream=None, input_id=None))]
    fn fold(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        stream: Option<String>,
        input_id: Option<String>,
    ) -> PyResult<Sketches> {
        let batches = record_batches(data)?;
        let streams = self.chosen(stream.as_deref())?;
        let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
        let reports: BTreeMap<String, u64> =
            streams.iter().map(|s| (s.name.clone(), rows)).collect();
        ldpstream_jobs::state_memory::enforce(&self.config, Some(BATCH_ROWS), &reports)
            .map_err(job_error)?;
        let partial = py.detach(|| {
            contained_in_pool("folding", || {
                fold_partial(&streams, &batches, input_id.as_deref())
            })
        })?;
        Ok(Sketches { partial })
    }

    /// Runs every test of the streams in `sketches` and returns the records as a
    /// `pyarrow.Table` with the columns of the Parquet output (`.to_pylist()` gives the
    /// JSON records). The sketches are checked as `ldpstream merge` checks sketch files
    /// (same settings, no input twice). Curator-model tests spend from the ledger, which
    /// is saved before the records are returned; nothing is released past the budget.
    /// `insecure_seed` seeds their noise: reproducible and NOT private, for tests only.
    #[pyo3(signature = (sketches, insecure_seed=None))]
    fn evaluate(
        &self,
        py: Python<'_>,
        sketches: &Sketches,
        insecure_seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let insecure_seed: Option<u64> = opt_int_arg("insecure_seed", insecure_seed)?;
        let partial = sketches.partial.clone();
        let batch =
            py.detach(|| contained_in_pool("evaluating", || self.records(partial, insecure_seed)))?;
        to_pyarrow_table(py, batch)
    }

    /// `evaluate(fold(data, stream))`: the whole batch job over `data`.
    ///
    /// Example:
    ///     >>> job.run(pyarrow.table({"report": reports})).to_pylist()[0]["p_value"]
    #[pyo3(signature = (data, stream=None, input_id=None, insecure_seed=None))]
    fn run(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        stream: Option<String>,
        input_id: Option<String>,
        insecure_seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        // Checked before the fold, which may take long.
        opt_int_arg::<u64>("insecure_seed", insecure_seed)?;
        let sketches = self.fold(py, data, stream, input_id)?;
        self.evaluate(py, &sketches, insecure_seed)
    }

    fn __repr__(&self) -> String {
        format!("Job({}, streams={:?})", self.source.origin, self.streams())
    }
}

impl Job {
    fn from_source(source: ConfigSource, ledger: Option<PathBuf>) -> PyResult<Self> {
        let config = source.load()?;
        // A budgeted stream without a named ledger is refused as `check` and `batch` do.
        let located = LedgerFile::locate(&config, ledger.as_deref()).map_err(job_error)?;
        Ok(Job {
            source,
            config,
            ledger_flag: ledger,
            ledger: located,
        })
    }

    /// The streams `stream` names: that one, or all.
    fn chosen(&self, stream: Option<&str>) -> PyResult<Vec<StreamConfig>> {
        match stream {
            None => Ok(self.config.streams.clone()),
            Some(name) => self
                .config
                .streams
                .iter()
                .find(|s| s.name == name)
                .map(|s| vec![s.clone()])
                .ok_or_else(|| {
                    input_error(format!(
                        "stream {name:?} is not in the config (its streams: {:?})",
                        self.streams()
                    ))
                }),
        }
    }

    /// The test records of the streams `partial` holds, released as `merge` releases them:
    /// rendered as the records table before the ledger is saved, so a release whose records
    /// cannot be returned spends nothing.
    fn records(&self, partial: Partial, seed: Option<u64>) -> PyResult<RecordBatch> {
        let mut config = self.config.clone();
        let held: Vec<String> = partial.streams.iter().map(|s| s.name.clone()).collect();
        if let Some(unknown) = held.iter().find(|n| !self.streams().contains(n)) {
            return Err(input_error(format!(
                "the sketches have stream {unknown:?}, which the config does not have (its \
                 streams: {:?})",
                self.streams()
            )));
        }
        config.streams.retain(|s| held.contains(&s.name));
        if config.streams.is_empty() {
            return Err(input_error("the sketches hold no stream"));
        }
        let mut merged = merge_partials(&config, vec![("the sketches".to_string(), partial)])
            .map_err(job_error)?;
        let fingerprints: Vec<String> = config
            .streams
            .iter()
            .map(|s| {
                let inputs = merged
                    .get(&s.name)
                    .map(|(i, _)| i.clone())
                    .unwrap_or_default();
                input_fingerprint(s, &inputs)
            })
            .collect();
        let mut noise = match seed {
            Some(seed) => StdRng::seed_from_u64(seed),
            None => ldpstream_engine::curator::secure_rng(),
        };
        let release = Release {
            ledger: self.ledger.as_ref(),
            reset: &[],
            noise: &mut noise,
        };
        let released = test_streams(&config, &fingerprints, release, |stream, _| {
            Ok(merged
                .remove(&stream.name)
                .map(|(_, sketches)| sketches)
                .unwrap_or_default())
        })
        .map_err(job_error)?;
        // Dropped unsaved on an error here: the lock goes, and nothing was spent.
        let batch: RecordBatch =
            records_to_batch(&released.records).map_err(|e| job_error(e.into()))?;
        spend_then_publish(released.spends, || Ok(batch)).map_err(job_error)
    }
}

/// Folds `batches` into each of `streams`, with the data's identity as its input.
fn fold_partial(
    streams: &[StreamConfig],
    batches: &[RecordBatch],
    input_id: Option<&str>,
) -> PyResult<Partial> {
    let mut partial = Partial {
        inputs: BTreeMap::new(),
        input_ids: BTreeMap::new(),
        ledger_ids: BTreeMap::new(),
        streams: Vec::new(),
    };
    for stream in streams {
        let mechanism = Mechanism::from_config(&stream.mechanism).map_err(internal_error)?;
        let origin = format!("stream {:?} (in-memory data)", stream.name);
        let delta = fold_batches(stream, &mechanism, batches, &origin).map_err(job_error)?;
        let layout = ReportLayout::of(stream, &mechanism);
        let columns = stream_roles(&layout);
        let id = match input_id {
            Some(id) => id.to_string(),
            None => content_id(batches, &columns),
        };
        if stream.budget_epsilon.is_some() {
            let digest = RowDigest::of(batches, &columns).map_err(|e| {
                internal_error(format!("{origin}: digesting the rows for the ledger: {e}"))
            })?;
            partial
                .ledger_ids
                .insert(stream.name.clone(), digest.label());
        }
        partial
            .inputs
            .insert(stream.name.clone(), vec![format!("{MEMORY_INPUT}{id}")]);
        partial.input_ids.insert(stream.name.clone(), vec![id]);
        partial.streams.push(stream_part(stream, &delta));
    }
    Ok(partial)
}
