//! Mergeable sketches: integer tables plus `n`. Merges are exact, associative and
//! commutative, so any split of the input over shards, panes or instances combines to a
//! bit-identical sketch. Floating point starts only at snapshot time.
//!
//! Every sketch serializes to a versioned little-endian form:
//! `"LDPS"`, format version (u8), kind (u8), the kind's tables, then the rejection counts
//! (u8 count, u64 each). Version 2 added the sparse count table (kind 5); version 1 files
//! are still read. Kind 6 (OLH's pool table) came later within version 2: an older build
//! refuses it as an unknown kind, naming it.

mod bits;
pub(crate) mod codec;
pub(crate) mod counts;
mod pool;
mod rejections;
mod signed;
mod sums;
pub(crate) mod table;

pub use bits::BitSketch;
pub use counts::{nonzero_cells, CountSketch, SPARSE_CELL_BYTES, SPARSE_FROM_DOMAIN};
pub use pool::PoolSketch;
pub use rejections::{RejectReason, Rejections};
pub use signed::SignedSketch;
pub use sums::{SumSketch, FIXED_POINT_SCALE};

use crate::error::EngineError;
use codec::Reader;

/// The first bytes of every serialized sketch.
pub const MAGIC: [u8; 4] = *b"LDPS";
/// The serialization format this build writes (it also reads version 1).
pub const FORMAT_VERSION: u8 = 2;

const KIND_COUNTS: u8 = 1;
const KIND_BITS: u8 = 2;
const KIND_SIGNED: u8 = 3;
const KIND_SUMS: u8 = 4;
const KIND_SPARSE_COUNTS: u8 = 5;
const KIND_POOL: u8 = 6;

/// The sketch of any mechanism. Each mechanism owns exactly one variant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sketch {
    /// GenRR, matrix channel and raw reports: per-signal counts.
    Counts(CountSketch),
    /// Bit flip: per-bit counts.
    Bits(BitSketch),
    /// Hadamard and cohort: per-row (+1, −1) counts.
    Signed(SignedSketch),
    /// Gaussian and Laplace noise: fixed-point coordinate sums.
    Sums(SumSketch),
    /// OLH: an S × g table of (pool index, bucket) counts.
    Pool(PoolSketch),
}

impl Sketch {
    /// Reports folded.
    pub fn n(&self) -> u64 {
        match self {
            Sketch::Counts(s) => s.n(),
            Sketch::Bits(s) => s.n(),
            Sketch::Signed(s) => s.n(),
            Sketch::Sums(s) => s.n(),
            Sketch::Pool(s) => s.n(),
        }
    }

    pub fn rejected(&self) -> &Rejections {
        match self {
            Sketch::Counts(s) => s.rejected(),
            Sketch::Bits(s) => s.rejected(),
            Sketch::Signed(s) => s.rejected(),
            Sketch::Sums(s) => s.rejected(),
            Sketch::Pool(s) => s.rejected(),
        }
    }

    pub fn rejected_mut(&mut self) -> &mut Rejections {
        match self {
            Sketch::Counts(s) => s.rejected_mut(),
            Sketch::Bits(s) => s.rejected_mut(),
            Sketch::Signed(s) => s.rejected_mut(),
            Sketch::Sums(s) => s.rejected_mut(),
            Sketch::Pool(s) => s.rejected_mut(),
        }
    }

    /// The bytes this sketch holds on the heap plus its own size, for memory estimates.
    pub fn heap_bytes(&self) -> usize {
        let table = match self {
            Sketch::Counts(s) => s.table_bytes(),
            Sketch::Bits(s) => std::mem::size_of_val(s.bit_counts()),
            Sketch::Signed(s) => 2 * s.rows() * std::mem::size_of::<u64>(),
            Sketch::Sums(s) => std::mem::size_of_val(s.sums()),
            Sketch::Pool(s) => std::mem::size_of_val(s.table()),
        };
        table + std::mem::size_of::<Sketch>()
    }

    /// The most this sketch can ever hold, however many reports it folds: a sparse count
    /// table turns dense before it would outgrow the dense one.
    pub fn max_heap_bytes(&self) -> usize {
        match self {
            Sketch::Counts(s) => s.domain() * 8 + std::mem::size_of::<Sketch>(),
            other => other.heap_bytes(),
        }
    }

    /// Whether the table keeps only its non-zero cells while few are (then each report
    /// adds at most one cell of [`SPARSE_CELL_BYTES`]).
    pub fn starts_sparse(&self) -> bool {
        matches!(self, Sketch::Counts(s) if s.is_sparse())
    }

    /// The number of cells, for shape checks.
    pub fn cells(&self) -> usize {
        match self {
            Sketch::Counts(s) => s.domain(),
            Sketch::Bits(s) => s.bit_counts().len(),
            Sketch::Signed(s) => s.rows(),
            Sketch::Sums(s) => s.sums().len(),
            Sketch::Pool(s) => s.table().len(),
        }
    }

