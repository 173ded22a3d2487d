//! `ldpstream.Mechanism`: the client-side randomizers of the config's mechanism kinds, the
//! engine's own (`privatize_batch`, what `ldpstream simulate` writes), returning reports
//! in the documented Parquet report formats.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, StructArray, UInt32Array};
use arrow_cast::{cast_with_options, CastOptions};
use arrow_schema::{DataType, Field};
use ldpstream_config::MechanismConfig;
use ldpstream_engine::mechanism::longitudinal::device::DEFAULT_MAX_MEMOIZED_VALUES;
use ldpstream_engine::mechanism::{client_rng, privatize_batch, Mechanism as Engine};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyType};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use crate::arrow_in::import_array;
use crate::arrow_out::to_pyarrow_array;
use crate::errors::{config_error, contained, input_error, int_arg, internal_error, opt_int_arg};
use crate::group_values::group_pairs;
use crate::longitudinal::{LongitudinalClient, Store};
use crate::messages::{check_envelope, encode, Envelope, Format};

/// A local randomizer, as a stream's `mechanism` table configures it.
///
/// Build one with a constructor per kind (`grr`, `bitflip`, `oue`, `subset`, `olh`,
/// `gauss`, `laplace`, `hadamard`, `cohort`, `matrix`, `raw`); `randomize` privatizes true values on the
/// client, drawing from a CSPRNG freshly seeded from the OS on every call (safe across
/// `fork`: a forked child never replays its parent's draws). The longitudinal kinds
/// (`lgrr`, `losue`, `lsue`) report through a device's `client()`, which keeps their memo.
///
/// Example:
///     >>> m = ldpstream.Mechanism.grr(epsilon=1.0, domain=16)
///     >>> reports = m.randomize([0, 3, 15, 7])
#[pyclass(module = "ldpstream._ldpstream", frozen)]
pub struct Mechanism {
    /// The `mechanism` table as JSON (what `config` returns, and the one-liners' configs).
    table: Value,
    engine: Engine,
}

/// `value` of parameter `name`, refused when NaN or infinite: JSON has no such number, so
/// it would otherwise reach the config check as null ("invalid type: null").
fn finite(name: &str, value: f64) -> PyResult<f64> {
    if value.is_finite() {
        Ok(value)
    } else {
        Err(config_error(format!(
            "mechanism {name} = {value}: must be a finite number"
        )))
    }
}

fn longitudinal(
    kind: &str,
    epsilon_perm: f64,
    epsilon_1: f64,
    domain: u32,
    period: &str,
) -> PyResult<Mechanism> {
    // Checked as the config checks it (each ε named, ε1 < ε∞, the period's range).
    let table = json!({
        "kind": kind, "epsilon_perm": finite("epsilon_perm", epsilon_perm)?,
        "epsilon_1": finite("epsilon_1", epsilon_1)?, "domain": domain, "period": period
    });
    let config = parse(&table)?;
    config
        .validate("mechanism")
        .map_err(|e| config_error(e.to_string()))?;
    from_config(table, &config)
}

fn parse(table: &Value) -> PyResult<MechanismConfig> {
    serde_json::from_value(table.clone())
        .map_err(|e| config_error(format!("mechanism {table}: {e}")))
}

fn build(table: Value) -> PyResult<Mechanism> {
    let config = parse(&table)?;
    from_config(table, &config)
}

/// `table` must be the one `config` was parsed from: `Mechanism` keeps both.
fn from_config(table: Value, config: &MechanismConfig) -> PyResult<Mechanism> {
    let engine = Engine::from_config(config)
        .map_err(|e| config_error(format!("mechanism {}: {e}", config.kind())))?;
    Ok(Mechanism { table, engine })
}

/// Every mechanism kind the config takes (`kind = "..."`), from the config's own list:
/// what the Spark and Ray runners must each know how to cast, and their tests run over.
#[pyfunction]
pub fn _mechanism_kinds() -> Vec<&'static str> {
    MechanismConfig::KINDS.to_vec()
}

#[pymethods]
impl Mechanism {
    /// Generalized randomized response over `domain` categories (reports: UInt32).
    #[classmethod]
    #[pyo3(signature = (*, epsilon, domain))]
    fn grr(_cls: &Bound<'_, PyType>, epsilon: f64, domain: &Bound<'_, PyAny>) -> PyResult<Self> {
        let domain: u32 = int_arg("domain", domain)?;
        build(json!({"kind": "grr", "epsilon": finite("epsilon", epsilon)?, "domain": domain}))
    }

