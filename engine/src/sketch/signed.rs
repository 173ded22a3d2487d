use super::codec::{write_header, Reader};
use super::{add_table, checked_sum, Rejections};
use crate::error::EngineError;

/// Reports of a public ±1 family (Hadamard rows or cohorts): for each row j, how many
/// reports said +1 and how many said −1. `signed[j] = plus[j] − minus[j]` drives the
/// estimator; the per-row totals are kept too, because the likelihood needs them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedSketch {
    plus: Vec<u64>,
    minus: Vec<u64>,
    n: u64,
    rejected: Rejections,
}

impl SignedSketch {
    pub fn new(rows: usize) -> Self {
        SignedSketch {
            plus: vec![0; rows],
            minus: vec![0; rows],
            n: 0,
            rejected: Rejections::default(),
        }
    }

    pub fn from_tables(plus: Vec<u64>, minus: Vec<u64>) -> Result<Self, EngineError> {
        if plus.len() != minus.len() {
            return Err(EngineError::ShapeMismatch {
                expected: plus.len(),
                found: minus.len(),
            });
        }
        let n = checked_sum(&plus)?
            .checked_add(checked_sum(&minus)?)
            .ok_or_else(|| EngineError::Corrupt("counts overflow u64".into()))?;
        Ok(SignedSketch {
            plus,
            minus,
            n,
            rejected: Rejections::default(),
        })
    }

    pub fn rows(&self) -> usize {
        self.plus.len()
    }

    pub fn plus(&self) -> &[u64] {
        &self.plus
    }

    pub fn minus(&self) -> &[u64] {
        &self.minus
    }

    /// `plus[j] − minus[j]` per row, as f64 for the estimators.
    pub fn signed(&self) -> Vec<f64> {
        self.plus
            .iter()
            .zip(&self.minus)
            .map(|(&p, &m)| p as f64 - m as f64)
            .collect()
    }

    pub fn n(&self) -> u64 {
        self.n
    }

    pub fn rejected(&self) -> &Rejections {
        &self.rejected
    }

    pub fn rejected_mut(&mut self) -> &mut Rejections {
        &mut self.rejected
    }

    pub(crate) fn parts_mut(&mut self) -> (&mut [u64], &mut [u64], &mut u64) {
        (&mut self.plus, &mut self.minus, &mut self.n)
    }

    pub fn merge(&mut self, other: &SignedSketch) -> Result<(), EngineError> {
        add_table(&mut self.plus, &other.plus)?;
        add_table(&mut self.minus, &other.minus)?;
        self.n += other.n;
        self.rejected.merge(&other.rejected);
        Ok(())
    }

    /// Body: rows (u32), n (u64), rows plus counts (u64), rows minus counts (u64).
    pub(crate) fn write_body(&self, out: &mut Vec<u8>) {
        write_header(out, self.plus.len(), self.n);
        for c in self.plus.iter().chain(&self.minus) {
            out.extend_from_slice(&c.to_le_bytes());
        }
    }

    pub(crate) fn read_body(r: &mut Reader) -> Result<Self, EngineError> {
        let rows = r.u32("rows")? as usize;
        let n = r.u64("n")?;
        let plus = r.u64s(rows, "plus counts")?;
        let minus = r.u64s(rows, "minus counts")?;
        let sketch = SignedSketch::from_tables(plus, minus)?;
        if sketch.n != n {
            return Err(EngineError::Corrupt(format!(
                "row counts sum to {} but n = {n}",
                sketch.n
            )));
        }
        Ok(sketch)
    }
}
