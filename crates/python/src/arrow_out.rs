//! Arrow data back to Python through the same PyCapsule interface: results are exported
//! with arrow's C stream interface and imported by pyarrow (`pyarrow.table`), arrays by
//! `pyarrow.array`; neither copies the buffers.

use std::ffi::CStr;

use arrow_array::ffi::{FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{Array, ArrayRef};
use arrow_array::{RecordBatch, RecordBatchIterator};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::errors::internal_error;

const STREAM: &CStr = c"arrow_array_stream";
const SCHEMA: &CStr = c"arrow_schema";
const ARRAY: &CStr = c"arrow_array";

/// A record batch that Python reads with `__arrow_c_stream__`.
#[pyclass(module = "ldpstream._ldpstream", frozen)]
pub struct ExportedTable {
    batch: RecordBatch,
}

#[pymethods]
impl ExportedTable {
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        // The schema is ours to choose; pyarrow casts on its side when it asked for another.
        let _ = requested_schema;
        let reader = RecordBatchIterator::new(vec![Ok(self.batch.clone())], self.batch.schema());
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        PyCapsule::new_with_value(py, stream, STREAM)
    }
}

/// An array that Python reads with `__arrow_c_array__`.
#[pyclass(module = "ldpstream._ldpstream", frozen)]
pub struct ExportedArray {
    array: ArrayRef,
}

#[pymethods]
impl ExportedArray {
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyCapsule>, Bound<'py, PyCapsule>)> {
        let _ = requested_schema;
        let data = self.array.to_data();
        let schema = FFI_ArrowSchema::try_from(data.data_type()).map_err(internal_error)?;
        let array = FFI_ArrowArray::new(&data);
        Ok((
            PyCapsule::new_with_value(py, schema, SCHEMA)?,
            PyCapsule::new_with_value(py, array, ARRAY)?,
        ))
    }
}

/// `batch` as a `pyarrow.Table`.
pub fn to_pyarrow_table(py: Python<'_>, batch: RecordBatch) -> PyResult<Py<PyAny>> {
    let exported = Bound::new(py, ExportedTable { batch })?;
    Ok(py
        .import("pyarrow")?
        .call_method1("table", (exported,))?
        .unbind())
}

/// `array` as a `pyarrow.Array`.
pub fn to_pyarrow_array(py: Python<'_>, array: ArrayRef) -> PyResult<Py<PyAny>> {
    let exported = Bound::new(py, ExportedArray { array })?;
    Ok(py
        .import("pyarrow")?
        .call_method1("array", (exported,))?
        .unbind())
}
