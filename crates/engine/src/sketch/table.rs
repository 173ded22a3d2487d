//! What the table sketches (bits, signed, sums) share: `n`, the rejection counts, the
//! exact merge and the body encoding, written once and generated for each kind by
//! [`table_sketch!`](crate::table_sketch), so the kinds cannot drift apart.
//!
//! Merges are checked. A sketch file is input, and a crafted one can carry counts that
//! wrap when added: a wrapped `n` would silently turn a window into an empty one. A merge
//! that would overflow is refused before anything is changed, so the sketch merged into is
//! left as it was.

use crate::error::EngineError;

/// An integer cell of a sketch table.
pub(crate) trait Cell: Copy + std::ops::Add<Output = Self> {
    fn checked_add(self, other: Self) -> Option<Self>;
    fn write_le(self, out: &mut Vec<u8>);
}

impl Cell for u64 {
    fn checked_add(self, other: Self) -> Option<Self> {
        u64::checked_add(self, other)
    }
    fn write_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl Cell for i128 {
    fn checked_add(self, other: Self) -> Option<Self> {
        i128::checked_add(self, other)
    }
    fn write_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

/// Refuses adding `from` into `into` when the shapes differ or a cell would overflow.
pub(crate) fn check_add<T: Cell>(into: &[T], from: &[T], what: &str) -> Result<(), EngineError> {
    if from.len() != into.len() {
        return Err(EngineError::ShapeMismatch {
            expected: into.len(),
            found: from.len(),
        });
    }
    match into
        .iter()
        .zip(from)
        .position(|(&a, &b)| a.checked_add(b).is_none())
    {
        None => Ok(()),
        Some(j) => Err(EngineError::Corrupt(format!(
            "merging overflows {what} at cell {j}"
        ))),
    }
}

/// Adds a table already checked by [`check_add`].
pub(crate) fn add_checked<T: Cell>(into: &mut [T], from: &[T]) {
    // check_add proved that every sum fits.
    for (a, &b) in into.iter_mut().zip(from) {
        *a = *a + b;
    }
}

/// Refuses a merge whose `n` would overflow.
pub(crate) fn checked_n(a: u64, b: u64) -> Result<u64, EngineError> {
    a.checked_add(b)
        .ok_or_else(|| EngineError::Corrupt(format!("merging overflows n ({a} + {b})")))
}

/// The accessors, the checked exact merge and the body writer of a table sketch: a struct
/// with `n: u64`, `rejected: Rejections` and one or more `Vec<Cell>` tables of one length,
/// written in the order given (the body is the header `len (u32), n (u64)`, then each
/// table's cells, little-endian).
#[macro_export]
#[doc(hidden)]
macro_rules! table_sketch {
    ($ty:ident { $($table:ident),+ }) => {
        impl $ty {
            pub fn n(&self) -> u64 {
                self.n
            }

            pub fn rejected(&self) -> &$crate::sketch::Rejections {
                &self.rejected
            }

            pub fn rejected_mut(&mut self) -> &mut $crate::sketch::Rejections {
                &mut self.rejected
            }

            /// Exact merge: every table, `n` and the rejections add. Refused, leaving
            /// `self` unchanged, on another shape or a sum past the integer range.
            pub fn merge(&mut self, other: &$ty) -> Result<(), $crate::error::EngineError> {
                let n = $crate::sketch::table::checked_n(self.n, other.n)?;
                $($crate::sketch::table::check_add(&self.$table, &other.$table, stringify!($table))?;)+
                self.rejected.check_merge(&other.rejected)?;
                $($crate::sketch::table::add_checked(&mut self.$table, &other.$table);)+
                self.n = n;
                self.rejected.merge(&other.rejected);
                Ok(())
            }

            pub(crate) fn write_body(&self, out: &mut Vec<u8>) {
                let tables: &[&[_]] = &[$(&self.$table),+];
                $crate::sketch::codec::write_header(out, tables[0].len(), self.n);
                for table in tables {
                    for &c in table.iter() {
                        $crate::sketch::table::Cell::write_le(c, out);
                    }
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use crate::sketch::{BitSketch, CountSketch, RejectReason, SignedSketch, SumSketch};

    // A crafted sketch file can carry counts near u64::MAX; before the checked merge, n
    // wrapped to a small number and the merged window silently lost its reports.
    #[test]
    fn a_merge_that_would_overflow_is_refused_and_changes_nothing() {
        let mut bits = BitSketch::from_counts(vec![u64::MAX - 1], u64::MAX - 1).unwrap();
        let before = bits.clone();
        let err = bits
            .merge(&BitSketch::from_counts(vec![2], 2).unwrap())
            .unwrap_err();
        assert!(err.to_string().contains("overflows n"), "{err}");
        assert_eq!(bits, before);

        let mut signed = SignedSketch::from_tables(vec![u64::MAX], vec![0]).unwrap();
        let before = signed.clone();
        assert!(signed
            .merge(&SignedSketch::from_tables(vec![0], vec![1]).unwrap())
            .is_err());
        assert_eq!(signed, before);

        let mut counts = CountSketch::from_counts(vec![u64::MAX, 0]);
        let before = counts.clone();
        assert!(counts.merge(&CountSketch::from_counts(vec![0, 1])).is_err());
        assert_eq!(counts, before);

        // Sums may overflow i128 with n still small: a crafted table, not a real one.
        let mut sums = SumSketch::from_sums_f64(&[0.0], 1);
        sums.parts_mut().0[0] = i128::MAX;
        let before = sums.clone();
        let mut one = SumSketch::from_sums_f64(&[0.0], 1);
        one.parts_mut().0[0] = 1;
        let err = sums.merge(&one).unwrap_err();
        assert!(err.to_string().contains("overflows sums"), "{err}");
        assert_eq!(sums, before);
    }

    #[test]
    fn rejection_counts_that_would_overflow_are_refused() {
        let mut a = BitSketch::new(1);
        a.rejected_mut().add(RejectReason::Null, u64::MAX);
        let mut b = BitSketch::new(1);
        b.rejected_mut().add(RejectReason::Null, 1);
        let err = a.merge(&b).unwrap_err();
        assert!(err.to_string().contains("null"), "{err}");
        assert_eq!(a.rejected().get(RejectReason::Null), u64::MAX);
    }
}
