//! The device's memo: per metric, the first-round response of every value it has held,
//! and what the one-report-per-period rule needs (the last period, the last report).
//!
//! The memo holds the device's true values as keys and responses from which they can be
//! estimated: it is as sensitive as the values themselves and must never leave the device
//! (docs/clients.md). Losing it costs privacy instead: a new memo of a value spends
//! `epsilon_perm` again.
//!
//! Its canonical JSON (version 1) is the same in every client (conformance/README.md,
//! "Longitudinal"), so a memo file is portable and the golden cases can pin it:
//! `{"version":1,"kind":"lgrr","fingerprint":"1a2b3c4d","period_ms":86400000,
//! "values":[[3,1]],"last_period":20454,"last_report":2,"stopped":false,"reports":1}`,
//! a unary response as the hex of its packed bytes.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::Response;

/// The memo format version this build reads and writes.
pub const MEMO_VERSION: u32 = 1;

/// One metric's memo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricMemo {
    /// The mechanism kind it was drawn under (`lgrr`, `losue`, `lsue`).
    pub kind: String,
    /// The mechanism's fingerprint: a memo is used only under the law it was drawn from.
    pub fingerprint: u32,
    pub period_ms: u64,
    /// Value → its first-round response, by value.
    pub values: BTreeMap<u32, Response>,
    /// The period index ⌊ts / period⌋ of the last report, if any.
    pub last_period: Option<i64>,
    /// The last report, which `same_period = "repeat"` returns again.
    pub last_report: Option<Response>,
    /// Set when a new value would have passed `max_memoized_values`: the device no longer
    /// reports this metric.
    pub stopped: bool,
    /// Reports made from this memo.
    pub reports: u64,
}

impl MetricMemo {
    pub fn new(kind: &str, fingerprint: u32, period_ms: u64) -> Self {
        MetricMemo {
            kind: kind.to_string(),
            fingerprint,
            period_ms,
            values: BTreeMap::new(),
            last_period: None,
            last_report: None,
            stopped: false,
            reports: 0,
        }
    }

    /// The canonical JSON text: one line, no spaces, keys in the documented order (the
    /// struct's; a `serde_json::Value` would sort them, or not, by a feature flag).
    pub fn to_json(&self) -> String {
        let form = MemoForm {
            version: MEMO_VERSION,
            kind: self.kind.clone(),
            fingerprint: format!("{:08x}", self.fingerprint),
            period_ms: self.period_ms,
            values: self
                .values
                .iter()
                .map(|(&v, r)| (v, ResponseForm::from(r)))
                .collect(),
            last_period: self.last_period,
            last_report: self.last_report.as_ref().map(ResponseForm::from),
            stopped: self.stopped,
            reports: self.reports,
        };
        // A struct of strings, integers and booleans always serializes.
        serde_json::to_string(&form).unwrap_or_default()
    }

    /// Reads a memo, refusing what this build did not write (another version, a malformed
    /// response, values out of order).
    pub fn from_json_value(value: serde_json::Value) -> Result<Self, MemoFormatError> {
        let form: MemoForm = serde_json::from_value(value).map_err(|e| MemoFormatError {
            message: e.to_string(),
        })?;
        form.into_memo()
    }

    pub fn from_json(text: &str) -> Result<Self, MemoFormatError> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| MemoFormatError {
            message: e.to_string(),
        })?;
        MetricMemo::from_json_value(value)
    }
}

