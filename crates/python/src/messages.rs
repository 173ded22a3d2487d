//! Reports as the Kafka messages of docs/clients.md, "Kafka messages", byte for byte what the
//! TypeScript client writes (conformance/golden.json pins both): JSON keys in the order
//! index, report, ts, groups, fingerprint; noise coordinates printed as ECMAScript's
//! `Number.prototype.toString` prints them; the binary layout little-endian.

use arrow_array::{
    Array, ArrayRef, FixedSizeBinaryArray, FixedSizeListArray, Float64Array, Int8Array, ListArray,
    StructArray, UInt32Array,
};
use serde_json::Value;

/// A Kafka message layout (the stream's `format`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Format {
    Json,
    Binary,
}

impl Format {
    pub fn parse(name: &str) -> Result<Self, String> {
        match name {
            "json" => Ok(Format::Json),
            "binary" => Ok(Format::Binary),
            other => Err(format!(
                "format: expected \"json\" or \"binary\", got {other:?}"
            )),
        }
    }
}

/// What every message carries beside its report.
pub struct Envelope<'a> {
    /// Event time in milliseconds since the epoch.
    pub ts: Option<i64>,
    /// Group values in the stream's `group_by` order (JSON names them; binary does not).
    pub groups: &'a [(String, String)],
    /// The mechanism fingerprint to stamp, if any.
    pub fingerprint: Option<u32>,
}

