use arrow_array::{Array, UInt32Array};

use crate::sketch::counts::TableMut;
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
    let (table, n) = sketch.table_mut();
    let out_of_domain = match table {
        TableMut::Dense(counts) if nulls == 0 => count_categories(array.values(), counts),
        TableMut::Dense(counts) => {
            let mut out_of_domain = 0u64;
            for v in array.iter().flatten() {
                match counts.get_mut(v as usize) {
                    Some(c) => *c += 1,
                    None => out_of_domain += 1,
                }
            }
            out_of_domain
        }
        TableMut::Sparse(mut cells) => {
            let mut out_of_domain = 0u64;
            for v in array.iter().flatten() {
                out_of_domain += u64::from(!cells.add(v, 1));
            }
            out_of_domain
        }
    };
    *n += array.len() as u64 - nulls as u64 - out_of_domain;
    sketch.settle();
    sketch
        .rejected_mut()
        .add(RejectReason::OutOfDomain, out_of_domain);
    sketch.rejected_mut().add(RejectReason::Null, nulls as u64);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_rejects() {
        let a = UInt32Array::from(vec![Some(0), Some(3), None, Some(9), Some(3), Some(1)]);
        let mut s = CountSketch::new(4);
        fold_categories(&a, &mut s);
        assert_eq!(&*s.counts(), &[1, 1, 0, 2]);
        assert_eq!(s.n(), 4);
        assert_eq!(s.rejected().get(RejectReason::OutOfDomain), 1);
        assert_eq!(s.rejected().get(RejectReason::Null), 1);
    }

    #[test]
    fn both_domain_paths_match_a_plain_loop() {
        for d in [7usize, MAX_LANED_DOMAIN + 10] {
            let values: Vec<u32> = (0..20_003u32)
                .map(|i| (i * 7919) % (d as u32 + 50))
                .collect();
            let mut counts = vec![0u64; d];
            let oob = count_categories(&values, &mut counts);
            let mut expected = vec![0u64; d];
            let mut expected_oob = 0;
            for &v in &values {
                match expected.get_mut(v as usize) {
                    Some(c) => *c += 1,
                    None => expected_oob += 1,
                }
            }
            assert_eq!(counts, expected);
            assert_eq!(oob, expected_oob);
        }
    }
}
