use super::codec::Reader;
use super::{Rejections, FORMAT_VERSION, MAGIC};
use crate::error::EngineError;

/// Sketch kind tag in the serialized form.
const KIND_COUNTS: u8 = 1;

/// A table of per-category counts plus `n`: the sufficient statistic of GenRR, raw and
/// matrix-channel reports. Reports that were rejected are counted by reason beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountSketch {
    counts: Vec<u64>,
    n: u64,
    rejected: Rejections,
}

impl CountSketch {
    /// An empty sketch over `d` categories.
    pub fn new(d: usize) -> Self {
        CountSketch {
            counts: vec![0; d],
            n: 0,
            rejected: Rejections::default(),
        }
    }

    /// A sketch from a count table; `n` is its sum.
    pub fn from_counts(counts: Vec<u64>) -> Self {
        let n = counts.iter().sum();
        CountSketch {
            counts,
            n,
            rejected: Rejections::default(),
        }
    }

    pub fn domain(&self) -> usize {
        self.counts.len()
    }

    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// Reports folded (rejected ones excluded).
    pub fn n(&self) -> u64 {
        self.n
    }

    pub fn rejected(&self) -> &Rejections {
        &self.rejected
    }

    pub fn rejected_mut(&mut self) -> &mut Rejections {
        &mut self.rejected
    }

    /// Adds `added` folded reports whose categories the caller already added to
    /// [`Self::counts_mut`]. Kernels write the table directly and settle `n` once per batch.
    pub fn add_n(&mut self, added: u64) {
        self.n += added;
    }

    /// The raw table, for fold kernels. Keep `n` in step with [`Self::add_n`].
    pub fn counts_mut(&mut self) -> &mut [u64] {
        &mut self.counts
    }

    /// Exact merge: counts, `n` and rejections add.
    pub fn merge(&mut self, other: &CountSketch) -> Result<(), EngineError> {
        if other.counts.len() != self.counts.len() {
            return Err(EngineError::ShapeMismatch {
                expected: self.counts.len(),
                found: other.counts.len(),
            });
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.n += other.n;
        self.rejected.merge(&other.rejected);
        Ok(())
    }

    /// Versioned little-endian encoding: `"LDPS"`, version, kind, d (u32), n (u64),
    /// d counts (u64), the number of rejection reasons (u8) and their counts (u64).
    pub fn to_bytes(&self) -> Vec<u8> {
        let reasons = self.rejected.as_slice();
        let mut out =
            Vec::with_capacity(4 + 2 + 4 + 8 + 8 * self.counts.len() + 1 + 8 * reasons.len());
        out.extend_from_slice(&MAGIC);
        out.push(FORMAT_VERSION);
        out.push(KIND_COUNTS);
        // Domains are u32 in every config; the conversion cannot truncate.
        out.extend_from_slice(&(self.counts.len() as u32).to_le_bytes());
        out.extend_from_slice(&self.n.to_le_bytes());
        for c in &self.counts {
            out.extend_from_slice(&c.to_le_bytes());
        }
        out.push(reasons.len() as u8);
        for r in reasons {
            out.extend_from_slice(&r.to_le_bytes());
        }
        out
    }

    /// Decodes [`Self::to_bytes`], checking the magic, version, kind, lengths and that the
    /// counts add up to `n`.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, EngineError> {
        let mut r = Reader::new(bytes);
        if r.take(4, "magic")? != MAGIC {
            return Err(EngineError::Corrupt("not a sketch (bad magic)".into()));
        }
        let version = r.u8("version")?;
        if version != FORMAT_VERSION {
            return Err(EngineError::UnsupportedVersion {
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let kind = r.u8("kind")?;
        if kind != KIND_COUNTS {
            return Err(EngineError::Corrupt(format!(
                "sketch kind {kind} is not a count sketch ({KIND_COUNTS})"
            )));
        }
        let d = r.u32("domain")? as usize;
        let n = r.u64("n")?;
        let counts = r.u64s(d, "counts")?;
        let reasons = r.u8("rejection reason count")? as usize;
        let rejected_counts = r.u64s(reasons, "rejections")?;
        r.finish()?;
        let rejected = Rejections::from_slice(&rejected_counts).ok_or_else(|| {
            EngineError::Corrupt(format!(
                "{reasons} rejection reasons; this build knows fewer"
            ))
        })?;
        let sum = counts
            .iter()
            .try_fold(0u64, |acc, &c| acc.checked_add(c))
            .ok_or_else(|| EngineError::Corrupt("counts overflow u64".into()))?;
        if sum != n {
            return Err(EngineError::Corrupt(format!(
                "counts sum to {sum} but n = {n}"
            )));
        }
        Ok(CountSketch {
            counts,
            n,
            rejected,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sketch::RejectReason;

    #[test]
    fn golden_bytes() {
        let mut s = CountSketch::from_counts(vec![1, 0, 2]);
        s.rejected_mut().add(RejectReason::OutOfDomain, 5);
        let expected: Vec<u8> = [
            b"LDPS".as_slice(),
            &[1, 1],
            &3u32.to_le_bytes(),
            &3u64.to_le_bytes(),
            &1u64.to_le_bytes(),
            &0u64.to_le_bytes(),
            &2u64.to_le_bytes(),
            &[2],
            &5u64.to_le_bytes(),
            &0u64.to_le_bytes(),
        ]
        .concat();
        assert_eq!(s.to_bytes(), expected);
        assert_eq!(CountSketch::from_bytes(&expected).unwrap(), s);
    }

    #[test]
    fn rejects_corrupt_bytes() {
        let good = CountSketch::from_counts(vec![4, 5]).to_bytes();
        assert!(CountSketch::from_bytes(&good[..good.len() - 1]).is_err());
        let mut bad_version = good.clone();
        bad_version[4] = 9;
        assert!(matches!(
            CountSketch::from_bytes(&bad_version),
            Err(EngineError::UnsupportedVersion { found: 9, .. })
        ));
        let mut bad_n = good.clone();
        bad_n[10] = 99;
        assert!(CountSketch::from_bytes(&bad_n).is_err());
        let mut trailing = good;
        trailing.push(0);
        assert!(CountSketch::from_bytes(&trailing).is_err());
    }

    #[test]
    fn merge_checks_shape() {
        let mut a = CountSketch::new(3);
        assert!(a.merge(&CountSketch::new(4)).is_err());
    }
}
