//! Arrow data from Python, through the Arrow PyCapsule interface: any object with
//! `__arrow_c_stream__` (pyarrow Tables and RecordBatchReaders, polars DataFrames, DuckDB
//! results, pandas frames on pandas >= 2.2) or `__arrow_c_array__` (a pyarrow RecordBatch,
//! a struct array). The buffers are taken over, not copied: arrow's own C data interface
//! (`arrow::ffi`, `arrow::ffi_stream`) imports them.

use std::ffi::CStr;

use arrow_array::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::ffi_stream::RecordBatchStreamReader;
use arrow_array::RecordBatch;
use arrow_array::{Array, ArrayRef, StructArray};
use arrow_schema::DataType;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods, PyTuple};

use crate::errors::input_error;

const STREAM: &CStr = c"arrow_array_stream";
const SCHEMA: &CStr = c"arrow_schema";
const ARRAY: &CStr = c"arrow_array";

/// The record batches of `data`, in order.
pub fn record_batches(data: &Bound<'_, PyAny>) -> PyResult<Vec<RecordBatch>> {
    if data.hasattr("__arrow_c_stream__")? {
        let capsule = data.call_method1("__arrow_c_stream__", (data.py().None(),))?;
        return read_stream(&capsule);
    }
    if data.hasattr("__arrow_c_array__")? {
        let array = import_array(data)?;
        let DataType::Struct(_) = array.data_type() else {
            return Err(PyTypeError::new_err(format!(
                "an Arrow array of type {} is not a table: pass a table, a record batch or a \
                 struct array",
                array.data_type()
            )));
        };
        let Some(columns) = array.as_any().downcast_ref::<StructArray>() else {
            return Err(PyTypeError::new_err(
                "a struct array that is not a StructArray",
            ));
        };
        return Ok(vec![RecordBatch::from(columns)]);
    }
    Err(PyTypeError::new_err(format!(
        "expected Arrow data (an object with __arrow_c_stream__ or __arrow_c_array__: a \
         pyarrow Table, RecordBatch or RecordBatchReader, a polars DataFrame, a DuckDB \
         result, a pandas DataFrame with Arrow dtypes), got {}",
        data.get_type().name()?
    )))
}

fn read_stream(capsule: &Bound<'_, PyAny>) -> PyResult<Vec<RecordBatch>> {
    let capsule = capsule.cast::<PyCapsule>()?;
    let ptr = capsule.pointer_checked(Some(STREAM))?;
    // SAFETY: the capsule is named arrow_array_stream, so by the PyCapsule protocol it
    // points to a valid FFI_ArrowArrayStream; from_raw moves it out and marks the
    // capsule's copy released, so the capsule's destructor does not release it again.
    // A stream of plain arrays (a polars Series, a pyarrow ChunkedArray) has a schema that
    // is not a struct, which arrow-rs cannot read as a table's.
    let reader =
        unsafe { RecordBatchStreamReader::from_raw(ptr.cast().as_ptr()) }.map_err(|e| {
            input_error(format!(
                "an Arrow stream of arrays that are not tables (a column, such as a polars \
             Series): pass a table with the stream's columns, e.g. pyarrow.table({{\"report\": \
             column}}) ({e})"
            ))
        })?;
    reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| input_error(format!("reading the Arrow stream: {e}")))
}

/// One array handed over with `__arrow_c_array__`.
pub fn import_array(data: &Bound<'_, PyAny>) -> PyResult<ArrayRef> {
    let pair = data.call_method1("__arrow_c_array__", (data.py().None(),))?;
    let pair = pair.cast::<PyTuple>()?;
    let schema = pair.get_item(0)?;
    let array = pair.get_item(1)?;
    let schema = schema.cast::<PyCapsule>()?;
    let array = array.cast::<PyCapsule>()?;
    let schema_ptr = schema.pointer_checked(Some(SCHEMA))?;
    let array_ptr = array.pointer_checked(Some(ARRAY))?;
    // SAFETY: capsules named arrow_schema / arrow_array point to valid C data interface
    // structs (PyCapsule protocol). The array is moved out (its capsule's copy marked
    // released); the schema is only borrowed while its capsule is alive.
    let data = unsafe {
        let array = FFI_ArrowArray::from_raw(array_ptr.cast().as_ptr());
        let schema: &FFI_ArrowSchema = schema_ptr.cast().as_ref();
        from_ffi(array, schema)
    }
    .map_err(input_error)?;
    Ok(arrow_array::make_array(data))
}
