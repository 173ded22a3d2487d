use super::codec::Reader;
use super::{checked_sum, Rejections};
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

    pub(crate) fn parts_mut(&mut self) -> (&mut [u64], &mut [u64], &mut u64) {
        (&mut self.plus, &mut self.minus, &mut self.n)
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

crate::table_sketch!(SignedSketch { plus, minus });
