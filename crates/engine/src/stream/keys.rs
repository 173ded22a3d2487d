//! Dense group ids for the rows of a fold: every distinct group key a fold meets gets one
//! id, kept across batches, so a batch's rows become a column of small integers with no
//! allocation or map search per row ([`super::key_columns`] reads a batch's group columns
//! into them).
//!
//! A key is stored once, as bytes back to back in one arena (per column: a null tag, or a
//! tag, the length and the UTF-8 bytes), and found by hash.

use std::cmp::Ordering;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::OnceLock;

use hashbrown::HashTable;

use crate::window::{other_key, GroupKey};

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
pub(super) const NULL_HASH: u64 = 0x9e37_79b9_7f4a_7c15;

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

    /// [`Self::hash_parts`] of a one-column key given as bytes (None: null).
    pub(super) fn hash_value(&self, value: Option<&[u8]>) -> u64 {
        match value {
            Some(v) => self.hasher.hash_one(v),
            None => NULL_HASH,
        }
    }

    /// Each key's hash, by id.
    #[cfg(test)]
    pub(super) fn hashes(&self) -> &[u64] {
        &self.hashes
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