    /// Unary encoding with every bit flipped (reports: FixedSizeBinary(ceil(d/8))).
    #[classmethod]
    #[pyo3(signature = (*, epsilon, domain))]
    fn bitflip(
        _cls: &Bound<'_, PyType>,
        epsilon: f64,
        domain: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let domain: u32 = int_arg("domain", domain)?;
        build(json!({"kind": "bitflip", "epsilon": finite("epsilon", epsilon)?, "domain": domain}))
    }

    /// Optimized unary encoding, Wang et al. 2017: the true bit kept with probability 1/2,
    /// every other bit set with probability 1/(e^epsilon + 1) (reports as bitflip's).
    #[classmethod]
    #[pyo3(signature = (*, epsilon, domain))]
    fn oue(_cls: &Bound<'_, PyType>, epsilon: f64, domain: &Bound<'_, PyAny>) -> PyResult<Self> {
        let domain: u32 = int_arg("domain", domain)?;
        build(json!({"kind": "oue", "epsilon": finite("epsilon", epsilon)?, "domain": domain}))
    }

    /// k-subset selection, Wang et al. 2016 / Ye & Barg 2018: a report is k distinct
    /// categories holding x with probability k e^epsilon/(k e^epsilon + d - k), the rest
    /// uniform. `k=None` takes the default ceil(d/(e^epsilon + 1)), as the config does; the
    /// reports are List(UInt32), each sorted.
    #[classmethod]
    #[pyo3(signature = (*, epsilon, domain, k=None))]
    fn subset(
        _cls: &Bound<'_, PyType>,
        epsilon: f64,
        domain: &Bound<'_, PyAny>,
        k: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let domain: u32 = int_arg("domain", domain)?;
        let k: Option<u32> = opt_int_arg("k", k)?;
        build(json!({
            "kind": "subset", "epsilon": finite("epsilon", epsilon)?, "domain": domain, "k": k
        }))
    }

    /// Optimized local hashing, Wang et al. 2017, with a fixed public pool of `pool_size`
    /// hash seeds drawn from `pool_seed` (docs/STATISTICS.md §1.8): a report is a pool
    /// index i, uniform, and a bucket y in [g], the hash h_i(x) kept with probability
    /// e^epsilon/(e^epsilon + g - 1), else another bucket uniformly. `g=None` takes
    /// round(e^epsilon) + 1 and `pool_size=None` 1024, as the config does; the reports are a
    /// struct of `seed` (UInt32, the pool index) and `report` (UInt32, the bucket).
    #[classmethod]
    #[pyo3(signature = (*, epsilon, domain, g=None, pool_size=None, pool_seed=None))]
    fn olh(
        _cls: &Bound<'_, PyType>,
        epsilon: f64,
        domain: &Bound<'_, PyAny>,
        g: Option<&Bound<'_, PyAny>>,
        pool_size: Option<&Bound<'_, PyAny>>,
        pool_seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let domain: u32 = int_arg("domain", domain)?;
        let g: Option<u32> = opt_int_arg("g", g)?;
        let pool_size: Option<u32> = opt_int_arg("pool_size", pool_size)?;
        let pool_seed: u64 = opt_int_arg("pool_seed", pool_seed)?.unwrap_or(0);
        build(json!({
            "kind": "olh", "epsilon": finite("epsilon", epsilon)?, "domain": domain, "g": g,
            "pool_size": pool_size, "pool_seed": pool_seed
        }))
    }

    /// One-hot plus Gaussian noise, rho-zCDP (reports: FixedSizeList(Float64, d)).
    #[classmethod]
    #[pyo3(signature = (*, rho, domain, max_abs=None))]
    fn gauss(
        _cls: &Bound<'_, PyType>,
        rho: f64,
        domain: &Bound<'_, PyAny>,
        max_abs: Option<f64>,
    ) -> PyResult<Self> {
        let domain: u32 = int_arg("domain", domain)?;
        build(
            json!({"kind": "gauss", "rho": finite("rho", rho)?, "domain": domain, "max_abs": max_abs.map(|v| finite("max_abs", v)).transpose()?}),
        )
    }

    /// One-hot plus Laplace noise, epsilon-LDP (reports: FixedSizeList(Float64, d)).
    #[classmethod]
    #[pyo3(signature = (*, epsilon, domain, max_abs=None))]
    fn laplace(
        _cls: &Bound<'_, PyType>,
        epsilon: f64,
        domain: &Bound<'_, PyAny>,
        max_abs: Option<f64>,
    ) -> PyResult<Self> {
        let domain: u32 = int_arg("domain", domain)?;
        build(
            json!({"kind": "laplace", "epsilon": finite("epsilon", epsilon)?, "domain": domain, "max_abs": max_abs.map(|v| finite("max_abs", v)).transpose()?}),
        )
    }

