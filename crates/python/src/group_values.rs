//! The group values a client message carries, checked as the server reads them. Shared by
//! `Mechanism.messages` and the longitudinal clients' `message`.

use pyo3::prelude::*;

use crate::errors::input_error;

/// Group values as (name, value) pairs, in order: from a dict or a sequence of pairs.
/// A name given twice, or one of the message's own keys (`report`, `ts`, `fingerprint` and
/// the mechanism's index: `row`, `cohort` or `seed`), is refused: JSON readers disagree on
/// which of two equal keys counts (the server takes the first, most others the last).
pub(crate) fn group_pairs(
    groups: Option<&Bound<'_, PyAny>>,
    kind: &str,
) -> PyResult<Vec<(String, String)>> {
    let Some(groups) = groups else {
        return Ok(Vec::new());
    };
    let pairs = if groups.hasattr("items")? {
        groups.call_method0("items")?
    } else {
        groups.clone()
    };
    let reserved: &[&str] = match kind {
        "hadamard" => &["report", "ts", "fingerprint", "row"],
        "cohort" => &["report", "ts", "fingerprint", "cohort"],
        "olh" => &["report", "ts", "fingerprint", "seed"],
        _ => &["report", "ts", "fingerprint"],
    };
    let mut out: Vec<(String, String)> = Vec::new();
    for pair in pairs.try_iter()? {
        let (name, value) = pair?
            .extract::<(String, String)>()
            .map_err(|e| input_error(format!("groups: expected (name, value) strings: {e}")))?;
        if out.iter().any(|(n, _)| *n == name) {
            return Err(input_error(format!(
                "groups: {name:?} is given twice; each group column is named once"
            )));
        }
        if reserved.contains(&name.as_str()) {
            return Err(input_error(format!(
                "groups: {name:?} is a key of the message itself ({}), not a group column name",
                reserved.join(", ")
            )));
        }
        out.push((name, value));
    }
    Ok(out)
}
