//! The Python half of the golden conformance suite (conformance/README.md), compiled only
//! with the `conformance-replay` feature, which scripts/python_env.sh's test build turns
//! on and `pip install ./python` never does: a replayed word source would be a seed
//! option, which defeats local privacy. `_conformance` runs the words through the very
//! path `Mechanism.randomize` and `Mechanism.messages` take, with the replay in place of
//! the CSPRNG.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use rand::RngCore;

use crate::arrow_out::to_pyarrow_array;
use crate::errors::{contained, input_error};
use crate::group_values::group_pairs;
use crate::mechanism::Mechanism;
use crate::messages::{encode, Envelope, Format};

/// Replays fixed 32-bit words; a 64-bit word is two of them, low half first (as rand_core
/// builds `next_u64`). Past the end it yields zeros and counts them, so that a sampler
/// reading too much fails the comparison instead of panicking.
struct Replay {
    words: Vec<u32>,
    at: usize,
}

impl RngCore for Replay {
    fn next_u32(&mut self) -> u32 {
        let w = self.words.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        w
    }
    fn next_u64(&mut self) -> u64 {
        let lo = u64::from(self.next_u32());
        (u64::from(self.next_u32()) << 32) | lo
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        // The randomizers read words; bytes come whole words at a time, counted the same.
        for chunk in dest.chunks_mut(4) {
            let w = self.next_u32().to_le_bytes();
            chunk.copy_from_slice(&w[..chunk.len()]);
        }
    }
}

/// Replays `words` through `mechanism`'s randomizer on `value`: a dict of the report
/// array (`randomize`'s layout), the number of words read, and the JSON and binary
/// messages, plain and stamped with the fingerprint.
#[pyfunction]
#[pyo3(signature = (mechanism, value, words, ts=None, groups=None))]
pub fn _conformance<'py>(
    py: Python<'py>,
    mechanism: &Mechanism,
    value: u32,
    words: Vec<u32>,
    ts: Option<i64>,
    groups: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let groups = group_pairs(groups, mechanism.kind_name())?;
    let mut replay = Replay { words, at: 0 };
    let array = contained("replaying", || mechanism.reports(&[value], &mut replay))?;
    let out = PyDict::new(py);
    out.set_item("consumed", replay.at)?;
    for (stamp, suffix) in [(None, ""), (mechanism.engine().fingerprint(), "_stamped")] {
        let envelope = Envelope {
            ts,
            groups: &groups,
            fingerprint: stamp,
        };
        for (format, name) in [(Format::Json, "json"), (Format::Binary, "binary")] {
            let messages = encode(&array, format, &envelope).map_err(input_error)?;
            let message = messages.first().map(Vec::as_slice).unwrap_or_default();
            out.set_item(format!("{name}{suffix}"), PyBytes::new(py, message))?;
        }
    }
    out.set_item("reports", to_pyarrow_array(py, array)?)?;
    Ok(out)
}

/// Replays one longitudinal step (conformance/README.md, "Longitudinal"): a client of
/// `mechanism` whose store holds `memo_before` (canonical JSON) reports `value` for
/// `metric` at `ts` from `words`. A dict of the words read, the report (int or bytes) or the
/// refusal's name, the memo after (canonical JSON), and the JSON and binary messages
/// stamped as `LongitudinalClient.message` stamps them.
#[pyfunction]
#[pyo3(signature = (mechanism, metric, value, ts, words, memo_before=None, max_memoized_values=16, same_period="refuse", groups=None))]
#[allow(clippy::too_many_arguments)]
pub fn _conformance_longitudinal<'py>(
    py: Python<'py>,
    mechanism: &Mechanism,
    metric: &str,
    value: u32,
    ts: i64,
    words: Vec<u32>,
    memo_before: Option<&str>,
    max_memoized_values: u32,
    same_period: &str,
    groups: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    use crate::longitudinal::{report_array, LongitudinalClient, MemoryMemoStore, Store};
    use ldpstream_engine::mechanism::{Mechanism as Engine, Response};

    let Engine::Longitudinal(l) = mechanism.engine() else {
        return Err(input_error("not a longitudinal mechanism"));
    };
    let store = Py::new(py, MemoryMemoStore::new_py())?;
    if let Some(memo) = memo_before {
        store.get().save_text(metric, memo)?;
    }
    let fingerprint = mechanism.engine().fingerprint().unwrap_or_default();
    let client = LongitudinalClient::new(
        (**l).clone(),
        fingerprint,
        Store::Memory(store.clone_ref(py)),
        max_memoized_values,
        same_period,
    )?;
    let mut replay = Replay { words, at: 0 };
    let result = contained("replaying", || {
        Ok(client.report_with(metric, value, ts, &mut replay))
    })?;
    let out = PyDict::new(py);
    out.set_item("consumed", replay.at)?;
    out.set_item("memo_after", store.get().load_text(metric)?)?;
    let groups = group_pairs(groups, l.kind())?;
    match result {
        Ok(report) => {
            match &report {
                Response::Category(c) => out.set_item("report", *c)?,
                Response::Bits(b) => out.set_item("report", PyBytes::new(py, b))?,
            }
            out.set_item("refusal", py.None())?;
            let array = report_array(&report)?;
            for (stamp, suffix) in [(None, ""), (Some(fingerprint), "_stamped")] {
                let envelope = Envelope {
                    ts: Some(ts),
                    groups: &groups,
                    fingerprint: stamp,
                };
                for (format, name) in [(Format::Json, "json"), (Format::Binary, "binary")] {
                    let messages = encode(&array, format, &envelope).map_err(input_error)?;
                    let message = messages.first().map(Vec::as_slice).unwrap_or_default();
                    out.set_item(format!("{name}{suffix}"), PyBytes::new(py, message))?;
                }
            }
        }
        Err(e) => {
            out.set_item("report", py.None())?;
            out.set_item("refusal", e.code())?;
        }
    }
    Ok(out)
}