    /// Hadamard response (reports: struct of `row` UInt32 and `report` Int8).
    #[classmethod]
    #[pyo3(signature = (*, epsilon, domain))]
    fn hadamard(
        _cls: &Bound<'_, PyType>,
        epsilon: f64,
        domain: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let domain: u32 = int_arg("domain", domain)?;
        build(json!({"kind": "hadamard", "epsilon": finite("epsilon", epsilon)?, "domain": domain}))
    }

    /// Seeded random +-1 cohorts (reports: struct of `cohort` UInt32 and `report` Int8).
    #[classmethod]
    #[pyo3(signature = (*, epsilon, domain, cohorts, seed=None))]
    fn cohort(
        _cls: &Bound<'_, PyType>,
        epsilon: f64,
        domain: &Bound<'_, PyAny>,
        cohorts: &Bound<'_, PyAny>,
        seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let domain: u32 = int_arg("domain", domain)?;
        let cohorts: u32 = int_arg("cohorts", cohorts)?;
        let seed: u64 = opt_int_arg("seed", seed)?.unwrap_or(0);
        build(json!({
            "kind": "cohort", "epsilon": finite("epsilon", epsilon)?, "domain": domain, "cohorts": cohorts, "seed": seed
        }))
    }

    /// A column-stochastic channel, `matrix[s][x] = P(signal s | type x)` (reports: UInt32).
    #[classmethod]
    #[pyo3(signature = (*, matrix))]
    fn matrix(_cls: &Bound<'_, PyType>, matrix: Vec<Vec<f64>>) -> PyResult<Self> {
        for (s, row) in matrix.iter().enumerate() {
            for (x, &v) in row.iter().enumerate() {
                finite(&format!("matrix[{s}][{x}]"), v)?;
            }
        }
        build(json!({"kind": "matrix", "matrix": matrix}))
    }

    /// L-GRR, memoized randomized response (docs/STATISTICS.md §1.9): a device keeps one
    /// GenRR response per value it holds, drawn at `epsilon_perm`, and reports once per
    /// `period` a second GenRR of it, so that one report is GenRR at `epsilon_1`. Reports
    /// come from a device's `client()`, which keeps the memo.
    #[classmethod]
    #[pyo3(signature = (*, epsilon_perm, epsilon_1, domain, period="1d"))]
    fn lgrr(
        _cls: &Bound<'_, PyType>,
        epsilon_perm: f64,
        epsilon_1: f64,
        domain: &Bound<'_, PyAny>,
        period: &str,
    ) -> PyResult<Self> {
        longitudinal(
            "lgrr",
            epsilon_perm,
            epsilon_1,
            int_arg("domain", domain)?,
            period,
        )
    }

    /// L-OSUE: OUE memoized at `epsilon_perm`, every bit flipped per report so that one
    /// report is OUE at `epsilon_1` (reports: the packed bits).
    #[classmethod]
    #[pyo3(signature = (*, epsilon_perm, epsilon_1, domain, period="1d"))]
    fn losue(
        _cls: &Bound<'_, PyType>,
        epsilon_perm: f64,
        epsilon_1: f64,
        domain: &Bound<'_, PyAny>,
        period: &str,
    ) -> PyResult<Self> {
        longitudinal(
            "losue",
            epsilon_perm,
            epsilon_1,
            int_arg("domain", domain)?,
            period,
        )
    }

    /// L-SUE (RAPPOR's construction): bit flipping memoized at `epsilon_perm`, every bit
    /// flipped again per report so that one report is bitflip at `epsilon_1`.
    #[classmethod]
    #[pyo3(signature = (*, epsilon_perm, epsilon_1, domain, period="1d"))]
    fn lsue(
        _cls: &Bound<'_, PyType>,
        epsilon_perm: f64,
        epsilon_1: f64,
        domain: &Bound<'_, PyAny>,
        period: &str,
    ) -> PyResult<Self> {
        longitudinal(
            "lsue",
            epsilon_perm,
            epsilon_1,
            int_arg("domain", domain)?,
            period,
        )
    }