/// A memo that does not read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a memo of format version {MEMO_VERSION}: {message}")]
pub struct MemoFormatError {
    pub message: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MemoForm {
    version: u32,
    kind: String,
    fingerprint: String,
    period_ms: u64,
    values: Vec<(u32, ResponseForm)>,
    last_period: Option<i64>,
    last_report: Option<ResponseForm>,
    stopped: bool,
    reports: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum ResponseForm {
    Category(u32),
    Bits(String),
}

impl From<&Response> for ResponseForm {
    fn from(r: &Response) -> Self {
        match r {
            Response::Category(c) => ResponseForm::Category(*c),
            Response::Bits(b) => ResponseForm::Bits(b.iter().map(|x| format!("{x:02x}")).collect()),
        }
    }
}

impl ResponseForm {
    fn into_response(self) -> Result<Response, MemoFormatError> {
        match self {
            ResponseForm::Category(c) => Ok(Response::Category(c)),
            ResponseForm::Bits(hex) => {
                let bad = || MemoFormatError {
                    message: format!("response {hex:?} is not lowercase hex of whole bytes"),
                };
                if hex.is_empty() || hex.len() % 2 != 0 {
                    return Err(bad());
                }
                (0..hex.len())
                    .step_by(2)
                    .map(|i| {
                        hex.get(i..i + 2)
                            .filter(|h| h.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')))
                            .and_then(|h| u8::from_str_radix(h, 16).ok())
                            .ok_or_else(bad)
                    })
                    .collect::<Result<Vec<u8>, _>>()
                    .map(Response::Bits)
            }
        }
    }
}

impl MemoForm {
    fn into_memo(self) -> Result<MetricMemo, MemoFormatError> {
        let fail = |message: String| Err(MemoFormatError { message });
        if self.version != MEMO_VERSION {
            return fail(format!("version {}", self.version));
        }
        let fingerprint = match u32::from_str_radix(&self.fingerprint, 16) {
            Ok(f) if self.fingerprint.len() == 8 => f,
            _ => return fail(format!("fingerprint {:?}", self.fingerprint)),
        };
        let mut values = BTreeMap::new();
        let mut last = None;
        for (v, r) in self.values {
            if last.is_some_and(|l| l >= v) {
                return fail(format!("values not in increasing order at {v}"));
            }
            last = Some(v);
            values.insert(v, r.into_response()?);
        }
        Ok(MetricMemo {
            kind: self.kind,
            fingerprint,
            period_ms: self.period_ms,
            values,
            last_period: self.last_period,
            last_report: self
                .last_report
                .map(ResponseForm::into_response)
                .transpose()?,
            stopped: self.stopped,
            reports: self.reports,
        })
    }
}

/// A store failed to load or save (the file adapter's I/O, a Python store's exception).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct MemoStoreError {
    pub message: String,
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl MemoStoreError {
    pub fn new(message: impl Into<String>) -> Self {
        MemoStoreError {
            message: message.into(),
            source: None,
        }
    }

    pub fn with_source(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        MemoStoreError {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }
}

/// Where a device keeps its memos. `save` must be durable when it returns Ok: the device
/// saves a new memo before it draws the report from it, and the period before it returns
/// the report, so a crash can lose a report but never redraw a memo or send a second
/// report in a period.
pub trait MemoStore {
    fn load(&mut self, metric: &str) -> Result<Option<MetricMemo>, MemoStoreError>;
    fn save(&mut self, metric: &str, memo: &MetricMemo) -> Result<(), MemoStoreError>;
}

/// The default store: the process's memory. A restart forgets every memo, so each value
/// then spends `epsilon_perm` again; production devices use a durable store
/// (`ldpstream_connectors::memo_file::FileMemoStore`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InMemoryMemoStore {
    metrics: HashMap<String, MetricMemo>,
}

impl InMemoryMemoStore {
    pub fn new() -> Self {
        Self::default()
    }
}

impl MemoStore for InMemoryMemoStore {
    fn load(&mut self, metric: &str) -> Result<Option<MetricMemo>, MemoStoreError> {
        Ok(self.metrics.get(metric).cloned())
    }

    fn save(&mut self, metric: &str, memo: &MetricMemo) -> Result<(), MemoStoreError> {
        self.metrics.insert(metric.to_string(), memo.clone());
        Ok(())
    }
}

impl<S: MemoStore + ?Sized> MemoStore for &mut S {
    fn load(&mut self, metric: &str) -> Result<Option<MetricMemo>, MemoStoreError> {
        (**self).load(metric)
    }

    fn save(&mut self, metric: &str, memo: &MetricMemo) -> Result<(), MemoStoreError> {
        (**self).save(metric, memo)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> MetricMemo {
        let mut m = MetricMemo::new("losue", 0x0012_abcd, 86_400_000);
        m.values.insert(7, Response::Bits(vec![0x0a, 0x01]));
        m.values.insert(2, Response::Bits(vec![0xff, 0x00]));
        m.last_period = Some(-3);
        m.last_report = Some(Response::Bits(vec![0x00, 0x01]));
        m.reports = 4;
        m
    }

    #[test]
    fn the_canonical_json_reads_back() {
        let m = sample();
        let text = m.to_json();
        assert_eq!(
            text,
            "{\"version\":1,\"kind\":\"losue\",\"fingerprint\":\"0012abcd\",\"period_ms\":86400000,\"values\":[[2,\"ff00\"],[7,\"0a01\"]],\"last_period\":-3,\"last_report\":\"0001\",\"stopped\":false,\"reports\":4}"
        );
        assert_eq!(MetricMemo::from_json(&text).unwrap(), m);
        let mut g = MetricMemo::new("lgrr", 1, 1000);
        g.values.insert(3, Response::Category(0));
        assert_eq!(MetricMemo::from_json(&g.to_json()).unwrap(), g);
    }

    #[test]
    fn malformed_memos_are_refused() {
        let good = sample().to_json();
        for (from, to) in [
            ("\"version\":1", "\"version\":2"),
            ("0012abcd", "12abcd"),
            ("[[2,\"ff00\"],[7", "[[7,\"ff00\"],[7"),
            ("\"ff00\"", "\"FF00\""),
            ("\"ff00\"", "\"f00\""),
            ("\"reports\":4", "\"reports\":4,\"extra\":1"),
            ("\"stopped\":false,", ""),
        ] {
            let bad = good.replace(from, to);
            assert_ne!(bad, good);
            assert!(MetricMemo::from_json(&bad).is_err(), "{bad}");
        }
    }
}
