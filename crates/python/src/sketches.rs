//! `ldpstream.Sketches`: the integer sketches of one or more streams with the inputs they
//! were folded from: exactly a `batch --emit-sketches` file's content, so that its bytes
//! and the CLI's files merge both ways.

use std::collections::BTreeMap;

use ldpstream_jobs::sketch_file::{combine, decode, encode_partial, Partial};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyType};

use crate::errors::{contained, job_error};
use crate::process_pool::contained_in_pool;

/// The sketches of a fold, byte-compatible with `ldpstream batch --emit-sketches` files.
///
/// Merge them with `merge` (exact, in any order), serialize them with `to_bytes` and
/// test them with `Job.evaluate`.
///
/// Example:
///     >>> sk = job.fold(table_a).merge(job.fold(table_b))
///     >>> open("part.ldpp", "wb").write(sk.to_bytes())
///     >>> job.evaluate(ldpstream.Sketches.from_bytes(open("part.ldpp", "rb").read()))
#[pyclass(module = "ldpstream._ldpstream", frozen)]
pub struct Sketches {
    pub partial: Partial,
}

#[pymethods]
impl Sketches {
    /// The sum of these sketches and `other`'s: exact integer addition. Refused
    /// (ValueError, with `ldpstream merge`'s message) for sketches counted under other
    /// settings or holding an input that is already in these.
    fn merge(&self, py: Python<'_>, other: &Sketches) -> PyResult<Sketches> {
        let mut partial = self.partial.clone();
        let theirs = other.partial.clone();
        py.detach(|| {
            contained_in_pool("merging sketches", || {
                combine(&mut partial, theirs, "the sketches merged in").map_err(job_error)
            })
        })?;
        Ok(Sketches { partial })
    }

    /// The bytes of a `batch --emit-sketches` file (`ldpstream merge` reads them).
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes =
            py.detach(|| contained("encoding sketches", || Ok(encode_partial(&self.partial))))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Sketches from the bytes of `to_bytes` or of a `batch --emit-sketches` file.
    /// Raises ValueError when the bytes are damaged, cut short or not a sketch file.
    #[classmethod]
    fn from_bytes(_cls: &Bound<'_, PyType>, py: Python<'_>, data: &[u8]) -> PyResult<Sketches> {
        let partial = py.detach(|| {
            contained("decoding sketch bytes", || {
                decode(data, "sketch bytes").map_err(job_error)
            })
        })?;
        Ok(Sketches { partial })
    }

    /// The names of the streams these sketches hold.
    #[getter]
    fn streams(&self) -> Vec<String> {
        self.partial
            .streams
            .iter()
            .map(|s| s.name.clone())
            .collect()
    }

    /// Per stream, the inputs folded into these sketches (canonical paths of Parquet
    /// files; `arrow:<identity>` for in-memory data).
    #[getter]
    fn inputs(&self) -> BTreeMap<String, Vec<String>> {
        self.partial.inputs.clone()
    }

    /// Per stream, the valid reports counted (every pane and group).
    #[getter]
    fn reports(&self) -> BTreeMap<String, u64> {
        self.partial
            .streams
            .iter()
            .map(|s| {
                let n = s
                    .panes
                    .panes
                    .values()
                    .chain(std::iter::once(&s.panes.retired))
                    .flat_map(|g| g.values())
                    .map(|sketch| sketch.n())
                    .fold(0u64, u64::saturating_add);
                (s.name.clone(), n)
            })
            .collect()
    }

    /// Pickling (Spark and Ray ship sketches between processes): by their bytes.
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        let from_bytes = slf.get_type().getattr("from_bytes")?;
        Ok((from_bytes, (slf.get().to_bytes(slf.py())?,)))
    }

    fn __repr__(&self) -> String {
        format!(
            "Sketches(streams={:?}, reports={:?})",
            self.streams(),
            self.reports()
        )
    }
}