/// One report, as read out of the report array `Mechanism.randomize` returns.
enum Row<'a> {
    Category(u32),
    Bits(&'a [u8]),
    /// Hadamard's row or the cohort, and the ±1.
    Indexed(&'a str, u32, i8),
    /// olh: the pool index (`seed`) and the bucket.
    Pooled(&'a str, u32, u32),
    Noise(Vec<f64>),
    /// subset: the k categories, sorted.
    Items(Vec<u32>),
}

/// A binary subset report's item count is a u16 (docs/clients.md, "Kafka messages").
const MAX_BINARY_ITEMS: usize = u16::MAX as usize;

/// The messages of every report in `reports` (an array in the layout `randomize` returns).
pub fn encode(
    reports: &ArrayRef,
    format: Format,
    envelope: &Envelope,
) -> Result<Vec<Vec<u8>>, String> {
    (0..reports.len())
        .map(|i| {
            let row = row(reports, i)?;
            if let (Row::Items(items), Format::Binary) = (&row, format) {
                if items.len() > MAX_BINARY_ITEMS {
                    return Err(format!(
                        "k: {} items, more than a binary message's {MAX_BINARY_ITEMS} (use format=\"json\")",
                        items.len()
                    ));
                }
            }
            Ok(match format {
                Format::Json => json(&row, envelope).into_bytes(),
                Format::Binary => binary(&row, envelope),
            })
        })
        .collect()
}

fn downcast<T: 'static>(array: &dyn Array) -> Result<&T, String> {
    array
        .as_any()
        .downcast_ref::<T>()
        .ok_or_else(|| format!("a report array of type {}", array.data_type()))
}

fn row(reports: &ArrayRef, i: usize) -> Result<Row<'_>, String> {
    let any = reports.as_any();
    if let Some(a) = any.downcast_ref::<UInt32Array>() {
        return Ok(Row::Category(a.value(i)));
    }
    if let Some(a) = any.downcast_ref::<FixedSizeBinaryArray>() {
        return Ok(Row::Bits(a.value(i)));
    }
    if let Some(a) = any.downcast_ref::<ListArray>() {
        let values = a.value(i);
        return Ok(Row::Items(
            downcast::<UInt32Array>(values.as_ref())?.values().to_vec(),
        ));
    }
    if let Some(a) = any.downcast_ref::<FixedSizeListArray>() {
        let values = a.value(i);
        let coordinates = downcast::<Float64Array>(values.as_ref())?;
        return Ok(Row::Noise(coordinates.values().to_vec()));
    }
    let a = downcast::<StructArray>(reports.as_ref())?;
    let (name, index) = (a.column_names()[0], a.column(0));
    let index = downcast::<UInt32Array>(index.as_ref())?.value(i);
    if let Some(bucket) = a.column(1).as_any().downcast_ref::<UInt32Array>() {
        return Ok(Row::Pooled(name, index, bucket.value(i)));
    }
    let sign = downcast::<Int8Array>(a.column(1).as_ref())?.value(i);
    Ok(Row::Indexed(name, index, sign))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn json(row: &Row, envelope: &Envelope) -> String {
    let mut fields = Vec::new();
    match row {
        Row::Category(x) => fields.push(format!("\"report\":{x}")),
        Row::Bits(b) => fields.push(format!("\"report\":\"{}\"", hex(b))),
        Row::Indexed(name, j, s) => {
            fields.push(format!("{}:{j}", Value::from(*name)));
            fields.push(format!("\"report\":{s}"));
        }
        Row::Pooled(name, i, y) => {
            fields.push(format!("{}:{i}", Value::from(*name)));
            fields.push(format!("\"report\":{y}"));
        }
        Row::Noise(v) => {
            // ECMAScript's shortest round-trip digits: the server reads back exactly the
            // grid value, and the bytes are the JS client's.
            let mut buffer = ryu_js::Buffer::new();
            let coordinates: Vec<String> =
                v.iter().map(|&c| buffer.format(c).to_string()).collect();
            fields.push(format!("\"report\":[{}]", coordinates.join(",")));
        }
        Row::Items(items) => {
            let items: Vec<String> = items.iter().map(u32::to_string).collect();
            fields.push(format!("\"report\":[{}]", items.join(",")));
        }
    }
    if let Some(ts) = envelope.ts {
        fields.push(format!("\"ts\":{ts}"));
    }
    for (name, value) in envelope.groups {
        fields.push(format!(
            "{}:{}",
            Value::from(name.as_str()),
            Value::from(value.as_str())
        ));
    }
    if let Some(f) = envelope.fingerprint {
        fields.push(format!("\"fingerprint\":\"{f:08x}\""));
    }
    format!("{{{}}}", fields.join(","))
}

/// Byte 0 is 1, or 2 followed by the fingerprint; then the ts (i64::MIN for none), the
/// report and each group value with its u16 length.
fn binary(row: &Row, envelope: &Envelope) -> Vec<u8> {
    let mut out = Vec::new();
    match envelope.fingerprint {
        Some(f) => {
            out.push(2);
            out.extend_from_slice(&f.to_le_bytes());
        }
        None => out.push(1),
    }
    out.extend_from_slice(&envelope.ts.unwrap_or(i64::MIN).to_le_bytes());
    match row {
        Row::Category(x) => out.extend_from_slice(&x.to_le_bytes()),
        Row::Bits(b) => out.extend_from_slice(b),
        Row::Indexed(_, j, s) => {
            out.extend_from_slice(&j.to_le_bytes());
            out.extend_from_slice(&s.to_le_bytes());
        }
        Row::Pooled(_, i, y) => {
            out.extend_from_slice(&i.to_le_bytes());
            out.extend_from_slice(&y.to_le_bytes());
        }
        // Every coordinate is on the noise's grid, exact in f32 (docs/STATISTICS.md §1.3.1).
        Row::Noise(v) => v
            .iter()
            .for_each(|&c| out.extend_from_slice(&(c as f32).to_le_bytes())),
        // The count fits: `encode` refuses more than MAX_BINARY_ITEMS.
        Row::Items(items) => {
            out.extend_from_slice(&(items.len() as u16).to_le_bytes());
            items
                .iter()
                .for_each(|item| out.extend_from_slice(&item.to_le_bytes()));
        }
    }
    for (_, value) in envelope.groups {
        // Lengths are checked below u16::MAX by `check_groups`.
        out.extend_from_slice(&(value.len() as u16).to_le_bytes());
        out.extend_from_slice(value.as_bytes());
    }
    out
}

/// Refuses a group value the server would refuse (longer than `max_bytes`, its
/// `max_group_value_bytes`) or the binary layout cannot hold, and a ts equal to the
/// binary layout's "no ts" marker.
pub fn check_envelope(envelope: &Envelope, max_bytes: usize) -> Result<(), String> {
    if envelope.ts == Some(i64::MIN) {
        return Err(format!(
            "ts: {} is the binary layout's \"no ts\" marker",
            i64::MIN
        ));
    }
    for (name, value) in envelope.groups {
        if value.len() > max_bytes.min(usize::from(u16::MAX)) {
            return Err(format!(
                "groups[{name:?}]: {} UTF-8 bytes, more than max_group_value_bytes ({max_bytes})",
                value.len()
            ));
        }
    }
    Ok(())
}
