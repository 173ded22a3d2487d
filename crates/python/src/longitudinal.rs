//! The longitudinal client (`lgrr`, `losue`, `lsue`) in Python: `Mechanism.client()`
//! returns a `LongitudinalClient`, the engine's own device client
//! (`ldpstream_engine::mechanism::longitudinal::device`), over a memo store: the in-memory
//! default, `FileMemoStore` (the connectors' file store, the one the Rust clients use), or
//! any object with `load(metric) -> str | None` and `save(metric, text)` methods, which
//! get the memo's canonical JSON (conformance/README.md).
//!
//! Every report draws from a generator seeded from the OS for that call alone
//! (`StdRng::from_os_rng`), so a forked worker never repeats its parent's draws.

use std::sync::{Mutex, MutexGuard};

use arrow_array::{ArrayRef, FixedSizeBinaryArray, UInt32Array};
use ldpstream_connectors::memo_file::FileMemoStore as FileStore;
use ldpstream_engine::mechanism::longitudinal::device::{
    Device, DeviceError, DeviceOptions, SamePeriod,
};
use ldpstream_engine::mechanism::longitudinal::memo::{
    InMemoryMemoStore, MemoStore, MemoStoreError, MetricMemo,
};
use ldpstream_engine::mechanism::{Longitudinal, Response};
use pyo3::exceptions::{PyOSError, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::sync::MutexExt;
use pyo3::types::PyBytes;
use std::sync::Arc;

use crate::errors::{config_error, input_error, int_input};
use crate::group_values::group_pairs;
use crate::messages::{check_envelope, encode, Envelope, Format};

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic inside a report is contained (`contained`); the store it held is still whole,
    // since every save replaces a memo at once.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// [`locked`], waiting without the GIL: a thread holding the mutex may be running a Python
/// store's `load` or `save`, which needs the GIL back to finish.
fn locked_attached<'a, T>(py: Python<'_>, m: &'a Mutex<T>) -> MutexGuard<'a, T> {
    m.lock_py_attached(py).unwrap_or_else(|p| p.into_inner())
}

/// One report (or reset) at a time in the process. A report loads, saves and saves again;
/// a Python store's methods run Python code, during which another thread may report
/// through another client over the same store object, see the period free and report
/// twice in it. (The built-in stores run without releasing the GIL, so only Python stores
/// could interleave; every report takes its turn, which costs nothing.)
static TURN: Mutex<()> = Mutex::new(());

/// A memo store in this process's memory: a restart forgets every memo, and each value
/// then spends epsilon_perm again. For tests and short-lived simulations; use
/// `FileMemoStore` on a device.
#[pyclass(module = "ldpstream._ldpstream", frozen)]
pub struct MemoryMemoStore {
    inner: Mutex<InMemoryMemoStore>,
}

impl MemoryMemoStore {
    pub(crate) fn new_py() -> Self {
        MemoryMemoStore {
            inner: Mutex::new(InMemoryMemoStore::new()),
        }
    }

    pub(crate) fn load_text(&self, metric: &str) -> PyResult<Option<String>> {
        Ok(locked(&self.inner)
            .load(metric)
            .map_err(input_error)?
            .map(|m| m.to_json()))
    }

    pub(crate) fn save_text(&self, metric: &str, memo: &str) -> PyResult<()> {
        let memo = MetricMemo::from_json(memo).map_err(input_error)?;
        locked(&self.inner).save(metric, &memo).map_err(input_error)
    }
}

#[pymethods]
impl MemoryMemoStore {
    #[new]
    fn new() -> Self {
        Self::new_py()
    }

    /// The metric's memo as canonical JSON, or None.
    fn load(&self, metric: &str) -> PyResult<Option<String>> {
        self.load_text(metric)
    }

    /// Stores a memo given as canonical JSON.
    fn save(&self, metric: &str, memo: &str) -> PyResult<()> {
        self.save_text(metric, memo)
    }
}

/// The durable memo store: one JSON file, replaced atomically (temporary file, fsync,
/// rename) on every save, locked against a second client while open. It holds the
/// device's true values and their memos: keep it on the device, never upload or sync it.
/// Deleting it makes every value spend epsilon_perm again.
#[pyclass(module = "ldpstream._ldpstream", frozen)]
pub struct FileMemoStore {
    inner: Mutex<FileStore>,
}

#[pymethods]
impl FileMemoStore {
    /// Opens the store at `path` (created on the first save). Raises ValueError when
    /// another client holds it (its `<path>.lock`) or it does not read back, OSError when
    /// it cannot be read.
    #[new]
    fn new(path: std::path::PathBuf) -> PyResult<Self> {
        let store = FileStore::open(&path).map_err(|e| {
            if e.source.is_some() {
                PyOSError::new_err(with_causes(&e))
            } else {
                input_error(e)
            }
        })?;
        Ok(FileMemoStore {
            inner: Mutex::new(store),
        })
    }

    /// The file's path.
    #[getter]
    fn path(&self) -> std::path::PathBuf {
        locked(&self.inner).path().to_path_buf()
    }

    /// The metric's memo as canonical JSON, or None.
    fn load(&self, metric: &str) -> PyResult<Option<String>> {
        Ok(locked(&self.inner)
            .load(metric)
            .map_err(input_error)?
            .map(|m| m.to_json()))
    }

    /// Stores a memo given as canonical JSON, durably.
    fn save(&self, metric: &str, memo: &str) -> PyResult<()> {
        let memo = MetricMemo::from_json(memo).map_err(input_error)?;
        locked(&self.inner)
            .save(metric, &memo)
            .map_err(|e| PyOSError::new_err(with_causes(&e)))
    }
}

/// The store a client writes to.
pub(crate) enum Store {
    Memory(Py<MemoryMemoStore>),
    File(Py<FileMemoStore>),
    /// Any object with `load` and `save` over canonical JSON text.
    Python(Py<PyAny>),
}

impl Store {
    pub(crate) fn from_py(py: Python<'_>, store: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let Some(store) = store else {
            return Ok(Store::Memory(Py::new(py, MemoryMemoStore::new_py())?));
        };
        if let Ok(m) = store.cast::<MemoryMemoStore>() {
            return Ok(Store::Memory(m.clone().unbind()));
        }
        if let Ok(f) = store.cast::<FileMemoStore>() {
            return Ok(Store::File(f.clone().unbind()));
        }
        if store.hasattr("load")? && store.hasattr("save")? {
            return Ok(Store::Python(store.clone().unbind()));
        }
        Err(input_error(
            "store: expected a FileMemoStore, a MemoryMemoStore, or an object with \
             load(metric) -> str | None and save(metric, text) methods",
        ))
    }
}

