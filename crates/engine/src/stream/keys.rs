//! Dense group ids for the rows of a fold: every distinct group key a fold meets gets one
//! id, kept across batches, so a batch's rows become a column of small integers with no
//! allocation or map search per row.
//!
//! A key is stored once, as bytes back to back in one arena (per column: a null tag, or a
//! tag, the length and the UTF-8 bytes), and found by hash. A dictionary-encoded column
//! (what the Parquet reader hands over) is interned once per distinct dictionary entry: the
//! rows then only look their dictionary key up in a table, and the table is kept while
//! later batches share the same dictionary (a Parquet column chunk's batches do). String
//! columns (Kafka messages, Python tables) go through a small table of the batch's own
//! distinct keys first, so the fold's table is searched once per distinct key and batch.

use std::cmp::Ordering;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, OnceLock};

use arrow_array::cast::AsArray;

use arrow_array::types::Int32Type;
use arrow_array::{Array, ArrayRef, GenericStringArray, OffsetSizeTrait, StringViewArray};
use arrow_buffer::NullBuffer;
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
    /// Each key's hash, so that neither growing the index nor compacting it after the cap
    /// hashes a key again.
    hashes: Vec<u64>,
    index: HashTable<u32>,
    hasher: ahash::RandomState,
    /// Keys above this are known to be beyond the group cap: they go straight to the
    /// overflow group (the cap would move them there anyway).
    ceiling: Option<GroupKey>,
}

/// The hash of a one-column null key (any fixed value: equal keys need equal hashes only).
const NULL_HASH: u64 = 0x9e37_79b9_7f4a_7c15;

/// The hasher of every key table in the process: one random key, so that merging two
/// folds' tables reuses the hashes one of them already computed.
fn fold_hasher() -> ahash::RandomState {
    static HASHER: OnceLock<ahash::RandomState> = OnceLock::new();
    HASHER.get_or_init(ahash::RandomState::new).clone()
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

/// Whether `encoded` is the encoding of `parts`, compared in place (no copy of the parts).
fn encodes(mut encoded: &[u8], parts: &[Option<&str>]) -> bool {
    if let [Some(v)] = parts {
        // One value: its tag and length are implied by the encoding's length.
        let v = v.as_bytes();
        return encoded.len() == v.len() + 9 && encoded[0] == 1 && encoded[9..] == *v;
    }
    for part in parts {
        match (part, encoded.split_first()) {
            (None, Some((0, rest))) => encoded = rest,
            (Some(v), Some((1, rest))) => {
                let v = v.as_bytes();
                let Some((len, rest)) = rest.split_at_checked(8) else {
                    return false;
                };
                if len != (v.len() as u64).to_le_bytes() {
                    return false;
                }
                let Some((value, rest)) = rest.split_at_checked(v.len()) else {
                    return false;
                };
                if value != v {
                    return false;
                }
                encoded = rest;
            }
            _ => return false,
        }
    }
    encoded.is_empty()
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
            hashes: Vec::new(),
            index: HashTable::new(),
            hasher: fold_hasher(),
            ceiling: None,
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

    /// The hash of the key whose values are `parts`: the values themselves are hashed, not
    /// their encoding, so a lookup copies nothing.
    pub(crate) fn hash_parts(&self, parts: &[Option<&str>]) -> u64 {
        match parts {
            // One column (the usual key): one pass over the bytes. A table's keys all have
            // its number of columns, so its hashes all come from the same arm.
            [Some(v)] => self.hasher.hash_one(v.as_bytes()),
            [None] => NULL_HASH,
            _ => {
                let mut h = self.hasher.build_hasher();
                for p in parts {
                    p.map(str::as_bytes).hash(&mut h);
                }
                h.finish()
            }
        }
    }

    /// The id of the key whose values are `parts` (one per column), interning it if new.
    pub(crate) fn intern_parts(&mut self, parts: &[Option<&str>]) -> u32 {
        let hash = self.hash_parts(parts);
        self.intern_hashed(parts, hash)
    }

    /// [`Self::intern_parts`] with the parts' hash ([`Self::hash_parts`]) already known.
    pub(crate) fn intern_hashed(&mut self, parts: &[Option<&str>], hash: u64) -> u32 {
        let (bytes, ends) = (&self.bytes, &self.ends);
        let found = self
            .index
            .find(hash, |&id| {
                let o = id as usize;
                let start = if o == 0 { 0 } else { ends[o - 1] };
                encodes(&bytes[start..ends[o]], parts)
            })
            .copied();
        match found {
            Some(id) => id,
            None if self.above_ceiling(parts) => OTHER_ID,
            None => {
                let start = self.bytes.len();
                for p in parts {
                    encode_part(&mut self.bytes, p.map(str::as_bytes));
                }
                self.insert(start, hash)
            }
        }
    }

    /// The id in this table of `other`'s key `id`, interning it if new: what merging two
    /// folds does for each key of the other. The tables share their hasher, so the stored
    /// hash is reused and the key compared as encoded, never decoded (unless a ceiling
    /// must be checked).
    pub(crate) fn intern_from(&mut self, other: &KeyTable, id: u32) -> u32 {
        let encoded = other.encoded(id);
        let hash = other.hashes[id as usize];
        let (bytes, ends) = (&self.bytes, &self.ends);
        let found = self
            .index
            .find(hash, |&mine| {
                let o = mine as usize;
                let start = if o == 0 { 0 } else { ends[o - 1] };
                bytes[start..ends[o]] == *encoded
            })
            .copied();
        if let Some(mine) = found {
            return mine;
        }
        if self.ceiling.is_some() {
            let key = other.key(id);
            let parts: Vec<Option<&str>> = key.iter().map(|v| v.as_deref()).collect();
            if self.above_ceiling(&parts) {
                return OTHER_ID;
            }
        }
        let start = self.bytes.len();
        self.bytes.extend_from_slice(encoded);
        self.insert(start, hash)
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

    /// Indexes the key just written at `bytes[start..]`, whose hash is `hash`.
    fn insert(&mut self, start: usize, hash: u64) -> u32 {
        debug_assert!(self.ends.last().copied().unwrap_or(0) == start);
        let id = self.ends.len() as u32;
        self.ends.push(self.bytes.len());
        self.hashes.push(hash);
        let hashes = &self.hashes;
        self.index
            .insert_unique(hash, id, |&other| hashes[other as usize]);
        id
    }

    /// Keeps only the ids in `kept` (in that order: new id `i` is `kept[i]`; `kept[0]`
    /// must be [`OTHER_ID`]).
    pub(crate) fn retain(&mut self, kept: &[u32]) {
        let mut out = KeyTable {
            columns: self.columns,
            bytes: Vec::new(),
            ends: Vec::with_capacity(kept.len()),
            hashes: Vec::with_capacity(kept.len()),
            index: HashTable::with_capacity(kept.len()),
            hasher: self.hasher.clone(),
            ceiling: self.ceiling.take(),
        };
        for &id in kept {
            let start = out.bytes.len();
            out.bytes.extend_from_slice(self.encoded(id));
            out.insert(start, self.hashes[id as usize]);
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
        let hash = match value {
            Some(v) => table.hasher.hash_one(v),
            None => NULL_HASH,
        };
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
            proptest::prop_assert_eq!(&fast.hashes, &generic.hashes);
            let len = fast.len();
            for id in 0..len as u32 {
                let key = fast.key(id);
                proptest::prop_assert_eq!(fast.intern_one(key[0].as_deref()), id);
            }
            proptest::prop_assert_eq!(fast.len(), len);
        }
    }
}
