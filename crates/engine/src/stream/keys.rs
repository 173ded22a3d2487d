//! Dense group ids for the rows of a fold: every distinct group key a fold meets gets one
//! id, kept across batches, so a batch's rows become a column of small integers with no
//! allocation or map search per row.
//!
//! A key is stored once, as bytes back to back in one arena (per column: a null tag, or a
//! tag, the length and the UTF-8 bytes), and found by hash. A dictionary-encoded column
//! (what a Parquet reader hands over) is interned once per distinct dictionary entry: the
//! rows then only look their dictionary key up in a table, and the table is kept while
//! later batches share the same dictionary (a Parquet column chunk's batches do).

use std::cmp::Ordering;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, GenericStringArray, OffsetSizeTrait, StringViewArray};
use arrow_schema::DataType;
use hashbrown::HashTable;

use super::error::StreamError;
use crate::window::{other_key, GroupKey};

/// A dictionary entry not yet interned.
const UNSET: u32 = u32::MAX;

/// The keys one fold met, each with a dense id. The ids are arrival-ordered and never leave
/// the fold: what it hands on is keyed by the values ([`GroupKey`]).
#[derive(Debug, Clone)]
pub(crate) struct KeyTable {
    columns: usize,
    /// The encoded keys, back to back; key `id` is `bytes[ends[id - 1]..ends[id]]`.
    bytes: Vec<u8>,
    ends: Vec<usize>,
    index: HashTable<u32>,
    hasher: ahash::RandomState,
    /// Keys above this are known to be beyond the group cap: they go straight to the
    /// overflow group (the cap would move them there anyway).
    ceiling: Option<GroupKey>,
    /// Scratch for one row's encoding.
    row: Vec<u8>,
}

/// The id of the overflow group (`["__other__"; k]`) in a grouped fold, and of the empty
/// key in an ungrouped one: interned first, so it is always present.
pub(crate) const OTHER_ID: u32 = 0;

fn encode_part(out: &mut Vec<u8>, value: Option<&[u8]>) {
    match value {
        None => out.push(0),
        Some(v) => {
            out.push(1);
            out.extend_from_slice(&(v.len() as u64).to_le_bytes());
            out.extend_from_slice(v);
        }
    }
}

fn decode(mut bytes: &[u8], columns: usize) -> GroupKey {
    let mut key = Vec::with_capacity(columns);
    while let Some((&tag, rest)) = bytes.split_first() {
        if tag == 0 {
            key.push(None);
            bytes = rest;
            continue;
        }
        let (len, rest) = rest.split_at(8);
        let mut n = [0u8; 8];
        n.copy_from_slice(len);
        let (value, rest) = rest.split_at(u64::from_le_bytes(n) as usize);
        // The arena holds only what `encode_part` wrote from `&str`s.
        key.push(Some(String::from_utf8_lossy(value).into_owned()));
        bytes = rest;
    }
    key
}

/// Compares a key given by its values with a stored one, as `GroupKey`'s order does.
fn cmp_parts(parts: &[Option<&str>], key: &GroupKey) -> Ordering {
    parts
        .iter()
        .map(|p| p.map(str::as_bytes))
        .cmp(key.iter().map(|v| v.as_deref().map(str::as_bytes)))
}

impl KeyTable {
    pub(crate) fn new(columns: usize) -> Self {
        let mut table = KeyTable {
            columns,
            bytes: Vec::new(),
            ends: Vec::new(),
            index: HashTable::new(),
            hasher: ahash::RandomState::new(),
            ceiling: None,
            row: Vec::new(),
        };
        let first = other_key(columns);
        let parts: Vec<Option<&str>> = first.iter().map(|v| v.as_deref()).collect();
        table.intern_parts(&parts);
        table
    }

