//! A batch's group columns read as the fold's key ids ([`super::keys`]). A
//! dictionary-encoded column (what the Parquet reader hands over) is interned once per
//! distinct dictionary entry: the rows then only look their dictionary key up in a table,
//! and the table is kept while later batches share the same dictionary (a Parquet column
//! chunk's batches do). String columns (Kafka messages, Python tables) go through a small
//! table of the batch's own distinct keys first, so the fold's table is searched once per
//! distinct key and batch.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::{Array, ArrayRef, GenericStringArray, OffsetSizeTrait, StringViewArray};
use arrow_buffer::NullBuffer;
use arrow_schema::DataType;
use hashbrown::HashTable;

use super::error::StreamError;
use super::keys::{KeyTable, OTHER_ID};

/// A dictionary entry not yet interned.
const UNSET: u32 = u32::MAX;

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

/// A dictionary column's keys: Int32 ones (what the Parquet reader makes) borrowed as
/// they are, any other key type widened once per batch.
enum DictKeys<'a> {
    I32(&'a [i32]),
    Widened(Vec<usize>),
}

/// A group column as the fold reads it: its values, or a dictionary and each row's key.
enum KeyColumn<'a> {
    Plain(Strings<'a>),
    Dictionary {
        values: &'a ArrayRef,
        strings: Strings<'a>,
        keys: DictKeys<'a>,
        /// The null keys, if any.
        nulls: Option<NullBuffer>,
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
        let keys = match array.as_dictionary_opt::<Int32Type>() {
            Some(d) => DictKeys::I32(d.keys().values()),
            // arrow's normalized_keys asserts a non-empty dictionary; an empty one (every
            // row null, as a chunk of only null groups can be written) has no key to widen.
            None if values.is_empty() => DictKeys::Widened(vec![0; dict.keys().len()]),
            None => DictKeys::Widened(dict.normalized_keys()),
        };
        let nulls = dict.keys().logical_nulls().filter(|n| n.null_count() > 0);
        Some(KeyColumn::Dictionary {
            values,
            strings,
            keys,
            nulls,
        })
    }

    /// Row `i`'s dictionary key, None for a null key (or one past the dictionary, which a
    /// valid array holds only under a null).
    fn key(keys: &DictKeys<'_>, nulls: Option<&NullBuffer>, len: usize, i: usize) -> Option<usize> {
        if nulls.is_some_and(|n| n.is_null(i)) {
            return None;
        }
        let k = match keys {
            DictKeys::I32(k) => usize::try_from(k[i]).ok()?,
            DictKeys::Widened(k) => k[i],
        };
        (k < len).then_some(k)
    }

    fn get(&self, i: usize) -> Option<&'a str> {
        match self {
            KeyColumn::Plain(s) => s.get(i),
            KeyColumn::Dictionary {
                strings,
                keys,
                nulls,
                values,
            } => Self::key(keys, nulls.as_ref(), values.len(), i).and_then(|k| strings.get(k)),
        }
    }

    /// The first row (in `0..rows`) whose value is longer than `limit`, and its length:
    /// the check the fold makes before it interns any value of the column.
    fn first_too_long(&self, rows: usize, limit: usize) -> Option<(usize, usize)> {
        match self {
            KeyColumn::Plain(s) => s.first_too_long(limit),
            KeyColumn::Dictionary { strings, .. } => {
                strings.first_too_long(limit)?;
                (0..rows).find_map(|i| {
                    let len = self.get(i).map_or(0, str::len);
                    (len > limit).then_some((i, len))
                })
            }
        }
    }

    /// The dictionary's length (its entries plus one for null) when this is a dictionary
    /// column, for the packed multi-column codes.
    fn radix(&self) -> Option<u64> {
        match self {
            KeyColumn::Plain(_) => None,
            KeyColumn::Dictionary { values, .. } => Some(values.len() as u64 + 1),
        }
    }

    /// Row `i`'s dictionary key as a digit below [`Self::radix`] (the last for null).
    fn digit(&self, i: usize) -> u64 {
        match self {
            KeyColumn::Plain(_) => 0,
            KeyColumn::Dictionary {
                keys,
                nulls,
                values,
                ..
            } => Self::key(keys, nulls.as_ref(), values.len(), i)
                .map_or(values.len() as u64, |k| k as u64),
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
    ids.reserve(rows);
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
            nulls,
        }] => dictionary_ids(
            table,
            cache,
            values,
            strings,
            keys,
            nulls.as_ref(),
            rows,
            ids,
        ),
        [KeyColumn::Plain(Strings::Utf8(a))] => one_string_ids(table, a, rows, ids),
        [KeyColumn::Plain(Strings::Large(a))] => one_string_ids(table, a, rows, ids),
        [KeyColumn::Plain(_)] => plain_ids(table, &read, rows, ids),
        many => many_ids(table, many, rows, ids),
    }
    Ok(())
}

