use super::codec::{write_header, Reader};
use super::{add_table, checked_sum, Rejections};
use crate::error::EngineError;

/// A table of per-category counts plus `n`: the sufficient statistic of GenRR, raw and
/// matrix-channel reports. `n` is always the sum of the table.
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

    /// The table and `n`, for fold kernels: they add to the table and settle `n` once per
    /// batch.
    pub(crate) fn parts_mut(&mut self) -> (&mut [u64], &mut u64) {
        (&mut self.counts, &mut self.n)
    }

    /// Exact merge: counts, `n` and rejections add.
    pub fn merge(&mut self, other: &CountSketch) -> Result<(), EngineError> {
        add_table(&mut self.counts, &other.counts)?;
        self.n += other.n;
        self.rejected.merge(&other.rejected);
        Ok(())
    }

    /// Body: d (u32), n (u64), d counts (u64).
    pub(crate) fn write_body(&self, out: &mut Vec<u8>) {
        write_header(out, self.counts.len(), self.n);
        for c in &self.counts {
            out.extend_from_slice(&c.to_le_bytes());
        }
    }

    pub(crate) fn read_body(r: &mut Reader) -> Result<Self, EngineError> {
        let d = r.u32("domain")? as usize;
        let n = r.u64("n")?;
        let counts = r.u64s(d, "counts")?;
        let sum = checked_sum(&counts)?;
        if sum != n {
            return Err(EngineError::Corrupt(format!(
                "counts sum to {sum} but n = {n}"
            )));
        }
        Ok(CountSketch {
            counts,
            n,
            rejected: Rejections::default(),
        })
    }
}
