//! Kafka message decoding straight into Arrow builders, JSON or the compact binary layout.
//!
//! JSON: one object per message with the stream's column names, e.g.
//! `{"report": 3, "ts": 1767225600000, "group": "a"}`; bit-flip reports are the hex of the
//! packed bytes (`"report": "0a01"`), Hadamard and cohort reports carry `row`/`cohort`
//! beside a ±1 `report`, OLH reports carry `seed` (the pool index) beside the bucket
//! `report` (`{"seed": 17, "report": 3}`), noise reports are arrays of d numbers, subset
//! reports arrays of k category numbers (`"report": [0, 7, 3]`); `ts` is milliseconds since
//! the epoch (optional). `{"end": true}` is the end marker.
//!
//! Binary (little-endian): byte 0 = 1 (a report) or 0xFF (the end marker); bytes 1..9 =
//! event time, i64 milliseconds (i64::MIN for none); then the report: `u32` (grr, matrix,
//! raw), ⌈d/8⌉ bytes (bitflip, oue), `u32` index + `i8` (hadamard, cohort), `u32` seed
//! index and `u32` bucket (olh), d × `f32` (gauss, laplace), a `u16` item count and that
//! many `u32` (subset); then per `group_by` column a `u16` length and that many UTF-8 bytes.
//! A GenRR report is 13 bytes.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, FixedSizeBinaryBuilder, FixedSizeListBuilder, Float64Builder, Int8Builder,
    ListBuilder, StringBuilder, TimestampMillisecondBuilder, UInt32Builder,
};
use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use arrow::record_batch::RecordBatch;
use ldpstream_config::{EventTime, MessageFormat, StreamConfig};
use ldpstream_engine::fold::ReportCheck;
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::sketch::RejectReason;

use super::json_message::{self, JsonFields};
use crate::error::ConnectorError;

/// Why a message was not decoded; the label of `ldpstream_reports_rejected_total`.
pub const BAD_MESSAGE: &str = "bad_message";
/// A message whose group value is longer than the stream's `max_group_value_bytes`.
pub const GROUP_VALUE_TOO_LONG: &str = "group_value_too_long";
/// A message whose mechanism fingerprint is not the stream's (README "Clients").
pub const MECHANISM_MISMATCH: &str = "mechanism_mismatch";
/// Every label a message refused at decode is counted under.
pub const MESSAGE_REASONS: [&str; 3] = [BAD_MESSAGE, GROUP_VALUE_TOO_LONG, MECHANISM_MISMATCH];
/// The optional JSON field with the client's mechanism fingerprint, 8 hex digits.
pub const FINGERPRINT_FIELD: &str = "fingerprint";

/// A message that was not decoded: the reason it is counted under, and what was wrong
/// (the dead letter's `ldpstream-reason` header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadMessage {
    pub reason: &'static str,
    pub detail: String,
}

impl From<String> for BadMessage {
    fn from(detail: String) -> Self {
        BadMessage {
            reason: BAD_MESSAGE,
            detail,
        }
    }
}

impl std::fmt::Display for BadMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}

/// What a message turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded {
    Report,
    /// Appended, but the fold will reject it for this reason (and count it in the
    /// record); the source dead-letters the original bytes.
    Invalid(RejectReason),
    EndMarker,
}

enum ReportBuilder {
    U32(UInt32Builder),
    Bits(FixedSizeBinaryBuilder, usize),
    Indexed(UInt32Builder, Int8Builder),
    /// OLH: the seed index and the bucket, both u32.
    Pooled(UInt32Builder, UInt32Builder),
    Vector(FixedSizeListBuilder<Float64Builder>, usize),
    /// Subset reports: any length is appended, the fold judges it (`subset_wrong_size`).
    List(ListBuilder<UInt32Builder>),
}

/// Builders for one batch of a stream's reports.
pub struct MessageDecoder {
    format: MessageFormat,
    report_name: String,
    index_name: Option<String>,
    ts_name: String,
    group_names: Vec<String>,
    max_group_value_bytes: usize,
    report: ReportBuilder,
    ts: TimestampMillisecondBuilder,
    groups: Vec<StringBuilder>,
    rows: usize,
    event_time: EventTime,
    check: ReportCheck,
    /// One binary noise vector, reused across messages.
    scratch: Vec<f64>,
    /// One binary subset report, reused across messages.
    items: Vec<u32>,
    /// The stream's mechanism fingerprint, which a stamped message must carry.
    fingerprint: Option<u32>,
}

fn bad(what: impl Into<String>) -> BadMessage {
    BadMessage::from(what.into())
}

/// The u32 index field `name` of a JSON report (a Hadamard row, a cohort, an OLH seed).
fn json_index(m: &JsonFields<'_>, name: &str) -> Result<u32, BadMessage> {
    m.integer(name)
        .ok()
        .flatten()
        .and_then(|x| u32::try_from(x).ok())
        .ok_or_else(|| bad(format!("JSON: {name:?} is not a u32")))
}

