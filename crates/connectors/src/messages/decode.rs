//! Message decoding (Kafka's, and any transport's) straight into Arrow builders, JSON or the compact binary layout.
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

use arrow_array::builder::{
    FixedSizeBinaryBuilder, FixedSizeListBuilder, Float64Builder, Int8Builder, ListBuilder,
    StringBuilder, TimestampMillisecondBuilder, UInt32Builder,
};

use arrow_array::ArrayRef;
use arrow_array::RecordBatch;
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use ldpstream_config::{EventTime, MessageFormat, StreamConfig};
use ldpstream_engine::kernels::ReportCheck;
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::sketch::RejectReason;

use super::json_message::{self, JsonFields};
use crate::error::ConnectorError;

/// Why a message was not decoded; the label of `ldpstream_reports_rejected_total`.
pub const BAD_MESSAGE: &str = "bad_message";
/// A message whose group value is longer than the stream's `max_group_value_bytes`.
pub const GROUP_VALUE_TOO_LONG: &str = "group_value_too_long";
/// A message whose mechanism fingerprint is not the stream's (docs/clients.md).
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

/// The builder of `mechanism`'s report column and the name of its index column, if any.
fn report_builder(stream: &StreamConfig, mechanism: &Mechanism) -> (ReportBuilder, Option<String>) {
    let d = mechanism.domain();
    match mechanism {
        // A longitudinal kind's messages carry its composed kind's report; the decoder's
        // fingerprint stays the stream's own.
        Mechanism::Longitudinal(l) => report_builder(stream, l.composed()),
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
    }
}

impl MessageDecoder {
    pub fn new(stream: &StreamConfig, mechanism: &Mechanism, format: MessageFormat) -> Self {
        let (report, index_name) = report_builder(stream, mechanism);
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
#[path = "decode_tests.rs"]
mod tests;
