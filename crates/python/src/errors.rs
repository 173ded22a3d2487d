//! How Rust errors and panics reach Python: as the package's own exceptions
//! (`ldpstream.exceptions`, defined in Python because each also subclasses ValueError or
//! RuntimeError, which a class made by pyo3 cannot). A user's fault (config, input, sketch
//! bytes, budget) is one of the ValueError subclasses carrying the CLI's message; a fault
//! of ldpstream itself is `InternalError`, a RuntimeError. A panic never unwinds across the
//! FFI boundary: [`contained`] turns it into an `InternalError` naming what was being done.

use std::panic::{catch_unwind, AssertUnwindSafe};

use ldpstream_jobs::{Conflict, Error, Fault};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt};
use pyo3::PyErr;

/// The classes of `ldpstream/exceptions.py`. The module is imported when the extension
/// loads (`lib.rs`), so these lookups cannot fail afterwards.
mod classes {
    pyo3::import_exception!(ldpstream.exceptions, ConfigError);
    pyo3::import_exception!(ldpstream.exceptions, InputError);
    pyo3::import_exception!(ldpstream.exceptions, BudgetError);
    pyo3::import_exception!(ldpstream.exceptions, MechanismMismatchError);
    pyo3::import_exception!(ldpstream.exceptions, InternalError);
}

/// A config, a mechanism's parameters, or the ledger's location: `ConfigError`.
pub fn config_error(e: impl std::fmt::Display) -> PyErr {
    classes::ConfigError::new_err(e.to_string())
}

/// Data, columns or sketch bytes the call cannot take: `InputError`.
pub fn input_error(e: impl std::fmt::Display) -> PyErr {
    classes::InputError::new_err(e.to_string())
}

/// A fault of ldpstream itself: `InternalError` (a RuntimeError).
pub fn internal_error(e: impl std::fmt::Display) -> PyErr {
    classes::InternalError::new_err(e.to_string())
}

/// A jobs error as the exception of its kind.
pub fn job_error(e: Error) -> PyErr {
    let message = e.to_string();
    match &e {
        _ if e.fault() == Fault::Internal => classes::InternalError::new_err(message),
        Error::Config(_)
        | Error::NotBatchSource { .. }
        | Error::StateMemory { .. }
        | Error::LedgerLocation { .. } => classes::ConfigError::new_err(message),
        Error::LedgerConflict { .. } | Error::ResetLedger { .. } | Error::Ledger { .. } => {
            classes::BudgetError::new_err(message)
        }
        Error::PartialConflict {
            kind: Conflict::Settings,
            ..
        } => classes::MechanismMismatchError::new_err(message),
        _ => classes::InputError::new_err(message),
    }
}

/// Runs `f`; a panic inside becomes an `InternalError` instead of taking the interpreter
/// down. `what` names the operation in the message.
pub fn contained<T>(what: &str, f: impl FnOnce() -> Result<T, PyErr>) -> Result<T, PyErr> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Err(internal_error(format!(
                "internal error in ldpstream while {what}: {message} (please report it)"
            )))
        }
    }
}

/// The integer argument `name` as a `T`. pyo3's own conversion raises OverflowError, which
/// names neither the parameter nor its range; this is a TypeError for a non-integer (a bool
/// included) and a `ConfigError` (a ValueError) naming both for one out of range.
pub fn int_arg<T>(name: &str, value: &Bound<'_, PyAny>) -> PyResult<T>
where
    T: TryFrom<i128> + Bounded,
{
    checked_int(name, value, config_error)
}

/// [`int_arg`] for the data of a call (a value, a timestamp): `InputError` out of range.
pub fn int_input<T>(name: &str, value: &Bound<'_, PyAny>) -> PyResult<T>
where
    T: TryFrom<i128> + Bounded,
{
    checked_int(name, value, input_error)
}

fn checked_int<T>(name: &str, value: &Bound<'_, PyAny>, error: fn(String) -> PyErr) -> PyResult<T>
where
    T: TryFrom<i128> + Bounded,
{
    if value.is_instance_of::<PyBool>() || !value.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "{name} must be an integer, got {}",
            value.get_type().name()?
        )));
    }
    let out_of_range = || {
        error(format!(
            "{name} = {value}: must be an integer from {} to {}",
            T::MIN,
            T::MAX
        ))
    };
    let wide: i128 = value.extract().map_err(|_| out_of_range())?;
    T::try_from(wide).map_err(|_| out_of_range())
}

/// An optional integer argument: None stays None.
pub fn opt_int_arg<T>(name: &str, value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<T>>
where
    T: TryFrom<i128> + Bounded,
{
    match value {
        Some(v) if !v.is_none() => int_arg(name, v).map(Some),
        _ => Ok(None),
    }
}

/// The range of an integer parameter, for [`int_arg`]'s message.
pub trait Bounded {
    const MIN: i128;
    const MAX: i128;
}

macro_rules! bounded {
    ($($t:ty),*) => {$(
        impl Bounded for $t {
            const MIN: i128 = <$t>::MIN as i128;
            const MAX: i128 = <$t>::MAX as i128;
        }
    )*};
}
bounded!(u32, u64, i64, usize);