fn python_error(what: &str, e: PyErr) -> MemoStoreError {
    MemoStoreError::new(format!("the Python store's {what} raised: {e}"))
}

impl MemoStore for Store {
    fn load(&mut self, metric: &str) -> Result<Option<MetricMemo>, MemoStoreError> {
        match self {
            Store::Memory(m) => locked(&m.get().inner).load(metric),
            Store::File(f) => locked(&f.get().inner).load(metric),
            Store::Python(obj) => Python::attach(|py| {
                let text: Option<String> = obj
                    .bind(py)
                    .call_method1("load", (metric,))
                    .and_then(|v| v.extract())
                    .map_err(|e| python_error("load", e))?;
                text.map(|t| {
                    MetricMemo::from_json(&t).map_err(|e| {
                        MemoStoreError::new(format!("the Python store's memo of {metric:?}: {e}"))
                    })
                })
                .transpose()
            }),
        }
    }

    fn save(&mut self, metric: &str, memo: &MetricMemo) -> Result<(), MemoStoreError> {
        match self {
            Store::Memory(m) => locked(&m.get().inner).save(metric, memo),
            Store::File(f) => locked(&f.get().inner).save(metric, memo),
            Store::Python(obj) => Python::attach(|py| {
                obj.bind(py)
                    .call_method1("save", (metric, memo.to_json()))
                    .map(|_| ())
                    .map_err(|e| python_error("save", e))
            }),
        }
    }
}

/// A device's client of a longitudinal mechanism (`Mechanism.client()`): one report per
/// metric per period, each from the memo of the value, kept in its store.
#[pyclass(module = "ldpstream._ldpstream", frozen)]
pub struct LongitudinalClient {
    device: Mutex<Device<Store>>,
    fingerprint: u32,
    /// `lgrr`, `losue` or `lsue`: which message keys its groups may not take.
    kind: &'static str,
}

impl LongitudinalClient {
    pub(crate) fn new(
        mechanism: Longitudinal,
        fingerprint: u32,
        store: Store,
        max_memoized_values: u32,
        same_period: &str,
    ) -> PyResult<Self> {
        let options = DeviceOptions {
            max_memoized_values,
            same_period: SamePeriod::parse(same_period).map_err(config_error)?,
        };
        let kind = mechanism.kind();
        let device = Device::new(mechanism, store, options).map_err(config_error)?;
        Ok(LongitudinalClient {
            device: Mutex::new(device),
            fingerprint,
            kind,
        })
    }

    /// `report_with` on the client's device (the conformance replay passes its words).
    #[cfg(feature = "conformance-replay")]
    pub(crate) fn report_with<R: rand::Rng + ?Sized>(
        &self,
        metric: &str,
        value: u32,
        ts: i64,
        rng: &mut R,
    ) -> Result<Response, DeviceError> {
        locked(&self.device).report_with(metric, value, ts, rng)
    }