    /// The number of ids, the overflow (or empty) key included.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    fn encoded(&self, id: u32) -> &[u8] {
        let id = id as usize;
        let start = if id == 0 { 0 } else { self.ends[id - 1] };
        &self.bytes[start..self.ends[id]]
    }

    /// The values of key `id`.
    pub(crate) fn key(&self, id: u32) -> GroupKey {
        decode(self.encoded(id), self.columns)
    }

    pub(crate) fn ceiling(&self) -> Option<&GroupKey> {
        self.ceiling.as_ref()
    }

    /// Lowers the ceiling to `key` (keys above it go to the overflow group from now on).
    pub(crate) fn lower_ceiling(&mut self, key: GroupKey) {
        if self.ceiling.as_ref().is_none_or(|c| key < *c) {
            self.ceiling = Some(key);
        }
    }

    /// The id of the key whose values are `parts` (one per column), interning it if new.
    pub(crate) fn intern_parts(&mut self, parts: &[Option<&str>]) -> u32 {
        let mut row = std::mem::take(&mut self.row);
        row.clear();
        for p in parts {
            encode_part(&mut row, p.map(str::as_bytes));
        }
        let id = match self.find(&row) {
            Some(id) => id,
            None if self.above_ceiling(parts) => OTHER_ID,
            None => self.insert(&row),
        };
        self.row = row;
        id
    }

    /// The id of a one-column key, interning it if new.
    pub(crate) fn intern_one(&mut self, value: Option<&str>) -> u32 {
        self.intern_parts(&[value])
    }

    fn above_ceiling(&self, parts: &[Option<&str>]) -> bool {
        self.ceiling
            .as_ref()
            .is_some_and(|c| cmp_parts(parts, c) == Ordering::Greater)
    }

    fn find(&self, encoded: &[u8]) -> Option<u32> {
        let hash = self.hasher.hash_one(encoded);
        self.index
            .find(hash, |&id| self.encoded(id) == encoded)
            .copied()
    }

    fn insert(&mut self, encoded: &[u8]) -> u32 {
        let id = self.ends.len() as u32;
        self.bytes.extend_from_slice(encoded);
        self.ends.push(self.bytes.len());
        let hash = self.hasher.hash_one(encoded);
        let (bytes, ends, hasher) = (&self.bytes, &self.ends, &self.hasher);
        self.index.insert_unique(hash, id, |&other| {
            let o = other as usize;
            let start = if o == 0 { 0 } else { ends[o - 1] };
            hasher.hash_one(&bytes[start..ends[o]])
        });
        id
    }

    /// Keeps only the ids in `kept` (in that order: new id `i` is `kept[i]`; `kept[0]`
    /// must be [`OTHER_ID`]).
    pub(crate) fn retain(&mut self, kept: &[u32]) {
        let mut out = KeyTable {
            columns: self.columns,
            bytes: Vec::new(),
            ends: Vec::with_capacity(kept.len()),
            index: HashTable::with_capacity(kept.len()),
            hasher: self.hasher.clone(),
            ceiling: self.ceiling.take(),
            row: Vec::new(),
        };
        for &id in kept {
            out.insert(self.encoded(id));
        }
        *self = out;
    }
}

