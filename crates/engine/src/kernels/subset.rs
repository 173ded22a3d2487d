use arrow_array::{Array, ListArray, UInt32Array};

use crate::sketch::{BitSketch, RejectReason};

/// Folds k-subset reports (`List<UInt32>`, each row k distinct categories below d) into
/// the item counts: one pass over the list's offsets and flat values, with one d-bit
/// scratch set per batch and no per-row allocation (ARCHITECTURE.md invariant 2).
///
/// A row is rejected whole, and counted under the first rule it breaks: `null` (the row
/// or one of its items), `subset_wrong_size` (length ≠ k), `out_of_domain` (an item ≥ d),
/// `subset_duplicate` (an item twice). A values column that is not UInt32 rejects every
/// non-null row as `bad_size`.
pub fn fold_subsets(array: &ListArray, k: usize, sketch: &mut BitSketch) {
    let d = sketch.bit_counts().len();
    let nulls = array.null_count() as u64;
    let Some(values) = array.values().as_any().downcast_ref::<UInt32Array>() else {
        let valid = array.len() as u64 - nulls;
        sketch.rejected_mut().add(RejectReason::BadSize, valid);
        sketch.rejected_mut().add(RejectReason::Null, nulls);
        return;
    };
    let items = values.values();
    let offsets = array.value_offsets();
    let mut seen = vec![0u64; d.div_ceil(64)];
    let mut tally = Tally::default();
    let (counts, n) = sketch.parts_mut();
    for (row, bounds) in offsets.windows(2).enumerate() {
        if array.is_null(row) {
            tally.nulls += 1;
            continue;
        }
        let (start, end) = (bounds[0] as usize, bounds[1] as usize);
        match check_row(values, items, start, end, k, d, &mut seen) {
            // The pass that counts also clears the row's bits from the scratch set.
            Ok(()) => {
                for &j in &items[start..end] {
                    counts[j as usize] += 1;
                    seen[j as usize / 64] = 0;
                }
                *n += 1;
            }
            Err(reason) => tally.add(reason),
        }
    }
    let rejected = sketch.rejected_mut();
    rejected.add(RejectReason::Null, tally.nulls);
    rejected.add(RejectReason::SubsetWrongSize, tally.wrong_size);
    rejected.add(RejectReason::OutOfDomain, tally.out_of_range);
    rejected.add(RejectReason::SubsetDuplicate, tally.duplicate);
}

/// The rejections of one batch, added to the sketch once at its end.
#[derive(Default)]
struct Tally {
    nulls: u64,
    wrong_size: u64,
    out_of_range: u64,
    duplicate: u64,
}

impl Tally {
    fn add(&mut self, reason: RejectReason) {
        match reason {
            RejectReason::Null => self.nulls += 1,
            RejectReason::SubsetWrongSize => self.wrong_size += 1,
            RejectReason::OutOfDomain => self.out_of_range += 1,
            // check_row returns no other reason.
            _ => self.duplicate += 1,
        }
    }
}

/// Why the row `items[start..end]` cannot be folded, if it cannot. `seen` is all zeros on
/// entry; on an error it is all zeros again, and on success the row's bits are still set
/// (the caller clears them as it counts, saving a pass).
fn check_row(
    values: &UInt32Array,
    items: &[u32],
    start: usize,
    end: usize,
    k: usize,
    d: usize,
    seen: &mut [u64],
) -> Result<(), RejectReason> {
    if values.null_count() > 0 && (start..end).any(|i| values.is_null(i)) {
        return Err(RejectReason::Null);
    }
    let row = &items[start..end];
    if row.len() != k {
        return Err(RejectReason::SubsetWrongSize);
    }
    // One pass for range and repeats; out of range outranks a repeat.
    let (mut outside, mut duplicate) = (false, false);
    for &j in row {
        let j = j as usize;
        if j >= d {
            outside = true;
            continue;
        }
        let (word, bit) = (j / 64, 1u64 << (j % 64));
        duplicate |= seen[word] & bit != 0;
        seen[word] |= bit;
    }
    if !(outside || duplicate) {
        return Ok(());
    }
    for &j in row {
        if (j as usize) < d {
            seen[j as usize / 64] = 0;
        }
    }
    Err(if outside {
        RejectReason::OutOfDomain
    } else {
        RejectReason::SubsetDuplicate
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::builder::{ListBuilder, UInt32Builder};

    fn list(rows: &[Option<Vec<u32>>]) -> ListArray {
        let mut b = ListBuilder::new(UInt32Builder::new());
        for row in rows {
            match row {
                Some(items) => {
                    b.values().append_slice(items);
                    b.append(true);
                }
                None => b.append(false),
            }
        }
        b.finish()
    }

    /// Valid rows are counted item by item; each bad row lands under its named reason and
    /// touches no count.
    #[test]
    fn folds_valid_rows_and_names_the_bad_ones() {
        let rows = [
            Some(vec![0, 3]),
            Some(vec![3, 1]),
            None,
            Some(vec![2]),       // wrong size
            Some(vec![1, 2, 3]), // wrong size
            Some(vec![4, 0]),    // out of range
            Some(vec![2, 2]),    // duplicate
            Some(vec![1, 3]),
        ];
        let mut s = BitSketch::new(4);
        fold_subsets(&list(&rows), 2, &mut s);
        assert_eq!(s.bit_counts(), &[1, 2, 0, 3]);
        assert_eq!(s.n(), 3);
        let r = s.rejected();
        assert_eq!(r.get(RejectReason::Null), 1);
        assert_eq!(r.get(RejectReason::SubsetWrongSize), 2);
        assert_eq!(r.get(RejectReason::OutOfDomain), 1);
        assert_eq!(r.get(RejectReason::SubsetDuplicate), 1);
    }

    /// The scratch set is left clean, so a duplicate in one row never rejects the next.
    #[test]
    fn duplicates_do_not_leak_between_rows() {
        let rows = [Some(vec![70, 70]), Some(vec![70, 5]), Some(vec![5, 70])];
        let mut s = BitSketch::new(100);
        fold_subsets(&list(&rows), 2, &mut s);
        assert_eq!(s.n(), 2);
        assert_eq!(s.bit_counts()[70], 2);
        assert_eq!(s.rejected().get(RejectReason::SubsetDuplicate), 1);
    }
}