    /// Exact merge of two sketches of the same mechanism and shape.
    pub fn merge(&mut self, other: &Sketch) -> Result<(), EngineError> {
        match (self, other) {
            (Sketch::Counts(a), Sketch::Counts(b)) => a.merge(b),
            (Sketch::Bits(a), Sketch::Bits(b)) => a.merge(b),
            (Sketch::Signed(a), Sketch::Signed(b)) => a.merge(b),
            (Sketch::Sums(a), Sketch::Sums(b)) => a.merge(b),
            (Sketch::Pool(a), Sketch::Pool(b)) => a.merge(b),
            (a, b) => Err(EngineError::Corrupt(format!(
                "cannot merge a {} sketch into a {} sketch",
                b.kind_name(),
                a.kind_name()
            ))),
        }
    }

    fn kind_name(&self) -> &'static str {
        match self {
            Sketch::Counts(_) => "count",
            Sketch::Bits(_) => "bit",
            Sketch::Signed(_) => "signed",
            Sketch::Sums(_) => "sum",
            Sketch::Pool(_) => "pool",
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&MAGIC);
        out.push(FORMAT_VERSION);
        match self {
            Sketch::Counts(s) => {
                out.push(if s.writes_sparse() {
                    KIND_SPARSE_COUNTS
                } else {
                    KIND_COUNTS
                });
                s.write_body(&mut out);
            }
            Sketch::Bits(s) => {
                out.push(KIND_BITS);
                s.write_body(&mut out);
            }
            Sketch::Signed(s) => {
                out.push(KIND_SIGNED);
                s.write_body(&mut out);
            }
            Sketch::Sums(s) => {
                out.push(KIND_SUMS);
                s.write_body(&mut out);
            }
            Sketch::Pool(s) => {
                out.push(KIND_POOL);
                s.write_body(&mut out);
            }
        }
        let reasons = self.rejected().as_slice();
        out.push(reasons.len() as u8);
        for r in reasons {
            out.extend_from_slice(&r.to_le_bytes());
        }
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, EngineError> {
        let mut r = Reader::new(bytes);
        if r.take(4, "magic")? != MAGIC {
            return Err(EngineError::Corrupt("not a sketch (bad magic)".into()));
        }
        let version = r.u8("version")?;
        if !(1..=FORMAT_VERSION).contains(&version) {
            return Err(EngineError::UnsupportedVersion {
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let mut sketch = match r.u8("kind")? {
            KIND_COUNTS => Sketch::Counts(CountSketch::read_body(&mut r)?),
            KIND_BITS => Sketch::Bits(BitSketch::read_body(&mut r)?),
            KIND_SIGNED => Sketch::Signed(SignedSketch::read_body(&mut r)?),
            KIND_SUMS => Sketch::Sums(SumSketch::read_body(&mut r)?),
            KIND_POOL if version >= 2 => Sketch::Pool(PoolSketch::read_body(&mut r)?),
            KIND_SPARSE_COUNTS if version >= 2 => {
                Sketch::Counts(CountSketch::read_sparse_body(&mut r)?)
            }
            other => return Err(EngineError::Corrupt(format!("unknown sketch kind {other}"))),
        };
        let reasons = r.u8("rejection reason count")? as usize;
        let counts = r.u64s(reasons, "rejections")?;
        r.finish()?;
        *sketch.rejected_mut() = Rejections::from_slice(&counts).ok_or_else(|| {
            EngineError::Corrupt(format!(
                "{reasons} rejection reasons; this build knows fewer"
            ))
        })?;
        Ok(sketch)
    }
}

/// Sums a table, failing on overflow (only corrupt input can overflow u64 here).
fn checked_sum(values: &[u64]) -> Result<u64, EngineError> {
    values
        .iter()
        .try_fold(0u64, |acc, &c| acc.checked_add(c))
        .ok_or_else(|| EngineError::Corrupt("counts overflow u64".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_bytes_counts() {
        let mut s = CountSketch::from_counts(vec![1, 0, 2]);
        s.rejected_mut().add(RejectReason::OutOfDomain, 5);
        let s = Sketch::Counts(s);
        let mut expected: Vec<u8> = [
            b"LDPS".as_slice(),
            &[2, 1],
            &3u32.to_le_bytes(),
            &3u64.to_le_bytes(),
            &1u64.to_le_bytes(),
            &0u64.to_le_bytes(),
            &2u64.to_le_bytes(),
            &[RejectReason::COUNT as u8],
            &5u64.to_le_bytes(),
        ]
        .concat();
        expected.extend(std::iter::repeat_n(0u8, 8 * (RejectReason::COUNT - 1)));
        assert_eq!(s.to_bytes(), expected);
        assert_eq!(Sketch::from_bytes(&expected).unwrap(), s);
    }

    #[test]
    fn sparse_counts_golden_bytes_and_version_1_still_read() {
        let d = SPARSE_FROM_DOMAIN + 1;
        let mut table = vec![0u64; d];
        table[5] = 3;
        let s = Sketch::Counts(CountSketch::from_counts(table));
        assert!(s.starts_sparse());
        let mut expected: Vec<u8> = [
            b"LDPS".as_slice(),
            &[2, 5],
            &(d as u32).to_le_bytes(),
            &3u64.to_le_bytes(),
            &1u32.to_le_bytes(),
            &5u32.to_le_bytes(),
            &3u64.to_le_bytes(),
            &[RejectReason::COUNT as u8],
        ]
        .concat();
        expected.extend(std::iter::repeat_n(0u8, 8 * RejectReason::COUNT));
        assert_eq!(s.to_bytes(), expected);
        assert_eq!(Sketch::from_bytes(&expected).unwrap(), s);
        // Version 1 had no sparse kind; its dense tables are still read.
        let mut old = expected.clone();
        old[4] = 1;
        assert!(Sketch::from_bytes(&old).is_err());
        let dense = Sketch::Counts(CountSketch::from_counts(vec![1, 0, 2]));
        let mut v1 = dense.to_bytes();
        v1[4] = 1;
        assert_eq!(Sketch::from_bytes(&v1).unwrap(), dense);
        // A cell out of order, or a zero cell, is corrupt.
        let mut zero = expected.clone();
        zero[23..31].copy_from_slice(&0u64.to_le_bytes());
        assert!(Sketch::from_bytes(&zero).is_err());
    }

    #[test]
    fn golden_bytes_signed_and_sums() {
        let s = Sketch::Signed(SignedSketch::from_tables(vec![2, 0], vec![1, 3]).unwrap());
        let b = s.to_bytes();
        assert_eq!(&b[..6], b"LDPS\x02\x03");
        assert_eq!(&b[6..10], &2u32.to_le_bytes());
        assert_eq!(&b[10..18], &6u64.to_le_bytes());
        assert_eq!(Sketch::from_bytes(&b).unwrap(), s);
        let mut sums = SumSketch::new(2);
        sums.add_row_fixed(&[-(1i128 << 40), 7]);
        let s = Sketch::Sums(sums);
        let b = s.to_bytes();
        assert_eq!(&b[..6], b"LDPS\x02\x04");
        assert_eq!(Sketch::from_bytes(&b).unwrap(), s);
    }

    #[test]
    fn golden_bytes_pool() {
        let mut s = PoolSketch::from_table(2, vec![1, 0, 0, 3, 2, 0]).unwrap();
        s.rejected_mut().add(RejectReason::SeedOutOfPool, 4);
        let s = Sketch::Pool(s);
        let b = s.to_bytes();
        assert_eq!(&b[..6], b"LDPS\x02\x06");
        assert_eq!(&b[6..10], &3u32.to_le_bytes());
        assert_eq!(&b[10..14], &2u32.to_le_bytes());
        assert_eq!(&b[14..22], &6u64.to_le_bytes());
        assert_eq!(&b[22..30], &1u64.to_le_bytes());
        assert_eq!(Sketch::from_bytes(&b).unwrap(), s);
        // n that disagrees with the cells, a table too large, and a g mismatch are refused.
        let mut bad_n = b.clone();
        bad_n[14] = 7;
        assert!(Sketch::from_bytes(&bad_n).is_err());
        let mut huge = b.clone();
        huge[6..10].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Sketch::from_bytes(&huge).is_err());
        let mut other = Sketch::Pool(PoolSketch::new(2, 3));
        assert!(other.merge(&s).is_err());
    }

    #[test]
    fn rejects_corrupt_bytes() {
        let good = Sketch::Counts(CountSketch::from_counts(vec![4, 5])).to_bytes();
        assert!(Sketch::from_bytes(&good[..good.len() - 1]).is_err());
        let mut bad_version = good.clone();
        bad_version[4] = 9;
        assert!(matches!(
            Sketch::from_bytes(&bad_version),
            Err(EngineError::UnsupportedVersion { found: 9, .. })
        ));
        let mut bad_n = good.clone();
        bad_n[10] = 99;
        assert!(Sketch::from_bytes(&bad_n).is_err());
        let mut bad_kind = good.clone();
        bad_kind[5] = 77;
        assert!(Sketch::from_bytes(&bad_kind).is_err());
        let mut trailing = good;
        trailing.push(0);
        assert!(Sketch::from_bytes(&trailing).is_err());
    }

    #[test]
    fn merge_checks_kind_and_shape() {
        let mut a = Sketch::Counts(CountSketch::new(3));
        assert!(a.merge(&Sketch::Counts(CountSketch::new(4))).is_err());
        assert!(a.merge(&Sketch::Bits(BitSketch::new(3))).is_err());
    }
}