/// A string column of any of the types a group column may have.
enum Strings<'a> {
    Utf8(&'a GenericStringArray<i32>),
    Large(&'a GenericStringArray<i64>),
    View(&'a StringViewArray),
}

impl<'a> Strings<'a> {
    fn of(array: &'a dyn Array) -> Option<Self> {
        match array.data_type() {
            DataType::Utf8 => Some(Strings::Utf8(array.as_string::<i32>())),
            DataType::LargeUtf8 => Some(Strings::Large(array.as_string::<i64>())),
            DataType::Utf8View => Some(Strings::View(array.as_string_view())),
            _ => None,
        }
    }

    fn get(&self, i: usize) -> Option<&'a str> {
        match self {
            Strings::Utf8(a) => a.is_valid(i).then(|| a.value(i)),
            Strings::Large(a) => a.is_valid(i).then(|| a.value(i)),
            Strings::View(a) => a.is_valid(i).then(|| a.value(i)),
        }
    }

    /// The first row whose value is longer than `limit` bytes, and its length.
    fn first_too_long(&self, limit: usize) -> Option<(usize, usize)> {
        fn offsets<O: OffsetSizeTrait>(
            a: &GenericStringArray<O>,
            limit: usize,
        ) -> Option<(usize, usize)> {
            a.value_offsets()
                .windows(2)
                .map(|w| (w[1] - w[0]).as_usize())
                .enumerate()
                .find(|&(_, len)| len > limit)
        }
        match self {
            Strings::Utf8(a) => offsets(a, limit),
            Strings::Large(a) => offsets(a, limit),
            // A view's first 4 bytes are the value's length, valid or not.
            Strings::View(a) => a
                .views()
                .iter()
                .map(|&v| v as u32 as usize)
                .enumerate()
                .find(|&(_, len)| len > limit),
        }
    }
}

/// A group column as the fold reads it: its values, or a dictionary and each row's key.
enum KeyColumn<'a> {
    Plain(Strings<'a>),
    Dictionary {
        values: &'a ArrayRef,
        strings: Strings<'a>,
        /// Each row's dictionary key; None for a null key.
        keys: Vec<Option<usize>>,
    },
}

impl<'a> KeyColumn<'a> {
    fn of(array: &'a ArrayRef) -> Option<Self> {
        if let Some(strings) = Strings::of(array.as_ref()) {
            return Some(KeyColumn::Plain(strings));
        }
        let dict = array.as_any_dictionary_opt()?;
        let values = dict.values();
        let strings = Strings::of(values.as_ref())?;
        let keys = if values.is_empty() {
            vec![None; dict.len()]
        } else {
            let nulls = dict.keys().logical_nulls();
            dict.normalized_keys()
                .into_iter()
                .enumerate()
                .map(|(i, k)| nulls.as_ref().is_none_or(|n| n.is_valid(i)).then_some(k))
                .collect()
        };
        Some(KeyColumn::Dictionary {
            values,
            strings,
            keys,
        })
    }

    fn get(&self, i: usize) -> Option<&'a str> {
        match self {
            KeyColumn::Plain(s) => s.get(i),
            KeyColumn::Dictionary { strings, keys, .. } => keys[i].and_then(|k| strings.get(k)),
        }
    }

    /// The first row (in `0..rows`) whose value is longer than `limit`, and its length:
    /// the check the fold makes before it interns any value of the column.
    fn first_too_long(&self, rows: usize, limit: usize) -> Option<(usize, usize)> {
        match self {
            KeyColumn::Plain(s) => s.first_too_long(limit),
            KeyColumn::Dictionary { strings, keys, .. } => {
                strings.first_too_long(limit)?;
                (0..rows).find_map(|i| {
                    let len = keys[i].and_then(|k| strings.get(k)).map_or(0, str::len);
                    (len > limit).then_some((i, len))
                })
            }
        }
    }
}

/// The last dictionary a one-column fold met, and the id of each entry interned so far:
/// batches that share a dictionary hash none of its values again.
#[derive(Debug, Default, Clone)]
pub(crate) struct DictCache {
    values: Option<ArrayRef>,
    ids: Vec<u32>,
}

impl DictCache {
    /// Maps the cached ids through `remap` (old id → new id), after the cap compacted them.
    pub(crate) fn remap(&mut self, remap: &[u32]) {
        for id in self.ids.iter_mut().filter(|id| **id != UNSET) {
            *id = remap[*id as usize];
        }
    }

    pub(crate) fn clear(&mut self) {
        *self = DictCache::default();
    }
}

/// Why a batch's group columns cannot be read.
pub(crate) enum KeyError {
    /// Not a string or dictionary-of-string column.
    WrongType { column: String, found: String },
    TooLong {
        column: String,
        row: usize,
        bytes: usize,
    },
}

impl KeyError {
    pub(crate) fn into_stream(self, origin: &str, limit: usize) -> StreamError {
        match self {
            KeyError::WrongType { column, found } => StreamError::WrongType {
                origin: origin.to_string(),
                column,
                expected: "columns that cast to Utf8".into(),
                found,
            },
            KeyError::TooLong { column, row, bytes } => StreamError::GroupValueTooLong {
                origin: origin.to_string(),
                column,
                row,
                bytes,
                limit,
            },
        }
    }
}

