use super::codec::Reader;
use super::Rejections;
use crate::error::EngineError;

/// Noise reports are real vectors; their sum is kept in fixed point at this resolution
/// (2⁻³²) in i128, so that merges are exact integer additions in any order. A coordinate
/// is accepted when |x| < 2³¹, so one report adds less than 2⁶³ per cell and 2⁶⁴ reports
/// cannot overflow.
pub const FIXED_POINT_SCALE: f64 = 4_294_967_296.0;

/// Largest accepted magnitude of one noisy coordinate.
pub const MAX_COORDINATE: f64 = 2_147_483_648.0;

/// Gaussian or Laplace noise reports: the fixed-point sum of the report vectors, and `n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SumSketch {
    sums: Vec<i128>,
    n: u64,
    rejected: Rejections,
}

impl SumSketch {
    pub fn new(d: usize) -> Self {
        SumSketch {
            sums: vec![0; d],
            n: 0,
            rejected: Rejections::default(),
        }
    }

    /// The fixed-point image of one coordinate, or None when it is not finite or too large.
    #[inline]
    pub fn to_fixed(x: f64) -> Option<i128> {
        if x.is_finite() && x.abs() < MAX_COORDINATE {
            Some((x * FIXED_POINT_SCALE).round() as i64 as i128)
        } else {
            None
        }
    }

    /// A sketch whose sums are given in real units (simulated null sketches).
    pub fn from_sums_f64(sums: &[f64], n: u64) -> Self {
        SumSketch {
            sums: sums
                .iter()
                .map(|&s| (s * FIXED_POINT_SCALE).round() as i128)
                .collect(),
            n,
            rejected: Rejections::default(),
        }
    }

    /// Adds one report already converted with [`Self::to_fixed`].
    pub fn add_row_fixed(&mut self, row: &[i128]) {
        for (s, x) in self.sums.iter_mut().zip(row) {
            *s += x;
        }
        self.n += 1;
    }

    pub fn sums(&self) -> &[i128] {
        &self.sums
    }

    /// The sum vector Ĥ in real units.
    pub fn sums_f64(&self) -> Vec<f64> {
        self.sums
            .iter()
            .map(|&s| s as f64 / FIXED_POINT_SCALE)
            .collect()
    }

    pub(crate) fn parts_mut(&mut self) -> (&mut [i128], &mut u64) {
        (&mut self.sums, &mut self.n)
    }

    pub(crate) fn read_body(r: &mut Reader) -> Result<Self, EngineError> {
        let d = r.u32("domain")? as usize;
        let n = r.u64("n")?;
        let len = d
            .checked_mul(16)
            .ok_or_else(|| EngineError::Corrupt("sum table length overflows".into()))?;
        let sums = r
            .take(len, "sums")?
            .chunks_exact(16)
            .map(|c| {
                let mut a = [0u8; 16];
                a.copy_from_slice(c);
                i128::from_le_bytes(a)
            })
            .collect();
        Ok(SumSketch {
            sums,
            n,
            rejected: Rejections::default(),
        })
    }
}

crate::table_sketch!(SumSketch { sums });
