//! The Python package `ldpstream` (its native module `ldpstream._ldpstream`): the batch
//! job over in-memory Arrow data and the client-side randomizers, calling the same jobs
//! and engine code as the CLI. `python/ldpstream/` wraps it with the one-liners, the
//! Spark and Ray drivers and the type stubs.

mod arrow_in;
mod arrow_out;
mod config_in;
#[cfg(feature = "conformance-replay")]
mod conformance;
mod errors;
mod group_values;
mod job;
mod longitudinal;
mod mechanism;
mod messages;
mod plan;
mod process_pool;
mod sketches;

use pyo3::prelude::*;

#[pymodule]
fn _ldpstream(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Every error is raised as a class of ldpstream.exceptions: load it now, so that a
    // broken install fails here rather than on the first error.
    m.py().import("ldpstream.exceptions")?;
    m.add_function(wrap_pyfunction!(mechanism::_mechanism_kinds, m)?)?;
    m.add_class::<job::Job>()?;
    m.add_class::<sketches::Sketches>()?;
    m.add_class::<mechanism::Mechanism>()?;
    m.add_class::<longitudinal::LongitudinalClient>()?;
    m.add_class::<longitudinal::MemoryMemoStore>()?;
    m.add_class::<longitudinal::FileMemoStore>()?;
    m.add_function(wrap_pyfunction!(plan::_plan, m)?)?;
    #[cfg(feature = "conformance-replay")]
    m.add_function(wrap_pyfunction!(conformance::_conformance, m)?)?;
    #[cfg(feature = "conformance-replay")]
    m.add_function(wrap_pyfunction!(conformance::_conformance_longitudinal, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