/// One dictionary column's ids: each entry is interned the first time a row uses it, and
/// the entries' ids are kept while later batches share the dictionary (a Parquet column
/// chunk's batches do), so a row costs a table lookup, not a hash.
#[allow(clippy::too_many_arguments)]
fn dictionary_ids(
    table: &mut KeyTable,
    cache: &mut DictCache,
    values: &ArrayRef,
    strings: &Strings<'_>,
    keys: &DictKeys<'_>,
    nulls: Option<&NullBuffer>,
    rows: usize,
    ids: &mut Vec<u32>,
) {
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
    let ids_of = &mut cache.ids;
    match (keys, nulls) {
        (DictKeys::I32(keys), None) => {
            let keys = &keys[..rows];
            // Entries first met in this batch are interned first, so that the rows are then
            // a plain gather (a key past the dictionary, which a valid array holds only
            // under a null, is the null group).
            let mut beyond = None;
            for &k in keys {
                match ids_of.get(k as u32 as usize) {
                    Some(&UNSET) => {
                        resolve_entry(
                            table,
                            ids_of,
                            strings,
                            &mut null_id,
                            Some(k as u32 as usize),
                        );
                    }
                    Some(_) => {}
                    None => {
                        beyond.get_or_insert_with(|| {
                            resolve_entry(table, ids_of, strings, &mut null_id, None)
                        });
                    }
                }
            }
            let null = beyond.unwrap_or(OTHER_ID);
            ids.extend(keys.iter().map(|&k| match ids_of.get(k as u32 as usize) {
                // A null entry of the dictionary stays UNSET: its rows are the null
                // group.
                Some(&UNSET) => null_id.unwrap_or(null),
                Some(&id) => id,
                None => null,
            }));
        }
        _ => {
            let len = values.len();
            for i in 0..rows {
                let id = match KeyColumn::key(keys, nulls, len, i) {
                    Some(k) if ids_of[k] != UNSET => ids_of[k],
                    k => resolve_entry(table, ids_of, strings, &mut null_id, k),
                };
                ids.push(id);
            }
        }
    }
}

/// The id of dictionary entry `k` (None: a null key), interned and remembered in `ids_of`.
fn resolve_entry(
    table: &mut KeyTable,
    ids_of: &mut [u32],
    strings: &Strings<'_>,
    null_id: &mut Option<u32>,
    k: Option<usize>,
) -> u32 {
    match k.map(|k| (k, strings.get(k))) {
        Some((k, Some(value))) => {
            let id = table.intern_one(Some(value));
            ids_of[k] = id;
            id
        }
        // A null key, or a key to a null entry: the null group.
        _ => *null_id.get_or_insert_with(|| table.intern_one(None)),
    }
}

