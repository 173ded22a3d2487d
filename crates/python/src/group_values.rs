//! The group values of a Kafka message, from Python: shared by `Mechanism.messages` and a
//! longitudinal client's `message` (a module of its own so neither imports the other).

use pyo3::prelude::*;

use crate::errors::value_error;

/// Group values as (name, value) pairs, in order: from a dict or a sequence of pairs.
pub(crate) fn group_pairs(groups: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<(String, String)>> {
    let Some(groups) = groups else {
        return Ok(Vec::new());
    };
    let pairs = if groups.hasattr("items")? {
        groups.call_method0("items")?
    } else {
        groups.clone()
    };
    let mut out = Vec::new();
    for pair in pairs.try_iter()? {
        out.push(
            pair?
                .extract::<(String, String)>()
                .map_err(|e| value_error(format!("groups: expected (name, value) strings: {e}")))?,
        );
    }
    Ok(out)
}
