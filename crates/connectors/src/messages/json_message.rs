//! One JSON Kafka message split into its top-level fields without building a
//! `serde_json::Value` tree: keys and values borrow the payload (values as raw JSON text),
//! and only the fields a stream reads are then parsed, each straight into the type its
//! Arrow builder takes. The column names are configurable, so fields are looked up by name
//! at run time rather than through a derived struct.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// The top-level fields of one message, in order.
pub(crate) struct JsonFields<'a> {
    fields: Vec<(Cow<'a, str>, &'a RawValue)>,
}

/// A field present with the wrong JSON type.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct WrongType;

impl<'a> JsonFields<'a> {
    /// Splits `payload`; fails only when it is not one JSON object.
    pub(crate) fn parse(payload: &'a [u8]) -> Result<Self, String> {
        let mut de = serde_json::Deserializer::from_slice(payload);
        let fields = de
            .deserialize_map(FieldsVisitor)
            .map_err(|e| format!("JSON: {e}"))?;
        de.end().map_err(|e| format!("JSON: {e}"))?;
        Ok(JsonFields { fields })
    }

    /// The raw JSON text of field `name`, if present.
    pub(crate) fn raw(&self, name: &str) -> Option<&'a str> {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.get())
    }

    /// `{"end": true}`, the end marker.
    pub(crate) fn is_end_marker(&self) -> bool {
        self.raw("end") == Some("true")
    }

    /// An integer field: `None` when absent or null.
    pub(crate) fn integer(&self, name: &str) -> Result<Option<i64>, WrongType> {
        match self.raw(name) {
            None | Some("null") => Ok(None),
            Some(text) => text.parse().map(Some).map_err(|_| WrongType),
        }
    }

    /// A string field: `None` when absent or null; borrowed when it has no escapes.
    pub(crate) fn string(&self, name: &str) -> Result<Option<Cow<'a, str>>, WrongType> {
        match self.raw(name) {
            None | Some("null") => Ok(None),
            Some(text) => string(text).map(Some),
        }
    }
}

/// A JSON string's value from its raw text.
pub(crate) fn string(text: &str) -> Result<Cow<'_, str>, WrongType> {
    if !text.starts_with('"') {
        return Err(WrongType);
    }
    serde_json::from_str(text).map_err(|_| WrongType)
}

/// An array of numbers from its raw text.
pub(crate) fn numbers(text: &str) -> Result<Vec<f64>, WrongType> {
    serde_json::from_str(text).map_err(|_| WrongType)
}

/// An array of u32 from its raw text (a subset report).
pub(crate) fn u32s(text: &str) -> Result<Vec<u32>, WrongType> {
    serde_json::from_str(text).map_err(|_| WrongType)
}

struct FieldsVisitor;

impl<'de> Visitor<'de> for FieldsVisitor {
    type Value = Vec<(Cow<'de, str>, &'de RawValue)>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(4));
        while let Some(entry) = map.next_entry::<Cow<'de, str>, &'de RawValue>()? {
            fields.push(entry);
        }
        Ok(fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_found_and_typed() {
        let m = JsonFields::parse(
            br#"{"report": 3, "ts": -5, "g": "a\"b", "h": null, "x": [1, {"y": 2}], "v": [0.5, 2]}"#,
        )
        .unwrap();
        assert_eq!(m.raw("report"), Some("3"));
        assert_eq!(m.integer("ts"), Ok(Some(-5)));
        assert_eq!(m.integer("missing"), Ok(None));
        assert_eq!(m.integer("g"), Err(WrongType));
        assert_eq!(m.string("g").unwrap().as_deref(), Some("a\"b"));
        assert_eq!(m.string("h"), Ok(None));
        assert_eq!(m.string("report"), Err(WrongType));
        assert_eq!(numbers(m.raw("v").unwrap()), Ok(vec![0.5, 2.0]));
        assert_eq!(numbers(m.raw("x").unwrap()), Err(WrongType));
        assert_eq!(u32s("[4, 0, 7]"), Ok(vec![4, 0, 7]));
        assert_eq!(u32s("[4, -1]"), Err(WrongType));
        assert_eq!(u32s("[4, 1.5]"), Err(WrongType));
        assert_eq!(u32s("[4294967296]"), Err(WrongType));
        assert!(!m.is_end_marker());
        assert!(JsonFields::parse(br#"{"end": true}"#)
            .unwrap()
            .is_end_marker());
        assert!(JsonFields::parse(b"[1, 2]").is_err());
        assert!(JsonFields::parse(b"{\"a\": 1} trailing").is_err());
        assert!(JsonFields::parse(b"{\"a\": ").is_err());
    }
}