/// Several group columns' ids. When every column is a dictionary, a row's keys pack into
/// one integer, and each distinct packed key of the batch is interned once; otherwise
/// every row's values are looked up.
fn many_ids(table: &mut KeyTable, columns: &[KeyColumn<'_>], rows: usize, ids: &mut Vec<u32>) {
    let mut parts: Vec<Option<&str>> = Vec::with_capacity(columns.len());
    let radices: Option<Vec<u64>> = columns.iter().map(KeyColumn::radix).collect();
    let fits = radices.as_ref().is_some_and(|r| {
        r.iter()
            .try_fold(1u64, |product, &radix| product.checked_mul(radix))
            .is_some()
    });
    let Some(radices) = radices.filter(|_| fits) else {
        return plain_ids(table, columns, rows, ids);
    };
    let mut seen: hashbrown::HashMap<u64, u32, ahash::RandomState> =
        hashbrown::HashMap::with_hasher(ahash::RandomState::new());
    for i in 0..rows {
        let code = columns
            .iter()
            .zip(&radices)
            .fold(0u64, |code, (c, &radix)| code * radix + c.digit(i));
        let id = *seen.entry(code).or_insert_with(|| {
            parts.clear();
            parts.extend(columns.iter().map(|c| c.get(i)));
            table.intern_parts(&parts)
        });
        ids.push(id);
    }
}

/// Rows whose values are looked up one by one (string columns, not dictionaries): a small
/// table of the batch's own distinct keys stands in front of the fold's, so each distinct
/// key of a batch is looked up there once, and a row costs one hash and a probe into a
/// table that stays in cache, compared with an earlier row of the same batch.
fn plain_ids(table: &mut KeyTable, columns: &[KeyColumn<'_>], rows: usize, ids: &mut Vec<u32>) {
    // (hash, the first row with the key, its id)
    let mut local: HashTable<(u64, u32, u32)> = HashTable::new();
    let mut parts: Vec<Option<&str>> = Vec::with_capacity(columns.len());
    for i in 0..rows {
        parts.clear();
        parts.extend(columns.iter().map(|c| c.get(i)));
        let hash = table.hash_parts(&parts);
        let same = |&(h, row, _): &(u64, u32, u32)| {
            h == hash
                && columns
                    .iter()
                    .zip(&parts)
                    .all(|(c, p)| c.get(row as usize) == *p)
        };
        let id = match local.find(hash, same) {
            Some(&(_, _, id)) => id,
            None => {
                let id = table.intern_hashed(&parts, hash);
                local.insert_unique(hash, (hash, i as u32, id), |e| e.0);
                id
            }
        };
        ids.push(id);
    }
}

/// [`plain_ids`] for the usual plain key, one Utf8 or LargeUtf8 column (a Python table's
/// strings, a Kafka batch's group values): offsets and bytes read directly, and the batch's
/// distinct keys held as byte slices, so a row costs one hash, one probe of a table that
/// stays in cache and one comparison of its bytes (the ids are the generic path's:
/// `one_string_column_ids_are_plain_ids`).
fn one_string_ids<O: OffsetSizeTrait>(
    table: &mut KeyTable,
    array: &GenericStringArray<O>,
    rows: usize,
    ids: &mut Vec<u32>,
) {
    let offsets = array.value_offsets();
    let data = array.value_data();
    let nulls = array.nulls().filter(|n| n.null_count() > 0);
    // (hash, the key's bytes (None: null), its id)
    let mut local: HashTable<(u64, Option<&[u8]>, u32)> = HashTable::new();
    for i in 0..rows {
        let value = match nulls {
            Some(n) if n.is_null(i) => None,
            _ => Some(&data[offsets[i].as_usize()..offsets[i + 1].as_usize()]),
        };
        // hash_parts of [value]: the same hashes as every other path into the table.
        let hash = table.hash_value(value);
        let id = match local.find(hash, |&(h, v, _)| h == hash && v == value) {
            Some(&(_, _, id)) => id,
            None => {
                let part = value.map(|_| array.value(i));
                let id = table.intern_hashed(&[part], hash);
                local.insert_unique(hash, (hash, value, id), |e| e.0);
                id
            }
        };
        ids.push(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::types::Int8Type;
    use arrow_array::{DictionaryArray, StringArray};

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

    /// A dictionary with no entries (only null keys) is all null rows, not a panic in
    /// arrow's `normalized_keys` (found by `the_one_pass_fold_equals_the_reference`).
    #[test]
    fn an_empty_dictionary_is_all_null_keys() {
        let values: ArrayRef = Arc::new(StringArray::from(Vec::<Option<&str>>::new()));
        let keys = arrow_array::Int8Array::from(vec![None, None, None]);
        let dict: ArrayRef = Arc::new(DictionaryArray::<Int8Type>::try_new(keys, values).unwrap());
        let mut t = KeyTable::new(1);
        let mut ids = Vec::new();
        let mut cache = DictCache::default();
        let read = key_ids(&mut t, &mut cache, &[("g", &dict)], 3, 100, &mut ids);
        assert!(read.is_ok());
        let null = t.intern_one(None);
        assert_eq!(ids, vec![null; 3]);
    }

    proptest::proptest! {
        /// The one-string-column path gives the ids, the interning order and the key
        /// bytes of the generic row-by-row path, over batches that share a table, with
        /// nulls, a ceiling that sends keys to the overflow group, and sliced arrays
        /// (nonzero offsets), for Utf8 and LargeUtf8.
        #[test]
        fn one_string_column_ids_are_plain_ids(
            batches in proptest::collection::vec(
                proptest::collection::vec(proptest::option::weighted(0.9, 0u8..12), 0..60),
                1..5,
            ),
            skip in 0usize..3,
            ceiling in proptest::option::of(0u8..12),
        ) {
            let text = |v: &Option<u8>| v.map(|k| format!("k{k}"));
            let mut fast = KeyTable::new(1);
            let mut generic = KeyTable::new(1);
            if let Some(c) = ceiling {
                fast.lower_ceiling(vec![Some(format!("k{c}"))]);
                generic.lower_ceiling(vec![Some(format!("k{c}"))]);
            }
            for (n, batch) in batches.iter().enumerate() {
                let values: Vec<Option<String>> = batch.iter().map(text).collect();
                let whole: ArrayRef = if n % 2 == 0 {
                    Arc::new(StringArray::from(values))
                } else {
                    Arc::new(arrow_array::LargeStringArray::from(values))
                };
                let from = skip.min(whole.len());
                let array = whole.slice(from, whole.len() - from);
                let rows = array.len();
                let (mut a, mut b) = (Vec::new(), Vec::new());
                match Strings::of(array.as_ref()) {
                    Some(Strings::Utf8(s)) => one_string_ids(&mut fast, s, rows, &mut a),
                    Some(Strings::Large(s)) => one_string_ids(&mut fast, s, rows, &mut a),
                    _ => unreachable!("a string array"),
                }
                let column = [KeyColumn::of(&array).unwrap()];
                plain_ids(&mut generic, &column, rows, &mut b);
                proptest::prop_assert_eq!(&a, &b);
            }
            proptest::prop_assert_eq!(fast.len(), generic.len());
            for id in 0..fast.len() as u32 {
                proptest::prop_assert_eq!(fast.key(id), generic.key(id));
            }
            // The fast path's hashes are the table's own (a merge or a later batch on
            // another path finds its keys by them): the same hashes, each key found again.
            proptest::prop_assert_eq!(fast.hashes(), generic.hashes());
            let len = fast.len();
            for id in 0..len as u32 {
                let key = fast.key(id);
                proptest::prop_assert_eq!(fast.intern_one(key[0].as_deref()), id);
            }
            proptest::prop_assert_eq!(fast.len(), len);
        }
    }
}
