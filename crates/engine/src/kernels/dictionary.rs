use crate::sketch::counts::TableMut;
use crate::sketch::{CountSketch, RejectReason};

/// Folds reports that arrive as counts per dictionary key (a dictionary-encoded Parquet
/// column counted without materializing its values) into `sketch`: `key_counts[k]` reports
/// carry the value `dictionary[k]`, and `nulls` reports are null.
///
/// The result is the same as folding the materialized values with
/// [`fold_categories`](super::fold_categories): values outside the sketch's domain are
/// rejected as out of domain, nulls as null. Keys beyond the shorter of the two slices are
/// ignored; the caller checks that they have the same length.
pub fn fold_key_counts(
    dictionary: &[u32],
    key_counts: &[u64],
    nulls: u64,
    sketch: &mut CountSketch,
) {
    let (table, n) = sketch.table_mut();
    let mut folded = 0u64;
    let mut out_of_domain = 0u64;
    let mut add = |value: u32, count: u64, into: &mut dyn FnMut(u32, u64) -> bool| {
        if into(value, count) {
            folded += count;
        } else {
            out_of_domain += count;
        }
    };
    match table {
        TableMut::Dense(counts) => {
            let mut into = |v: u32, k: u64| match counts.get_mut(v as usize) {
                Some(c) => {
                    *c += k;
                    true
                }
                None => false,
            };
            for (&value, &count) in dictionary.iter().zip(key_counts) {
                add(value, count, &mut into);
            }
        }
        TableMut::Sparse(mut cells) => {
            let mut into = |v: u32, k: u64| cells.add(v, k);
            for (&value, &count) in dictionary.iter().zip(key_counts) {
                add(value, count, &mut into);
            }
        }
    }
    *n += folded;
    sketch.settle();
    sketch
        .rejected_mut()
        .add(RejectReason::OutOfDomain, out_of_domain);
    sketch.rejected_mut().add(RejectReason::Null, nulls);
}

#[cfg(test)]
mod tests {
    use arrow_array::UInt32Array;

    use super::*;
    use crate::kernels::fold_categories;

    #[test]
    fn matches_folding_the_materialized_values() {
        let dictionary = [3u32, 0, 9, 3, u32::MAX];
        let key_counts = [2u64, 1, 4, 3, 1];
        let mut by_keys = CountSketch::new(5);
        fold_key_counts(&dictionary, &key_counts, 2, &mut by_keys);

        let mut values: Vec<Option<u32>> = vec![None, None];
        for (&v, &c) in dictionary.iter().zip(&key_counts) {
            values.extend(std::iter::repeat_n(Some(v), c as usize));
        }
        let mut by_values = CountSketch::new(5);
        fold_categories(&UInt32Array::from(values), &mut by_values);
        assert_eq!(by_keys, by_values);
        assert_eq!(&*by_keys.counts(), &[1, 0, 0, 5, 0]);
        assert_eq!(by_keys.rejected().get(RejectReason::OutOfDomain), 5);
        assert_eq!(by_keys.rejected().get(RejectReason::Null), 2);
    }
}