    /// A device's client of this lgrr, losue or lsue mechanism: `store` keeps its memos
    /// (None: in memory, lost on restart, each value then spending epsilon_perm again; a
    /// `FileMemoStore` on a device; or any object with `load(metric) -> str | None` and
    /// `save(metric, text)`). A device reports each metric at most once per period;
    /// `same_period` "refuse" (default) or "repeat" (the first report's bytes again, for a
    /// send that failed); past `max_memoized_values` distinct values it stops reporting
    /// the metric.
    #[pyo3(signature = (*, store=None, max_memoized_values=None, same_period="refuse"))]
    fn client(
        &self,
        py: Python<'_>,
        store: Option<&Bound<'_, PyAny>>,
        max_memoized_values: Option<&Bound<'_, PyAny>>,
        same_period: &str,
    ) -> PyResult<LongitudinalClient> {
        let max_memoized_values: u32 = opt_int_arg("max_memoized_values", max_memoized_values)?
            .unwrap_or(DEFAULT_MAX_MEMOIZED_VALUES);
        let Engine::Longitudinal(l) = &self.engine else {
            return Err(config_error(format!(
                "client(): a {} mechanism keeps no memo; use randomize() or messages()",
                self.engine.kind()
            )));
        };
        LongitudinalClient::new(
            (**l).clone(),
            self.engine.fingerprint().unwrap_or_default(),
            Store::from_py(py, store)?,
            max_memoized_values,
            same_period,
        )
    }

    /// No randomization: the curator model (reports: the true UInt32 categories).
    #[classmethod]
    #[pyo3(signature = (*, domain))]
    fn raw(_cls: &Bound<'_, PyType>, domain: &Bound<'_, PyAny>) -> PyResult<Self> {
        let domain: u32 = int_arg("domain", domain)?;
        build(json!({"kind": "raw", "domain": domain}))
    }

    /// The mechanism kind, e.g. "grr".
    #[getter]
    fn kind(&self) -> &'static str {
        self.engine.kind()
    }

    /// The number of categories d.
    #[getter]
    fn domain(&self) -> usize {
        self.engine.domain()
    }

    /// The stream's `mechanism` table, as a dict.
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let text = self.table.to_string();
        let value = py.import("json")?.call_method1("loads", (text,))?;
        let dict = value.cast_into::<PyDict>()?;
        // null max_abs, k, g or pool_size means "the default": TOML has no null, so leave
        // the key out.
        for key in ["max_abs", "k", "g", "pool_size"] {
            if dict.get_item(key)?.is_some_and(|v| v.is_none()) {
                dict.del_item(key)?;
            }
        }
        Ok(dict)
    }

    /// Privatizes true categories `values` (0..d-1: a sequence of ints or an Arrow integer
    /// array) into reports in the Parquet report format of the mechanism: a
    /// `pyarrow.Array`, a struct array of the index and report columns for Hadamard,
    /// cohort and olh. Draws from a CSPRNG freshly seeded from the OS on every call (safe
    /// across `fork`, threads and process pools); `insecure_seed` makes the draws
    /// reproducible and NOT private (simulations and tests only, as the CLI's
    /// `--insecure-seed`). Raises ValueError for a value outside the domain.
    #[pyo3(signature = (values, *, insecure_seed=None))]
    fn randomize(
        &self,
        py: Python<'_>,
        values: &Bound<'_, PyAny>,
        insecure_seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        self.refuse_longitudinal("randomize")?;
        let insecure_seed: Option<u64> = opt_int_arg("insecure_seed", insecure_seed)?;
        let xs = true_values(values)?;
        let array = py.detach(|| {
            contained("randomizing", || match insecure_seed {
                Some(seed) => self.reports(&xs, &mut StdRng::seed_from_u64(seed)),
                None => self.reports(&xs, &mut client_rng().map_err(internal_error)?),
            })
        })?;
        to_pyarrow_array(py, array)
    }

    /// The mechanism fingerprint every message of `messages` carries: 8 hex digits of
    /// FNV-1a over the kind and parameters, as the server computes it for its stream
    /// (docs/clients.md); None for `raw`.
    #[getter]
    fn fingerprint(&self) -> Option<String> {
        self.engine.fingerprint().map(|f| format!("{f:08x}"))
    }

    /// Privatizes `values` as `randomize` does (a CSPRNG freshly seeded from the OS on
    /// every call, never a seed) and returns one
    /// Kafka message per value (docs/clients.md, "Kafka messages"), stamped with the fingerprint:
    /// `format` "json" or "binary", `ts` the event time in milliseconds, `groups` the
    /// group values in the stream's `group_by` order (a dict or (name, value) pairs).
    /// Raises ValueError for a bad value, format, or a group value longer than
    /// `max_group_value_bytes` (the stream's setting, default 128).
    #[pyo3(signature = (values, *, format="json", ts=None, groups=None, max_group_value_bytes=None))]
    fn messages<'py>(
        &self,
        py: Python<'py>,
        values: &Bound<'py, PyAny>,
        format: &str,
        ts: Option<&Bound<'py, PyAny>>,
        groups: Option<&Bound<'py, PyAny>>,
        max_group_value_bytes: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        self.refuse_longitudinal("messages")?;
        let ts: Option<i64> = opt_int_arg("ts", ts)?;
        // The stream setting's default.
        let max_group_value_bytes: usize =
            opt_int_arg("max_group_value_bytes", max_group_value_bytes)?.unwrap_or(128);
        let format = Format::parse(format).map_err(config_error)?;
        let groups = group_pairs(groups, self.kind_name())?;
        let envelope = Envelope {
            ts,
            groups: &groups,
            fingerprint: self.engine.fingerprint(),
        };
        check_envelope(&envelope, max_group_value_bytes).map_err(input_error)?;
        let xs = true_values(values)?;
        let encoded = py.detach(|| {
            contained("randomizing", || {
                let array = self.reports(&xs, &mut client_rng().map_err(internal_error)?)?;
                encode(&array, format, &envelope).map_err(input_error)
            })
        })?;
        Ok(encoded.iter().map(|m| PyBytes::new(py, m)).collect())
    }

    fn __repr__(&self) -> String {
        format!("Mechanism({})", self.table)
    }
}