/// Writes the key id of each of the `rows` rows into `ids`. `columns` are the group
/// columns with their names, in key order. A value over `limit` bytes is refused before any
/// is interned, naming the first column that has one and its first such row.
pub(crate) fn key_ids(
    table: &mut KeyTable,
    cache: &mut DictCache,
    columns: &[(&str, &ArrayRef)],
    rows: usize,
    limit: usize,
    ids: &mut Vec<u32>,
) -> Result<(), KeyError> {
    ids.clear();
    let mut read = Vec::with_capacity(columns.len());
    for (name, array) in columns {
        let column = KeyColumn::of(array).ok_or_else(|| KeyError::WrongType {
            column: name.to_string(),
            found: array.data_type().to_string(),
        })?;
        if let Some((row, bytes)) = column.first_too_long(rows, limit) {
            return Err(KeyError::TooLong {
                column: name.to_string(),
                row,
                bytes,
            });
        }
        read.push(column);
    }
    match read.as_slice() {
        [KeyColumn::Dictionary {
            values,
            strings,
            keys,
        }] => {
            if !cache
                .values
                .as_ref()
                .is_some_and(|v| Arc::ptr_eq(v, values))
            {
                cache.values = Some(Arc::clone(values));
                cache.ids.clear();
                cache.ids.resize(values.len(), UNSET);
            }
            let mut null_id = None;
            for key in keys.iter().take(rows) {
                let id = match *key {
                    Some(k) if strings.get(k).is_some() => match cache.ids[k] {
                        UNSET => {
                            let id = table.intern_one(strings.get(k));
                            cache.ids[k] = id;
                            id
                        }
                        id => id,
                    },
                    _ => *null_id.get_or_insert_with(|| table.intern_one(None)),
                };
                ids.push(id);
            }
        }
        [column] => {
            // Rows of one segment often come in runs: the previous row's value is checked
            // before hashing.
            let mut last: Option<(Option<&str>, u32)> = None;
            for i in 0..rows {
                let value = column.get(i);
                let id = match last {
                    Some((v, id)) if v == value => id,
                    _ => table.intern_one(value),
                };
                last = Some((value, id));
                ids.push(id);
            }
        }
        many => {
            let mut parts: Vec<Option<&str>> = Vec::with_capacity(many.len());
            for i in 0..rows {
                parts.clear();
                parts.extend(many.iter().map(|c| c.get(i)));
                ids.push(table.intern_parts(&parts));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::types::Int8Type;
    use arrow_array::{DictionaryArray, StringArray};

    #[test]
    fn ids_are_dense_and_keys_come_back() {
        let mut t = KeyTable::new(1);
        let a = t.intern_one(Some("a"));
        let b = t.intern_one(Some("b"));
        assert_eq!(t.intern_one(Some("a")), a);
        let null = t.intern_one(None);
        assert_eq!(t.intern_one(Some("__other__")), OTHER_ID);
        assert_eq!((a, b, null), (1, 2, 3));
        assert_eq!(t.key(b), vec![Some("b".to_string())]);
        assert_eq!(t.key(null), vec![None]);
        t.lower_ceiling(vec![Some("b".to_string())]);
        assert_eq!(t.intern_one(Some("c")), OTHER_ID);
        assert_eq!(t.intern_one(Some("b")), b);
    }

    #[test]
    fn a_dictionary_is_interned_once_per_entry() {
        let values: ArrayRef = Arc::new(StringArray::from(vec![Some("x"), None, Some("y")]));
        let keys = arrow_array::Int8Array::from(vec![Some(2), Some(0), None, Some(1), Some(2)]);
        let dict: ArrayRef = Arc::new(DictionaryArray::<Int8Type>::try_new(keys, values).unwrap());
        let mut t = KeyTable::new(1);
        let mut cache = DictCache::default();
        let mut ids = Vec::new();
        key_ids(&mut t, &mut cache, &[("g", &dict)], 5, 100, &mut ids).ok();
        let y = t.intern_one(Some("y"));
        let x = t.intern_one(Some("x"));
        let null = t.intern_one(None);
        assert_eq!(ids, vec![y, x, null, null, y]);
        assert_eq!(t.len(), 4);
    }
}