    fn report_now(&self, py: Python<'_>, metric: &str, value: u32, ts: i64) -> PyResult<Response> {
        let _turn = locked_attached(py, &TURN);
        locked_attached(py, &self.device)
            .report(metric, value, ts)
            .map_err(device_error)
    }
}

/// The error's message and every source's after it: "cannot save: Permission denied".
/// A store's message alone would not say why the disk refused.
fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.ends_with(&more) {
            text = format!("{text}: {more}");
        }
        source = s.source();
    }
    text
}

/// A refusal is a `ValueError` whose message starts with its name (conformance/README.md),
/// a store failure an `OSError`.
pub(crate) fn device_error(e: DeviceError) -> PyErr {
    match e {
        DeviceError::Store { .. } => PyOSError::new_err(with_causes(&e)),
        DeviceError::Engine(ref inner)
            if !matches!(
                inner,
                ldpstream_engine::EngineError::InputOutOfDomain { .. }
            ) =>
        {
            PyRuntimeError::new_err(e.to_string())
        }
        _ => input_error(format!("{}: {e}", e.code())),
    }
}

/// The report as one row of the composed kind's report array.
pub(crate) fn report_array(report: &Response) -> PyResult<ArrayRef> {
    Ok(match report {
        Response::Category(c) => Arc::new(UInt32Array::from(vec![*c])),
        Response::Bits(b) => Arc::new(
            FixedSizeBinaryArray::try_from_iter(std::iter::once(b.as_slice()))
                .map_err(input_error)?,
        ),
    })
}

#[pymethods]
impl LongitudinalClient {
    /// The report of `value` for `metric` at event time `ts` (ms since the epoch): an int
    /// (lgrr) or the packed bits as bytes (losue, lsue). Raises ValueError, its message
    /// starting with the refusal's name, for a second report in the period
    /// (`same_period`), a clock that went back (`clock_went_back`), a new value past
    /// `max_memoized_values` (`memo_full`, after which the metric is `stopped`), a memo of
    /// another mechanism (`memo_mismatch`: see `reset`) or a value outside the domain;
    /// OSError when the store cannot save (no report is returned then).
    fn report<'py>(
        &self,
        py: Python<'py>,
        metric: &str,
        value: &Bound<'py, PyAny>,
        ts: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (value, ts) = (int_input("value", value)?, int_input("ts", ts)?);
        Ok(match self.report_now(py, metric, value, ts)? {
            Response::Category(c) => c.into_pyobject(py)?.into_any(),
            Response::Bits(b) => PyBytes::new(py, &b).into_any(),
        })
    }

    /// `report`, as the Kafka message the stream reads (docs/clients.md), stamped with the
    /// mechanism's fingerprint: `format` "json" or "binary", `groups` the group values in
    /// the stream's `group_by` order (a dict or (name, value) pairs).
    #[pyo3(signature = (metric, value, ts, *, format="json", groups=None, max_group_value_bytes=128))]
    #[allow(clippy::too_many_arguments)]
    fn message<'py>(
        &self,
        py: Python<'py>,
        metric: &str,
        value: &Bound<'py, PyAny>,
        ts: &Bound<'py, PyAny>,
        format: &str,
        groups: Option<&Bound<'py, PyAny>>,
        max_group_value_bytes: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let (value, ts) = (int_input("value", value)?, int_input("ts", ts)?);
        let format = Format::parse(format).map_err(input_error)?;
        let groups = group_pairs(groups, self.kind)?;
        let envelope = Envelope {
            ts: Some(ts),
            groups: &groups,
            fingerprint: Some(self.fingerprint),
        };
        check_envelope(&envelope, max_group_value_bytes).map_err(input_error)?;
        let report = self.report_now(py, metric, value, ts)?;
        let messages = encode(&report_array(&report)?, format, &envelope).map_err(input_error)?;
        let message = messages.first().map(Vec::as_slice).unwrap_or_default();
        Ok(PyBytes::new(py, message))
    }

    /// Forgets `metric`'s memo and starts a new one under this mechanism (after a change
    /// of parameters, `memo_mismatch`): every value reported again spends epsilon_perm
    /// again. The period rule carries over.
    fn reset(&self, py: Python<'_>, metric: &str) -> PyResult<()> {
        let _turn = locked_attached(py, &TURN);
        locked_attached(py, &self.device)
            .reset(metric)
            .map_err(device_error)
    }

    /// The period index of an event time: floor(ts / period).
    fn period_of(&self, py: Python<'_>, ts: &Bound<'_, PyAny>) -> PyResult<i64> {
        let ts = int_input("ts", ts)?;
        Ok(locked_attached(py, &self.device).period_of(ts))
    }

    /// `max_memoized_values` and `same_period`.
    #[getter]
    fn options(&self, py: Python<'_>) -> (u32, &'static str) {
        let o = locked_attached(py, &self.device).options();
        (o.max_memoized_values, o.same_period.name())
    }
}