impl MessageDecoder {
    pub fn new(stream: &StreamConfig, mechanism: &Mechanism, format: MessageFormat) -> Self {
        let d = mechanism.domain();
        let (report, index_name) = match mechanism {
            Mechanism::Grr(_) | Mechanism::Channel(_) | Mechanism::Raw { .. } => {
                (ReportBuilder::U32(UInt32Builder::new()), None)
            }
            Mechanism::BitFlip(m) => (
                ReportBuilder::Bits(
                    FixedSizeBinaryBuilder::new(m.report_bytes() as i32),
                    m.report_bytes(),
                ),
                None,
            ),
            Mechanism::Hadamard(_) => (
                ReportBuilder::Indexed(UInt32Builder::new(), Int8Builder::new()),
                Some(stream.columns.row.clone()),
            ),
            Mechanism::Cohort(_) => (
                ReportBuilder::Indexed(UInt32Builder::new(), Int8Builder::new()),
                Some(stream.columns.cohort.clone()),
            ),
            Mechanism::Subset(_) => (
                ReportBuilder::List(
                    ListBuilder::new(UInt32Builder::new()).with_field(Arc::new(Field::new(
                        "item",
                        DataType::UInt32,
                        false,
                    ))),
                ),
                None,
            ),
            Mechanism::Olh(_) => (
                ReportBuilder::Pooled(UInt32Builder::new(), UInt32Builder::new()),
                Some(stream.columns.seed.clone()),
            ),
            Mechanism::Noise(_) => (
                ReportBuilder::Vector(
                    FixedSizeListBuilder::new(Float64Builder::new(), d as i32)
                        .with_field(Arc::new(Field::new("item", DataType::Float64, false))),
                    d,
                ),
                None,
            ),
        };
        MessageDecoder {
            format,
            report_name: stream.columns.report.clone(),
            index_name,
            ts_name: stream.columns.ts.clone(),
            group_names: stream.columns.group_by.clone(),
            max_group_value_bytes: stream.max_group_value_bytes,
            report,
            ts: TimestampMillisecondBuilder::new().with_timezone("UTC"),
            groups: stream
                .columns
                .group_by
                .iter()
                .map(|_| StringBuilder::new())
                .collect(),
            rows: 0,
            event_time: EventTime::Auto,
            check: ReportCheck::new(mechanism),
            scratch: Vec::new(),
            items: Vec::new(),
            fingerprint: mechanism.fingerprint(),
        }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Appends one message. On error nothing is appended and the reason is returned.
    /// Where event times come from (default: the payload's `ts`, else the Kafka
    /// timestamp given to [`Self::push_with_time`]).
    pub fn with_event_time(mut self, event_time: EventTime) -> Self {
        self.event_time = event_time;
        self
    }

    pub fn push(&mut self, payload: &[u8]) -> Result<Decoded, BadMessage> {
        self.push_with_time(payload, None)
    }

    /// Appends one message whose Kafka record timestamp (ms) is `kafka_ts`.
    pub fn push_with_time(
        &mut self,
        payload: &[u8],
        kafka_ts: Option<i64>,
    ) -> Result<Decoded, BadMessage> {
        match self.format {
            MessageFormat::Json => self.push_json(payload, kafka_ts),
            MessageFormat::Binary => self.push_binary(payload, kafka_ts),
        }
    }

    fn event_time(&self, payload_ts: Option<i64>, kafka_ts: Option<i64>) -> Option<i64> {
        match self.event_time {
            EventTime::Auto => payload_ts.or(kafka_ts),
            EventTime::Payload => payload_ts,
            EventTime::Kafka => kafka_ts,
            EventTime::None => None,
        }
    }

    fn push_json(&mut self, payload: &[u8], kafka_ts: Option<i64>) -> Result<Decoded, BadMessage> {
        let m = JsonFields::parse(payload)?;
        if m.is_end_marker() {
            return Ok(Decoded::EndMarker);
        }
        if let Some(f) = m
            .string(FINGERPRINT_FIELD)
            .map_err(|_| bad("JSON: fingerprint is not a string"))?
        {
            let stamped = u32::from_str_radix(&f, 16)
                .ok()
                .filter(|_| f.len() == 8)
                .ok_or_else(|| bad("JSON: fingerprint is not 8 hex digits"))?;
            self.check_fingerprint(stamped)?;
        }
        let report = m
            .raw(&self.report_name)
            .ok_or_else(|| bad(format!("JSON: no {:?} field", self.report_name)))?;
        let ts = match self.event_time {
            EventTime::Auto | EventTime::Payload => m
                .integer(&self.ts_name)
                .map_err(|_| bad("JSON: ts is not integer ms"))?,
            EventTime::Kafka | EventTime::None => None,
        };
        let ts = self.event_time(ts, kafka_ts);
        let mut groups = Vec::with_capacity(self.group_names.len());
        for g in &self.group_names {
            let value = m
                .string(g)
                .map_err(|_| bad(format!("JSON: group {g:?} is not a string")))?;
            if let Some(v) = &value {
                self.check_group_length(g, v)?;
            }
            groups.push(value);
        }
        // Validate everything before appending, so a bad message leaves no partial row.
        let verdict = match &mut self.report {
            ReportBuilder::U32(b) => {
                let x = report
                    .parse::<u32>()
                    .map_err(|_| bad("JSON: report is not a u32"))?;
                b.append_value(x);
                self.check.category(x)
            }
            ReportBuilder::Bits(b, width) => {
                let hex =
                    json_message::string(report).map_err(|_| bad("JSON: report is not hex"))?;
                let bytes = decode_hex(&hex).ok_or_else(|| bad("JSON: report is not hex"))?;
                if bytes.len() != *width {
                    return Err(bad(format!(
                        "JSON: {} report bytes, expected {width}",
                        bytes.len()
                    )));
                }
                b.append_value(&bytes).map_err(|e| bad(e.to_string()))?;
                self.check.bits(&bytes)
            }
            ReportBuilder::Indexed(idx, sign) => {
                let i = json_index(&m, self.index_name.as_deref().unwrap_or("row"))?;
                let s = report
                    .parse::<i8>()
                    .map_err(|_| bad("JSON: report is not an i8"))?;
                idx.append_value(i);
                sign.append_value(s);
                self.check.indexed(i, s)
            }
            ReportBuilder::Pooled(idx, bucket) => {
                let i = json_index(&m, self.index_name.as_deref().unwrap_or("seed"))?;
                let y = report
                    .parse::<u32>()
                    .map_err(|_| bad("JSON: report is not a u32"))?;
                idx.append_value(i);
                bucket.append_value(y);
                self.check.pooled(i, y)
            }
            ReportBuilder::Vector(b, d) => {
                let values = json_message::numbers(report)
                    .ok()
                    .filter(|v| v.len() == *d)
                    .ok_or_else(|| bad(format!("JSON: report is not an array of {d} numbers")))?;
                b.values().append_slice(&values);
                b.append(true);
                self.check.vector(&values)
            }
            ReportBuilder::List(b) => {
                let items = json_message::u32s(report)
                    .map_err(|_| bad("JSON: report is not an array of u32 categories"))?;
                b.values().append_slice(&items);
                b.append(true);
                self.check.subset(&items)
            }
        };
        self.ts.append_option(ts);
        for (b, g) in self.groups.iter_mut().zip(groups) {
            b.append_option(g);
        }
        self.rows += 1;
        Ok(verdict.map_or(Decoded::Report, Decoded::Invalid))
    }

    /// A client randomizing under other parameters (an old version after a change of ε or
    /// d) would be folded into estimates that assume the stream's: refused, counted and
    /// dead-lettered instead.
    fn check_fingerprint(&self, stamped: u32) -> Result<(), BadMessage> {
        if self.fingerprint == Some(stamped) {
            return Ok(());
        }
        Err(BadMessage {
            reason: MECHANISM_MISMATCH,
            detail: format!(
                "mechanism fingerprint {stamped:08x}, the stream's is {}",
                self.fingerprint.map_or(
                    "none (no client randomizes this mechanism)".to_string(),
                    |f| format!("{f:08x}")
                )
            ),
        })
    }

    /// A producer controls group strings, and every pane and metric series keeps a copy:
    /// a value over the stream's bound is refused before anything is appended.
    fn check_group_length(&self, column: &str, value: &str) -> Result<(), BadMessage> {
        if value.len() <= self.max_group_value_bytes {
            return Ok(());
        }
        Err(BadMessage {
            reason: GROUP_VALUE_TOO_LONG,
            detail: format!(
                "group {column:?} is {} bytes, above max_group_value_bytes = {}",
                value.len(),
                self.max_group_value_bytes
            ),
        })
    }

    fn push_binary(&mut self, p: &[u8], kafka_ts: Option<i64>) -> Result<Decoded, BadMessage> {
        let short = || bad("binary: message too short");
        // Kind 2 is kind 1 with the client's fingerprint (u32) after the kind byte.
        let p = match p.first() {
            Some(0xFF) => return Ok(Decoded::EndMarker),
            Some(1) => &p[1..],
            Some(2) => {
                let f = p.get(1..5).ok_or_else(short)?;
                self.check_fingerprint(u32::from_le_bytes([f[0], f[1], f[2], f[3]]))?;
                &p[5..]
            }
            _ => return Err(bad("binary: unknown message kind")),
        };
        let ts_bytes: [u8; 8] = p
            .get(..8)
            .ok_or_else(short)?
            .try_into()
            .map_err(|_| short())?;
        let ts = i64::from_le_bytes(ts_bytes);
        let body = &p[8..];
        let report_len = match &self.report {
            ReportBuilder::U32(_) => 4,
            ReportBuilder::Bits(_, w) => *w,
            ReportBuilder::Indexed(..) => 5,
            ReportBuilder::Pooled(..) => 8,
            ReportBuilder::Vector(_, d) => 4 * d,
            ReportBuilder::List(_) => {
                let len = body.get(..2).ok_or_else(short)?;
                2 + 4 * u16::from_le_bytes([len[0], len[1]]) as usize
            }
        };
        let (report, mut rest) = (
            body.get(..report_len).ok_or_else(short)?,
            &body[report_len..],
        );
        let mut groups = Vec::with_capacity(self.group_names.len());
        for g in &self.group_names {
            let len = rest.get(..2).ok_or_else(short)?;
            let len = u16::from_le_bytes([len[0], len[1]]) as usize;
            let s = rest.get(2..2 + len).ok_or_else(short)?;
            let value = std::str::from_utf8(s).map_err(|_| bad("binary: group is not UTF-8"))?;
            self.check_group_length(g, value)?;
            groups.push(value);
            rest = &rest[2 + len..];
        }
        if !rest.is_empty() {
            return Err(bad("binary: trailing bytes"));
        }
        let verdict = match &mut self.report {
            ReportBuilder::U32(b) => {
                let x = u32::from_le_bytes([report[0], report[1], report[2], report[3]]);
                b.append_value(x);
                self.check.category(x)
            }
            ReportBuilder::Bits(b, _) => {
                b.append_value(report).map_err(|e| bad(e.to_string()))?;
                self.check.bits(report)
            }
            ReportBuilder::Indexed(idx, sign) => {
                let i = u32::from_le_bytes([report[0], report[1], report[2], report[3]]);
                let s = report[4] as i8;
                idx.append_value(i);
                sign.append_value(s);
                self.check.indexed(i, s)
            }
            ReportBuilder::Pooled(idx, bucket) => {
                let i = u32::from_le_bytes([report[0], report[1], report[2], report[3]]);
                let y = u32::from_le_bytes([report[4], report[5], report[6], report[7]]);
                idx.append_value(i);
                bucket.append_value(y);
                self.check.pooled(i, y)
            }
            ReportBuilder::Vector(b, _) => {
                self.scratch.clear();
                self.scratch.extend(
                    report
                        .chunks_exact(4)
                        .map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]]))),
                );
                b.values().append_slice(&self.scratch);
                b.append(true);
                self.check.vector(&self.scratch)
            }
            ReportBuilder::List(b) => {
                self.items.clear();
                self.items.extend(
                    report[2..]
                        .chunks_exact(4)
                        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
                );
                b.values().append_slice(&self.items);
                b.append(true);
                self.check.subset(&self.items)
            }
        };
        let ts = self.event_time((ts != i64::MIN).then_some(ts), kafka_ts);
        self.ts.append_option(ts);
        for (b, g) in self.groups.iter_mut().zip(groups) {
            b.append_value(g);
        }
        self.rows += 1;
        Ok(verdict.map_or(Decoded::Report, Decoded::Invalid))
    }

    /// The rows appended so far as a batch in the stream's schema; the builders restart.
    pub fn finish(&mut self) -> Result<RecordBatch, ConnectorError> {
        let mut fields = Vec::new();
        let mut columns: Vec<ArrayRef> = Vec::new();
        let report_name = self.report_name.clone();
        match &mut self.report {
            ReportBuilder::U32(b) => columns.push(Arc::new(b.finish())),
            ReportBuilder::Bits(b, _) => columns.push(Arc::new(b.finish())),
            ReportBuilder::Indexed(idx, sign) => {
                let a = Arc::new(idx.finish());
                fields.push(Field::new(
                    self.index_name.as_deref().unwrap_or("row"),
                    DataType::UInt32,
                    false,
                ));
                columns.push(a);
                columns.push(Arc::new(sign.finish()));
            }
            ReportBuilder::Pooled(idx, bucket) => {
                fields.push(Field::new(
                    self.index_name.as_deref().unwrap_or("seed"),
                    DataType::UInt32,
                    false,
                ));
                columns.push(Arc::new(idx.finish()));
                columns.push(Arc::new(bucket.finish()));
            }
            ReportBuilder::Vector(b, _) => columns.push(Arc::new(b.finish())),
            ReportBuilder::List(b) => columns.push(Arc::new(b.finish())),
        }
        let report_type = columns[columns.len() - 1].data_type().clone();
        fields.push(Field::new(report_name, report_type, false));
        fields.push(Field::new(
            &self.ts_name,
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            true,
        ));
        columns.push(Arc::new(self.ts.finish()));
        for (name, b) in self.group_names.iter().zip(&mut self.groups) {
            fields.push(Field::new(name, DataType::Utf8, true));
            columns.push(Arc::new(b.finish()));
        }
        self.rows = 0;
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(|source| {
            ConnectorError::Arrow {
                path: "decoded Kafka messages".into(),
                source,
            }
        })
    }
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Encodes a GenRR-style (u32) report in the binary layout; for producers and tests.
pub fn encode_binary_u32(ts_ms: Option<i64>, report: u32, groups: &[&str]) -> Vec<u8> {
    let mut out = Vec::with_capacity(13);
    out.push(1);
    out.extend_from_slice(&ts_ms.unwrap_or(i64::MIN).to_le_bytes());
    out.extend_from_slice(&report.to_le_bytes());
    for g in groups {
        out.extend_from_slice(&(g.len() as u16).to_le_bytes());
        out.extend_from_slice(g.as_bytes());
    }
    out
}

