//! How Rust errors and panics reach Python. A user's fault (config, input, sketch bytes)
//! is a `ValueError` carrying the CLI's message; a fault of ldpstream itself is a
//! `RuntimeError`. A panic never unwinds across the FFI boundary: [`contained`] turns it
//! into a `RuntimeError` naming what was being done.

use std::panic::{catch_unwind, AssertUnwindSafe};

use ldpstream_jobs::{Error, Fault};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::PyErr;

/// A jobs error as the Python exception of its fault.
pub fn job_error(e: Error) -> PyErr {
    match e.fault() {
        Fault::Internal => PyRuntimeError::new_err(e.to_string()),
        Fault::User | Fault::External => PyValueError::new_err(e.to_string()),
    }
}

/// Any displayable error as a `ValueError` (a bad value from the caller).
pub fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// Runs `f`; a panic inside becomes a `RuntimeError` instead of taking the interpreter down.
/// `what` names the operation in the message.
pub fn contained<T>(what: &str, f: impl FnOnce() -> Result<T, PyErr>) -> Result<T, PyErr> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Err(PyRuntimeError::new_err(format!(
                "internal error in ldpstream while {what}: {message} (please report it)"
            )))
        }
    }
}
