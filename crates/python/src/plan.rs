//! `ldpstream.plan`: the planner behind `ldpstream plan` (the engine's `plan` module),
//! one dict per mechanism instead of a printed table.

use ldpstream_engine::plan::{self, Alternative, Hypotheses, PlanMechanism};
use ldpstream_engine::EngineError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{config_error, contained, int_arg, opt_int_arg};

/// The plan of every mechanism: power at `n` reports, or the reports needed for `power`.
/// `null` is "uniform" or comma-separated probabilities; `alternative` as `--alternative`.
#[pyfunction]
#[pyo3(signature = (domain, epsilon, alternative, null, alpha, n=None, power=None))]
#[allow(clippy::too_many_arguments)]
pub fn _plan<'py>(
    py: Python<'py>,
    domain: &Bound<'py, PyAny>,
    epsilon: f64,
    alternative: String,
    null: String,
    alpha: f64,
    n: Option<&Bound<'py, PyAny>>,
    power: Option<f64>,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    let domain: u32 = int_arg("domain", domain)?;
    let n: Option<u64> = opt_int_arg("n", n)?;
    if n.is_some() == power.is_some() {
        return Err(config_error("give exactly one of n and power"));
    }
    if !(epsilon.is_finite() && epsilon > 0.0) {
        return Err(config_error(format!(
            "epsilon {epsilon} must be a finite number > 0"
        )));
    }
    if !(alpha > 0.0 && alpha < 1.0) {
        return Err(config_error(format!("alpha {alpha} must be in (0, 1)")));
    }
    let p0 = if null == "uniform" {
        vec![1.0 / f64::from(domain.max(1)); domain as usize]
    } else {
        null.split(',')
            .map(|s| {
                s.trim()
                    .parse::<f64>()
                    .map_err(|_| config_error(format!("null: {s:?} is not a number")))
            })
            .collect::<PyResult<Vec<f64>>>()?
    };
    if p0.len() != domain as usize || domain < 2 {
        return Err(config_error(format!(
            "null has {} entries; domain is {domain} (at least 2)",
            p0.len()
        )));
    }
    let h: Hypotheses = alternative
        .parse::<Alternative>()
        .and_then(|alt| alt.against(&p0))
        .map_err(|e| config_error(format!("alternative {alternative:?}: {e}")))?;
    let rows = py.detach(|| {
        contained("planning", || {
            PlanMechanism::all(epsilon)
                .into_iter()
                .map(|m| row(m, &h, alpha, n, power))
                .collect::<Result<Vec<_>, EngineError>>()
                .map_err(config_error)
        })
    })?;
    rows.into_iter()
        .map(|(m, df, lambda, power_at_n, required, note)| {
            let d = PyDict::new(py);
            d.set_item("mechanism", m.name())?;
            d.set_item("test", m.test_name())?;
            d.set_item("df", df)?;
            d.set_item("lambda", lambda)?;
            d.set_item("power", power_at_n)?;
            d.set_item("n", required)?;
            d.set_item("note", note)?;
            Ok(d)
        })
        .collect()
}

type Row = (
    PlanMechanism,
    u32,
    Option<f64>,
    Option<f64>,
    Option<u64>,
    Option<String>,
);

fn row(
    m: PlanMechanism,
    h: &Hypotheses,
    alpha: f64,
    n: Option<u64>,
    power: Option<f64>,
) -> Result<Row, EngineError> {
    let df = m.df(h.domain());
    if let Some(n) = n {
        let lambda = plan::noncentrality(m, h, n)?;
        return Ok((
            m,
            df,
            Some(lambda),
            Some(plan::power(m, h, alpha, n)?),
            None,
            None,
        ));
    }
    let target = power.unwrap_or(0.8);
    match plan::required_n(m, h, alpha, target) {
        Ok(n) => Ok((
            m,
            df,
            Some(plan::noncentrality(m, h, n)?),
            None,
            Some(n),
            None,
        )),
        Err(e @ EngineError::PowerUnreachable { .. }) => {
            Ok((m, df, None, None, None, Some(e.to_string())))
        }
        Err(e) => Err(e),
    }
}