/// Encodes a subset report in the binary layout (`u16` item count, then the items as
/// `u32`); for producers and tests. None when it has more than 65,535 items.
pub fn encode_binary_subset(ts_ms: Option<i64>, items: &[u32], groups: &[&str]) -> Option<Vec<u8>> {
    let count = u16::try_from(items.len()).ok()?;
    let mut out = Vec::with_capacity(11 + 4 * items.len());
    out.push(1);
    out.extend_from_slice(&ts_ms.unwrap_or(i64::MIN).to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    for x in items {
        out.extend_from_slice(&x.to_le_bytes());
    }
    for g in groups {
        out.extend_from_slice(&(g.len() as u16).to_le_bytes());
        out.extend_from_slice(g.as_bytes());
    }
    Some(out)
}

/// The binary end marker.
pub const BINARY_END_MARKER: [u8; 1] = [0xFF];

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, FixedSizeBinaryArray, StringArray, UInt32Array};
    use ldpstream_config::Config;

    fn stream(mechanism: &str, group_by: &str) -> (StreamConfig, Mechanism) {
        let text = format!(
            "[[stream]]\nname = \"s\"\nsource = {{ kind = \"kafka\", brokers = \"b:1\", topics = [\"t\"], group_id = \"g\" }}\nmechanism = {mechanism}\ncolumns = {{ group_by = [{group_by}] }}\n"
        );
        let c = Config::from_toml_str(&text, "t").unwrap();
        let s = c.streams[0].clone();
        let m = Mechanism::from_config(&s.mechanism).unwrap();
        (s, m)
    }

    /// A producer's long group value is refused under its own reason, in both formats,
    /// and leaves no row behind; a value at the bound is taken.
    #[test]
    fn group_values_over_the_bound_are_refused() {
        let (mut s, m) = stream("{ kind = \"grr\", epsilon = 1.0, domain = 4 }", "\"g\"");
        s.max_group_value_bytes = 4;
        let mut json = MessageDecoder::new(&s, &m, MessageFormat::Json);
        let mut bin = MessageDecoder::new(&s, &m, MessageFormat::Binary);
        for (g, ok) in [
            ("abcd", true),
            ("abcde", false),
            ("\u{e9}\u{e9}\u{e9}", false),
        ] {
            let j = format!(r#"{{"report": 1, "g": "{g}"}}"#);
            for got in [
                json.push(j.as_bytes()),
                bin.push(&encode_binary_u32(None, 1, &[g])),
            ] {
                match got {
                    Ok(Decoded::Report) if ok => {}
                    Err(e) if !ok => {
                        assert_eq!(e.reason, GROUP_VALUE_TOO_LONG);
                        assert!(
                            e.detail.contains(&format!("is {} bytes", g.len()))
                                && e.detail.contains("max_group_value_bytes = 4"),
                            "{e}"
                        );
                    }
                    other => panic!("{g:?}: {other:?}"),
                }
            }
        }
        assert_eq!(json.rows(), 1);
        assert_eq!(bin.rows(), 1);
        assert_eq!(
            json.push(b"not json").map_err(|e| e.reason),
            Err(BAD_MESSAGE)
        );
    }

    /// Two client versions in one topic: the new one stamps the stream's fingerprint, the
    /// old one (ε = 2) another, a third stamps nothing. Only the old one is refused, under
    /// `mechanism_mismatch`, in both formats.
    #[test]
    fn a_report_stamped_with_another_mechanism_is_refused() {
        let (s, m) = stream("{ kind = \"grr\", epsilon = 1.0, domain = 4 }", "");
        let (_, old) = stream("{ kind = \"grr\", epsilon = 2.0, domain = 4 }", "");
        let (ours, theirs) = (m.fingerprint().unwrap(), old.fingerprint().unwrap());
        assert_ne!(ours, theirs);
        let mut json = MessageDecoder::new(&s, &m, MessageFormat::Json);
        let mut bin = MessageDecoder::new(&s, &m, MessageFormat::Binary);
        let stamped_binary = |f: u32| {
            let mut b = vec![2u8];
            b.extend_from_slice(&f.to_le_bytes());
            b.extend_from_slice(&encode_binary_u32(Some(7), 3, &[])[1..]);
            b
        };
        let reason = |r: Result<Decoded, BadMessage>| r.map_err(|e| e.reason);
        for f in [ours, theirs] {
            let expected = if f == ours {
                Ok(Decoded::Report)
            } else {
                Err(MECHANISM_MISMATCH)
            };
            let j = format!(r#"{{"report": 3, "fingerprint": "{f:08x}"}}"#);
            assert_eq!(reason(json.push(j.as_bytes())), expected);
            assert_eq!(reason(bin.push(&stamped_binary(f))), expected);
        }
        assert_eq!(reason(json.push(br#"{"report": 3}"#)), Ok(Decoded::Report));
        assert_eq!(
            reason(bin.push(&encode_binary_u32(None, 3, &[]))),
            Ok(Decoded::Report)
        );
        assert_eq!(
            reason(json.push(br#"{"report": 3, "fingerprint": "xyz"}"#)),
            Err(BAD_MESSAGE)
        );
        assert_eq!(reason(bin.push(&[2, 1, 2])), Err(BAD_MESSAGE));
        let e = json
            .push(format!(r#"{{"report": 3, "fingerprint": "{theirs:08x}"}}"#).as_bytes())
            .unwrap_err();
        assert!(
            e.detail.contains(&format!("{theirs:08x}"))
                && e.detail.contains(&format!("{ours:08x}")),
            "{e}"
        );
        assert_eq!(json.finish().unwrap().num_rows(), 2);
        assert_eq!(bin.finish().unwrap().num_rows(), 2);
    }

    #[test]
    fn json_and_binary_decode_to_the_same_rows() {
        let (s, m) = stream("{ kind = \"grr\", epsilon = 1.0, domain = 4 }", "\"g\"");
        let mut json = MessageDecoder::new(&s, &m, MessageFormat::Json);
        let mut bin = MessageDecoder::new(&s, &m, MessageFormat::Binary);
        for (i, (x, g)) in [(3u32, "a"), (0, "b"), (7, "a")].iter().enumerate() {
            let ts = 1_000 + i as i64;
            let j = format!(r#"{{"report": {x}, "ts": {ts}, "g": "{g}"}}"#);
            // Beyond the domain: appended (the fold rejects and counts it) and flagged,
            // so that the source can dead-letter it.
            let expected = if *x < 4 {
                Decoded::Report
            } else {
                Decoded::Invalid(RejectReason::OutOfDomain)
            };
            assert_eq!(json.push(j.as_bytes()), Ok(expected.clone()));
            assert_eq!(
                bin.push(&encode_binary_u32(Some(ts), *x, &[g])),
                Ok(expected)
            );
        }
        assert!(json.push(br#"{"report": -1}"#).is_err());
        assert!(json.push(b"not json").is_err());
        assert!(bin.push(&[1, 2, 3]).is_err());
        assert_eq!(json.push(br#"{"end": true}"#), Ok(Decoded::EndMarker));
        assert_eq!(bin.push(&BINARY_END_MARKER), Ok(Decoded::EndMarker));
        let a = json.finish().unwrap();
        let b = bin.finish().unwrap();
        assert_eq!(a, b);
        assert_eq!(a.num_rows(), 3);
        let r = a.column_by_name("report").unwrap();
        let r = r.as_any().downcast_ref::<UInt32Array>().unwrap();
        assert_eq!(r.values().to_vec(), vec![3, 0, 7]);
        let g = a.column_by_name("g").unwrap();
        assert_eq!(
            g.as_any().downcast_ref::<StringArray>().unwrap().value(1),
            "b"
        );
        // The builders restart empty.
        assert_eq!(json.finish().unwrap().num_rows(), 0);
    }

    #[test]
    fn reports_the_fold_will_reject_are_flagged_with_the_reason() {
        let (s, m) = stream("{ kind = \"bitflip\", epsilon = 1.0, domain = 10 }", "");
        let mut json = MessageDecoder::new(&s, &m, MessageFormat::Json);
        // Bit 10 lies beyond d = 10.
        assert_eq!(
            json.push(br#"{"report": "0004"}"#),
            Ok(Decoded::Invalid(RejectReason::PaddingBitsSet))
        );
        // OUE shares bit flip's packed reports, and their padding rule, in both formats.
        let (s, m) = stream("{ kind = \"oue\", epsilon = 1.0, domain = 10 }", "");
        let mut json = MessageDecoder::new(&s, &m, MessageFormat::Json);
        assert_eq!(
            json.push(br#"{"report": "0008"}"#),
            Ok(Decoded::Invalid(RejectReason::PaddingBitsSet))
        );
        assert_eq!(json.push(br#"{"report": "ff03"}"#), Ok(Decoded::Report));
        let mut oue_bin = MessageDecoder::new(&s, &m, MessageFormat::Binary);
        let message = |last: u8| [&[1u8][..], &i64::MIN.to_le_bytes(), &[0xff, last]].concat();
        assert_eq!(
            oue_bin.push(&message(0x04)),
            Ok(Decoded::Invalid(RejectReason::PaddingBitsSet))
        );
        assert_eq!(oue_bin.push(&message(0x03)), Ok(Decoded::Report));
        let (s, m) = stream("{ kind = \"gauss\", rho = 0.5, domain = 2 }", "");
        let mut bin = MessageDecoder::new(&s, &m, MessageFormat::Binary);
        let mut b = vec![1u8];
        b.extend_from_slice(&i64::MIN.to_le_bytes());
        b.extend_from_slice(&f32::NAN.to_le_bytes());
        b.extend_from_slice(&1.0f32.to_le_bytes());
        assert_eq!(bin.push(&b), Ok(Decoded::Invalid(RejectReason::NonFinite)));
        let (s, m) = stream("{ kind = \"hadamard\", epsilon = 1.0, domain = 6 }", "");
        let mut json = MessageDecoder::new(&s, &m, MessageFormat::Json);
        assert_eq!(
            json.push(br#"{"row": 1, "report": 0}"#),
            Ok(Decoded::Invalid(RejectReason::NotPlusMinusOne))
        );
        assert_eq!(
            json.push(br#"{"row": 4000, "report": 1}"#),
            Ok(Decoded::Invalid(RejectReason::RowOutOfRange))
        );
        // All of them were appended, for the fold to count.
        assert_eq!(json.rows(), 2);
        assert_eq!(bin.rows(), 1);
    }

    /// OLH: `seed` beside a u32 bucket in JSON, u32 seed + u32 bucket in binary; both
    /// decode to the same batch, and each bad report is flagged with its reason.
    #[test]
    fn olh_reports_decode_and_are_flagged() {
        let (s, m) = stream(
            "{ kind = \"olh\", epsilon = 1.0, domain = 100, g = 4, pool_size = 8 }",
            "",
        );
        let mut json = MessageDecoder::new(&s, &m, MessageFormat::Json);
        let mut bin = MessageDecoder::new(&s, &m, MessageFormat::Binary);
        let message = |seed: u32, y: u32| {
            [
                &[1u8][..],
                &i64::MIN.to_le_bytes(),
                &seed.to_le_bytes(),
                &y.to_le_bytes(),
            ]
            .concat()
        };
        for (seed, y, verdict) in [
            (7, 3, Decoded::Report),
            (8, 0, Decoded::Invalid(RejectReason::SeedOutOfPool)),
            (0, 4, Decoded::Invalid(RejectReason::BucketOutOfRange)),
        ] {
            let text = format!(r#"{{"seed": {seed}, "report": {y}}}"#);
            assert_eq!(json.push(text.as_bytes()), Ok(verdict.clone()), "{text}");
            assert_eq!(bin.push(&message(seed, y)), Ok(verdict));
        }
        assert!(json.push(br#"{"report": 1}"#).is_err(), "no seed");
        assert!(json.push(br#"{"seed": -1, "report": 1}"#).is_err());
        assert!(bin.push(&message(1, 1)[..16]).is_err(), "short");
        let (a, b) = (json.finish().unwrap(), bin.finish().unwrap());
        assert_eq!(a, b);
        let seeds = a.column_by_name("seed").unwrap();
        let seeds = seeds.as_any().downcast_ref::<UInt32Array>().unwrap();
        assert_eq!(seeds.values().to_vec(), vec![7, 8, 0]);
        let r = a.column_by_name("report").unwrap();
        let r = r.as_any().downcast_ref::<UInt32Array>().unwrap();
        assert_eq!(r.values().to_vec(), vec![3, 0, 4]);
    }

    #[test]
    fn bitflip_reports_are_hex() {
        let (s, m) = stream("{ kind = \"bitflip\", epsilon = 1.0, domain = 10 }", "");
        let mut json = MessageDecoder::new(&s, &m, MessageFormat::Json);
        assert_eq!(json.push(br#"{"report": "0a01"}"#), Ok(Decoded::Report));
        assert!(json.push(br#"{"report": "0a"}"#).is_err());
        assert!(json.push(br#"{"report": "zz01"}"#).is_err());
        let batch = json.finish().unwrap();
        let r = batch.column_by_name("report").unwrap();
        let r = r.as_any().downcast_ref::<FixedSizeBinaryArray>().unwrap();
        assert_eq!(r.value(0), &[0x0a, 0x01]);
        assert!(batch.column_by_name("ts").unwrap().is_null(0));
    }

    #[test]
    fn indexed_reports_decode_from_json_and_binary() {
        for (mechanism, index) in [
            ("{ kind = \"hadamard\", epsilon = 1.0, domain = 6 }", "row"),
            (
                "{ kind = \"cohort\", epsilon = 1.0, domain = 4, cohorts = 32, seed = 3 }",
                "cohort",
            ),
        ] {
            let (s, m) = stream(mechanism, "");
            let mut json = MessageDecoder::new(&s, &m, MessageFormat::Json);
            let mut bin = MessageDecoder::new(&s, &m, MessageFormat::Binary);
            for (i, sign) in [(5u32, 1i8), (0, -1), (7, 1)] {
                let j = format!(r#"{{"{index}": {i}, "report": {sign}, "ts": 1000}}"#);
                assert_eq!(json.push(j.as_bytes()), Ok(Decoded::Report), "{j}");
                let mut b = vec![1u8];
                b.extend_from_slice(&1000i64.to_le_bytes());
                b.extend_from_slice(&i.to_le_bytes());
                b.push(sign as u8);
                assert_eq!(bin.push(&b), Ok(Decoded::Report));
            }
            // The index is required and must be a u32; the sign must fit an i8.
            assert!(json.push(br#"{"report": 1}"#).is_err());
            let bad_index = format!(r#"{{"{index}": -1, "report": 1}}"#);
            assert!(json.push(bad_index.as_bytes()).is_err());
            let bad_sign = format!(r#"{{"{index}": 1, "report": 300}}"#);
            assert!(json.push(bad_sign.as_bytes()).is_err());
            let a = json.finish().unwrap();
            assert_eq!(a, bin.finish().unwrap());
            let idx = a.column_by_name(index).unwrap();
            let idx = idx.as_any().downcast_ref::<UInt32Array>().unwrap();
            assert_eq!(idx.values().to_vec(), vec![5, 0, 7]);
            let r = a.column_by_name("report").unwrap();
            let r = r
                .as_any()
                .downcast_ref::<arrow::array::Int8Array>()
                .unwrap();
            assert_eq!(r.values().to_vec(), vec![1, -1, 1]);
        }
    }

    #[test]
    fn noise_vectors_decode_from_json_and_binary() {
        for kind in ["gauss", "laplace"] {
            let privacy = if kind == "gauss" {
                "rho = 0.5"
            } else {
                "epsilon = 1.0"
            };
            let (s, m) = stream(
                &format!("{{ kind = \"{kind}\", {privacy}, domain = 3 }}"),
                "",
            );
            let mut json = MessageDecoder::new(&s, &m, MessageFormat::Json);
            let mut bin = MessageDecoder::new(&s, &m, MessageFormat::Binary);
            // Values exact in f32, so the binary (f32) and JSON (f64) paths agree.
            let v = [0.5f32, -1.25, 2.0];
            assert_eq!(
                json.push(br#"{"report": [0.5, -1.25, 2.0], "ts": 7}"#),
                Ok(Decoded::Report)
            );
            let mut b = vec![1u8];
            b.extend_from_slice(&7i64.to_le_bytes());
            for x in v {
                b.extend_from_slice(&x.to_le_bytes());
            }
            assert_eq!(bin.push(&b), Ok(Decoded::Report));
            assert!(json.push(br#"{"report": [0.5, 1.0]}"#).is_err());
            assert!(json.push(br#"{"report": [0.5, "x", 1.0]}"#).is_err());
            assert!(bin.push(&b[..b.len() - 1]).is_err());
            let a = json.finish().unwrap();
            assert_eq!(a, bin.finish().unwrap());
            assert_eq!(a.num_rows(), 1);
            let r = a.column_by_name("report").unwrap();
            let r = r
                .as_any()
                .downcast_ref::<arrow::array::FixedSizeListArray>()
                .unwrap();
            let vals = r.value(0);
            let vals = vals
                .as_any()
                .downcast_ref::<arrow::array::Float64Array>()
                .unwrap();
            assert_eq!(vals.values().to_vec(), vec![0.5, -1.25, 2.0]);
        }
    }

    /// Subset reports in both formats: valid ones decode to the same list rows; a wrong
    /// size, an item out of range and a repeated item are appended and flagged under their
    /// reasons (the fold agrees and counts them); a list that is not one is a bad message
    /// and leaves no row.
    #[test]
    fn subset_reports_decode_in_both_formats() {
        let (s, m) = stream(
            "{ kind = \"subset\", epsilon = 1.0, domain = 6, k = 2 }",
            "\"g\"",
        );
        let mut json = MessageDecoder::new(&s, &m, MessageFormat::Json);
        let mut bin = MessageDecoder::new(&s, &m, MessageFormat::Binary);
        let cases: [(&[u32], Option<RejectReason>); 5] = [
            (&[0, 5], None),
            (&[4, 1], None),
            (&[1, 2, 3], Some(RejectReason::SubsetWrongSize)),
            (&[1, 6], Some(RejectReason::OutOfDomain)),
            (&[3, 3], Some(RejectReason::SubsetDuplicate)),
        ];
        for (items, reason) in cases {
            let expected = Ok(reason.map_or(Decoded::Report, Decoded::Invalid));
            let list = items
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            let j = format!(r#"{{"report": [{list}], "ts": 5, "g": "a"}}"#);
            assert_eq!(json.push(j.as_bytes()), expected, "{items:?}");
            let b = encode_binary_subset(Some(5), items, &["a"]).unwrap();
            assert_eq!(bin.push(&b), expected, "{items:?}");
        }
        for bad_json in [
            r#"{"report": 3, "g": "a"}"#,
            r#"{"report": [1, -2], "g": "a"}"#,
            r#"{"report": "0a", "g": "a"}"#,
        ] {
            let e = json.push(bad_json.as_bytes()).unwrap_err();
            assert_eq!(e.reason, BAD_MESSAGE);
            assert!(e.detail.contains("array of u32"), "{e}");
        }
        // A count promising more items than the message holds, and one with bytes left over.
        let mut short = encode_binary_subset(None, &[1, 2], &["a"]).unwrap();
        short[9] = 3;
        assert_eq!(bin.push(&short).map_err(|e| e.reason), Err(BAD_MESSAGE));
        assert_eq!(bin.push(&[1, 0, 0]).map_err(|e| e.reason), Err(BAD_MESSAGE));
        assert_eq!(encode_binary_subset(None, &[0; 70_000], &[]), None);
        let (a, b) = (json.finish().unwrap(), bin.finish().unwrap());
        assert_eq!(a, b);
        assert_eq!(a.num_rows(), 5);
        let mut sketch = m.new_sketch();
        ldpstream_engine::fold::fold_batch(&m, &mut sketch, a.column(0).as_ref(), None).unwrap();
        assert_eq!(sketch.n(), 2);
        let r = sketch.rejected();
        for reason in [
            RejectReason::SubsetWrongSize,
            RejectReason::OutOfDomain,
            RejectReason::SubsetDuplicate,
        ] {
            assert_eq!(r.get(reason), 1, "{reason:?}");
        }
    }
}
