//! Maps each row of a batch to a dense group id, so that a whole batch can be folded into
//! per-group sketches with one kernel call.

use std::collections::HashMap;

use arrow_array::{Array, StringArray};

pub use crate::window::GroupKey;

/// Dense group ids for the rows of one batch, and the key of each id.
#[derive(Debug, Default)]
pub struct BatchGroups {
    pub ids: Vec<u32>,
    pub keys: Vec<GroupKey>,
}

/// Groups rows by the tuple of values in `columns` (all of the batch's length). Hashing is
/// one lookup per row and column, with no allocation per row: each column is first
/// dictionary-encoded, then tuples of small ids are combined column by column.
pub fn group_rows(columns: &[&StringArray], rows: usize) -> BatchGroups {
    let mut ids = vec![0u32; rows];
    // tuples[g] lists, per column seen so far, the column-local id of group g's value.
    let mut tuples: Vec<Vec<u32>> = vec![Vec::new()];
    let mut dictionaries: Vec<Vec<Option<&str>>> = Vec::with_capacity(columns.len());
    for column in columns {
        let mut dictionary: Vec<Option<&str>> = Vec::new();
        let mut lookup: HashMap<Option<&str>, u32> = HashMap::new();
        let mut combine: HashMap<(u32, u32), u32> = HashMap::new();
        let mut next_tuples: Vec<Vec<u32>> = Vec::new();
        for (i, id) in ids.iter_mut().enumerate() {
            let value = column.is_valid(i).then(|| column.value(i));
            let local = *lookup.entry(value).or_insert_with(|| {
                dictionary.push(value);
                (dictionary.len() - 1) as u32
            });
            let key = (*id, local);
            *id = *combine.entry(key).or_insert_with(|| {
                let mut t = tuples[key.0 as usize].clone();
                t.push(local);
                next_tuples.push(t);
                (next_tuples.len() - 1) as u32
            });
        }
        tuples = next_tuples;
        dictionaries.push(dictionary);
    }
    if rows == 0 && !columns.is_empty() {
        tuples.clear();
    }
    let keys = tuples
        .iter()
        .map(|t| {
            t.iter()
                .zip(&dictionaries)
                .map(|(&v, dict)| dict[v as usize].map(str::to_string))
                .collect()
        })
        .collect();
    BatchGroups { ids, keys }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_by_tuples() {
        let a = StringArray::from(vec![Some("x"), Some("y"), Some("x"), None, Some("x")]);
        let b = StringArray::from(vec![Some("1"), Some("1"), Some("2"), Some("1"), Some("1")]);
        let g = group_rows(&[&a, &b], 5);
        assert_eq!(g.ids, vec![0, 1, 2, 3, 0]);
        assert_eq!(
            g.keys,
            vec![
                vec![Some("x".to_string()), Some("1".to_string())],
                vec![Some("y".to_string()), Some("1".to_string())],
                vec![Some("x".to_string()), Some("2".to_string())],
                vec![None, Some("1".to_string())],
            ]
        );
    }

    #[test]
    fn no_columns_is_one_group() {
        let g = group_rows(&[], 3);
        assert_eq!(g.ids, vec![0, 0, 0]);
        assert_eq!(g.keys, vec![Vec::<Option<String>>::new()]);
    }
}
