use arrow::array::{Array, UInt32Array};

use crate::sketch::{CountSketch, RejectReason};

/// Above this domain the sub-histograms no longer fit in L1 and stop paying for themselves.
const MAX_LANED_DOMAIN: usize = 4096;

/// Adds each value of `values` to `counts[value]` and returns how many values were outside
/// `[0, counts.len())` (those are not counted).
///
/// Small domains use four interleaved sub-histograms: a run of equal values then updates
/// four different counters instead of waiting on one store-to-load chain.
pub fn count_categories(values: &[u32], counts: &mut [u64]) -> u64 {
    let d = counts.len();
    if d == 0 {
        return values.len() as u64;
    }
    if d > MAX_LANED_DOMAIN {
        let mut out_of_domain = 0u64;
        for &v in values {
            match counts.get_mut(v as usize) {
                Some(c) => *c += 1,
                None => out_of_domain += 1,
            }
        }
        return out_of_domain;
    }
    let mut l0 = vec![0u64; d];
    let mut l1 = vec![0u64; d];
    let mut l2 = vec![0u64; d];
    let mut l3 = vec![0u64; d];
    let mut out_of_domain = 0u64;
    let mut chunks = values.chunks_exact(4);
    for c in &mut chunks {
        // Each `get_mut` bounds-checks once against its own lane; an out-of-range value
        // takes the rare branch.
        match l0.get_mut(c[0] as usize) {
            Some(x) => *x += 1,
            None => out_of_domain += 1,
        }
        match l1.get_mut(c[1] as usize) {
            Some(x) => *x += 1,
            None => out_of_domain += 1,
        }
        match l2.get_mut(c[2] as usize) {
            Some(x) => *x += 1,
            None => out_of_domain += 1,
        }
        match l3.get_mut(c[3] as usize) {
            Some(x) => *x += 1,
            None => out_of_domain += 1,
        }
    }
    for &v in chunks.remainder() {
        match l0.get_mut(v as usize) {
            Some(x) => *x += 1,
            None => out_of_domain += 1,
        }
    }
    for (j, c) in counts.iter_mut().enumerate() {
        *c += l0[j] + l1[j] + l2[j] + l3[j];
    }
    out_of_domain
}

/// Folds one Arrow array of categories into `sketch`: valid in-domain values are counted,
/// the rest are counted as rejected by reason.
pub fn fold_categories(array: &UInt32Array, sketch: &mut CountSketch) {
    let nulls = array.null_count();
    let out_of_domain = if nulls == 0 {
        count_categories(array.values(), sketch.counts_mut())
    } else {
        let counts = sketch.counts_mut();
        let mut out_of_domain = 0u64;
        for v in array.iter().flatten() {
            match counts.get_mut(v as usize) {
                Some(c) => *c += 1,
                None => out_of_domain += 1,
            }
        }
        out_of_domain
    };
    let folded = array.len() as u64 - nulls as u64 - out_of_domain;
    sketch.add_n(folded);
    sketch
        .rejected_mut()
        .add(RejectReason::OutOfDomain, out_of_domain);
    sketch.rejected_mut().add(RejectReason::Null, nulls as u64);
}

/// Folds `array` into one sketch per group: row `i` goes to `sketches[group_ids[i]]`.
///
/// # Panics
/// If `group_ids` is shorter than `array` or names a sketch that does not exist; the
/// grouping code builds both from the same batch, so either is a bug, not bad input.
pub fn fold_categories_grouped(
    array: &UInt32Array,
    group_ids: &[u32],
    sketches: &mut [CountSketch],
) {
    assert!(group_ids.len() >= array.len(), "one group id per row");
    for (i, &g) in group_ids.iter().enumerate().take(array.len()) {
        let sketch = &mut sketches[g as usize];
        if array.is_null(i) {
            sketch.rejected_mut().add(RejectReason::Null, 1);
            continue;
        }
        let v = array.value(i) as usize;
        match sketch.counts_mut().get_mut(v) {
            Some(c) => {
                *c += 1;
                sketch.add_n(1);
            }
            None => sketch.rejected_mut().add(RejectReason::OutOfDomain, 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn single_pass(values: &[Option<u32>], d: usize) -> CountSketch {
        let mut s = CountSketch::new(d);
        for v in values {
            match v {
                None => s.rejected_mut().add(RejectReason::Null, 1),
                Some(v) if (*v as usize) < d => {
                    s.counts_mut()[*v as usize] += 1;
                    s.add_n(1);
                }
                Some(_) => s.rejected_mut().add(RejectReason::OutOfDomain, 1),
            }
        }
        s
    }

    #[test]
    fn counts_and_rejects() {
        let a = UInt32Array::from(vec![Some(0), Some(3), None, Some(9), Some(3), Some(1)]);
        let mut s = CountSketch::new(4);
        fold_categories(&a, &mut s);
        assert_eq!(s.counts(), &[1, 1, 0, 2]);
        assert_eq!(s.n(), 4);
        assert_eq!(s.rejected().get(RejectReason::OutOfDomain), 1);
        assert_eq!(s.rejected().get(RejectReason::Null), 1);
    }

    #[test]
    fn large_domain_path_matches_reference() {
        let d = MAX_LANED_DOMAIN + 10;
        let values: Vec<u32> = (0..20_000u32)
            .map(|i| (i * 7919) % (d as u32 + 50))
            .collect();
        let mut counts = vec![0u64; d];
        let oob = count_categories(&values, &mut counts);
        let reference = single_pass(&values.iter().map(|v| Some(*v)).collect::<Vec<_>>(), d);
        assert_eq!(counts, reference.counts());
        assert_eq!(oob, reference.rejected().get(RejectReason::OutOfDomain));
    }

    proptest! {
        /// Any split of a batch into shards, folded separately (some grouped, some not)
        /// and merged in any order, equals one pass over the whole batch.
        #[test]
        fn merge_equivalence(
            d in 2usize..40,
            values in proptest::collection::vec(proptest::option::weighted(0.95, 0u32..48), 0..600),
            cuts in proptest::collection::vec(0usize..600, 0..8),
            reverse in any::<bool>(),
        ) {
            let expected = single_pass(&values, d);
            let mut bounds: Vec<usize> = cuts.into_iter().map(|c| c.min(values.len())).collect();
            bounds.push(0);
            bounds.push(values.len());
            bounds.sort_unstable();
            let mut shards = Vec::new();
            for (k, w) in bounds.windows(2).enumerate() {
                let array = UInt32Array::from(values[w[0]..w[1]].to_vec());
                let mut s = CountSketch::new(d);
                if k % 2 == 0 {
                    fold_categories(&array, &mut s);
                } else {
                    let ids = vec![0u32; array.len()];
                    fold_categories_grouped(&array, &ids, std::slice::from_mut(&mut s));
                }
                shards.push(s);
            }
            if reverse {
                shards.reverse();
            }
            let mut merged = CountSketch::new(d);
            for s in &shards {
                merged.merge(s).unwrap();
            }
            prop_assert_eq!(&merged, &expected);
            prop_assert_eq!(CountSketch::from_bytes(&merged.to_bytes()).unwrap(), expected);
        }
    }
}
