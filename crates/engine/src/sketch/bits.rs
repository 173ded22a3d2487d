use super::codec::Reader;
use super::Rejections;
use crate::error::EngineError;

/// Bit-flip reports: how many reports had bit j set, for each of the d bits, and `n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BitSketch {
    bit_counts: Vec<u64>,
    n: u64,
    rejected: Rejections,
}

impl BitSketch {
    pub fn new(d: usize) -> Self {
        BitSketch {
            bit_counts: vec![0; d],
            n: 0,
            rejected: Rejections::default(),
        }
    }

    /// A sketch from per-bit counts over `n` reports; no count may exceed `n`.
    pub fn from_counts(bit_counts: Vec<u64>, n: u64) -> Result<Self, EngineError> {
        if let Some(c) = bit_counts.iter().find(|&&c| c > n) {
            return Err(EngineError::Corrupt(format!(
                "a bit count of {c} exceeds n = {n}"
            )));
        }
        Ok(BitSketch {
            bit_counts,
            n,
            rejected: Rejections::default(),
        })
    }

    pub fn bit_counts(&self) -> &[u64] {
        &self.bit_counts
    }

    pub(crate) fn parts_mut(&mut self) -> (&mut [u64], &mut u64) {
        (&mut self.bit_counts, &mut self.n)
    }

    pub(crate) fn read_body(r: &mut Reader) -> Result<Self, EngineError> {
        let d = r.u32("domain")? as usize;
        let n = r.u64("n")?;
        let counts = r.u64s(d, "bit counts")?;
        BitSketch::from_counts(counts, n)
    }
}

crate::table_sketch!(BitSketch { bit_counts });
