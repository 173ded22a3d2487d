use super::codec::Reader;
use super::{checked_sum, Rejections};
use crate::error::EngineError;
use crate::sketch::table::{add_checked, check_add, checked_n};

/// Reports of a fixed pool of S hash seeds with g buckets (OLH): `table[i·g + y]` counts
/// the reports with pool index i and bucket y. Exact and mergeable like every sketch; the
/// support counts are computed from it at snapshot time only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSketch {
    g: usize,
    table: Vec<u64>,
    n: u64,
    rejected: Rejections,
}

impl PoolSketch {
    /// An empty S × g table.
    pub fn new(pool_size: usize, g: usize) -> Self {
        PoolSketch {
            g,
            table: vec![0; pool_size * g],
            n: 0,
            rejected: Rejections::default(),
        }
    }

    /// A sketch of the given row-major S × g table.
    pub fn from_table(g: usize, table: Vec<u64>) -> Result<Self, EngineError> {
        if g == 0 || !table.len().is_multiple_of(g) {
            return Err(EngineError::Corrupt(format!(
                "a pool table of {} cells is not whole rows of g = {g}",
                table.len()
            )));
        }
        let n = checked_sum(&table)?;
        Ok(PoolSketch {
            g,
            table,
            n,
            rejected: Rejections::default(),
        })
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

    /// g, the buckets per row.
    pub fn g(&self) -> usize {
        self.g
    }

    /// S, the rows.
    pub fn pool_size(&self) -> usize {
        self.table.len() / self.g.max(1)
    }

    /// The row-major S × g counts.
    pub fn table(&self) -> &[u64] {
        &self.table
    }

    /// How many reports each pool index got (the conditioning of the exact null law).
    pub fn row_totals(&self) -> Vec<u64> {
        self.table
            .chunks_exact(self.g.max(1))
            .map(|r| r.iter().sum())
            .collect()
    }

    pub(crate) fn parts_mut(&mut self) -> (&mut [u64], &mut u64) {
        (&mut self.table, &mut self.n)
    }

    /// Exact merge; refused, leaving `self` unchanged, on another shape or an overflow.
    pub fn merge(&mut self, other: &PoolSketch) -> Result<(), EngineError> {
        if self.g != other.g {
            return Err(EngineError::Corrupt(format!(
                "cannot merge a pool table of g = {} into one of g = {}",
                other.g, self.g
            )));
        }
        let n = checked_n(self.n, other.n)?;
        check_add(&self.table, &other.table, "table")?;
        self.rejected.check_merge(&other.rejected)?;
        add_checked(&mut self.table, &other.table);
        self.n = n;
        self.rejected.merge(&other.rejected);
        Ok(())
    }

    /// The body: S (u32), g (u32), n (u64), then the S·g cells, little-endian.
    pub(crate) fn write_body(&self, out: &mut Vec<u8>) {
        // S and g are each at most 2^16 (the config's and the engine's bound).
        out.extend_from_slice(&(self.pool_size() as u32).to_le_bytes());
        out.extend_from_slice(&(self.g as u32).to_le_bytes());
        out.extend_from_slice(&self.n.to_le_bytes());
        for c in &self.table {
            out.extend_from_slice(&c.to_le_bytes());
        }
    }

    pub(crate) fn read_body(r: &mut Reader) -> Result<Self, EngineError> {
        let rows = r.u32("pool size")? as usize;
        let g = r.u32("g")? as usize;
        let n = r.u64("n")?;
        let cells = rows
            .checked_mul(g)
            .filter(|&c| c as u64 <= ldpstream_config::MAX_OLH_TABLE_CELLS)
            .ok_or_else(|| {
                EngineError::Corrupt(format!("a pool table of {rows} × {g} cells is too large"))
            })?;
        let sketch = PoolSketch::from_table(g, r.u64s(cells, "pool table")?)?;
        if sketch.n != n {
            return Err(EngineError::Corrupt(format!(
                "pool cells sum to {} but n = {n}",
                sketch.n
            )));
        }
        Ok(sketch)
    }
}