impl Mechanism {
    /// A longitudinal mechanism's reports need a device's memo: `randomize` and `messages`
    /// would draw a new memo every time, spending epsilon_perm on every report.
    fn refuse_longitudinal(&self, what: &str) -> PyResult<()> {
        if matches!(self.engine, Engine::Longitudinal(_)) {
            return Err(config_error(format!(
                "{what}(): a {} device reports from its memo, once per period: use \
                 client(store=...).report() or .message(); a memo drawn anew for every \
                 report would spend epsilon_perm every time",
                self.engine.kind()
            )));
        }
        Ok(())
    }

    /// The engine's randomizer, for the test-only replay (`conformance.rs`).
    #[cfg(feature = "conformance-replay")]
    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The mechanism kind, for Rust callers (the getter `kind` is Python's).
    pub(crate) fn kind_name(&self) -> &'static str {
        self.engine.kind()
    }

    /// `values` privatized with `rng`, in the layout `randomize` returns: the one report
    /// column, or a struct of the index and report columns.
    pub(crate) fn reports<R: Rng + ?Sized>(&self, xs: &[u32], rng: &mut R) -> PyResult<ArrayRef> {
        let columns = privatize_batch(&self.engine, xs, rng).map_err(input_error)?;
        match columns.as_slice() {
            [report] => Ok(report.clone()),
            [index, report] => {
                let index_name = match self.engine.kind() {
                    "hadamard" => "row",
                    "olh" => "seed",
                    _ => "cohort",
                };
                let fields = vec![
                    Field::new(index_name, index.data_type().clone(), false),
                    Field::new("report", report.data_type().clone(), false),
                ];
                let array =
                    StructArray::try_new(fields.into(), vec![index.clone(), report.clone()], None)
                        .map_err(internal_error)?;
                Ok(Arc::new(array))
            }
            _ => Err(internal_error("the randomizer returned no report column")),
        }
    }
}

/// True categories as u32: a sequence of ints, or an Arrow array of an integer type (cast
/// without wrapping: a negative value or one past u32 is refused). Floats, strings and
/// booleans are refused naming their type, never truncated or parsed.
fn true_values(values: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
    if !values.hasattr("__arrow_c_array__")? {
        return values.extract::<Vec<u32>>().map_err(|e| {
            input_error(format!(
                "values: expected categories (ints from 0 to d - 1): {e}"
            ))
        });
    }
    let array = import_array(values)?;
    array
        .to_data()
        .validate_full()
        .map_err(|e| input_error(format!("values: not valid Arrow data: {e}")))?;
    if !array.data_type().is_integer() {
        return Err(input_error(format!(
            "values: an array of {}; categories must be integers from 0 to d - 1 (cast \
             explicitly, e.g. pyarrow.compute.cast(values, \"uint32\"), if truncating or \
             parsing is meant)",
            array.data_type()
        )));
    }
    if array.null_count() > 0 {
        return Err(input_error(format!(
            "values: {} of {} values are null; every value must be a category",
            array.null_count(),
            array.len()
        )));
    }
    let options = CastOptions {
        safe: false,
        ..Default::default()
    };
    let cast = cast_with_options(array.as_ref(), &DataType::UInt32, &options)
        .map_err(|e| input_error(format!("values of type {}: {e}", array.data_type())))?;
    let ints = cast
        .as_any()
        .downcast_ref::<UInt32Array>()
        .ok_or_else(|| internal_error("values: the cast to UInt32 gave another type"))?;
    Ok(ints.values().to_vec())
}
