//! The table slot of each OLH report, a block at a time: `i·g + y` for a good report,
//! `S·g` for an index outside the pool and `S·g + 1` for a bucket outside [g] (a bad
//! index wins, as in [`crate::fold::ReportCheck::pooled`]).
//!
//! The slots are computed branch-free so that the compiler vectorizes the loop. The
//! baseline x86-64 target has no 32-bit vector multiply (`pmulld` is SSE4.1), so the same
//! loop is also compiled for AVX2 and AVX-512 and chosen by runtime CPU detection; on
//! the bench machine that took the OLH fold from 0.3× to about 0.7× GenRR's rate per
//! report (benches/RESULTS.md).

/// The pool table's shape, with its two rejection slots.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    rows: u32,
    g: u32,
    cells: u32,
}

impl Shape {
    /// `rows · g` must fit u32 with two to spare, which the config's and the codec's
    /// bound (S·g ≤ 2²⁴) guarantees; `None` otherwise.
    pub fn new(rows: usize, g: usize) -> Option<Shape> {
        let (rows, g) = (u32::try_from(rows).ok()?, u32::try_from(g).ok()?);
        let cells = rows.checked_mul(g).filter(|c| c.checked_add(1).is_some())?;
        Some(Shape { rows, g, cells })
    }

    pub fn cells(&self) -> usize {
        self.cells as usize
    }

    #[inline(always)]
    pub fn slot(&self, i: u32, y: u32) -> u32 {
        let good_i = i < self.rows;
        let bad = self.cells.wrapping_add(u32::from(good_i));
        if good_i & (y < self.g) {
            i.wrapping_mul(self.g).wrapping_add(y)
        } else {
            bad
        }
    }
}

/// Writes the slots of `idx`/`ys` (equal lengths, at most `slots.len()`) into `slots`.
pub fn block_slots(slots: &mut [u32], idx: &[u32], ys: &[u32], shape: Shape) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vl")
        {
            // SAFETY: the features `slots_avx512` enables were detected just above.
            return unsafe { slots_avx512(slots, idx, ys, shape) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: as above, for AVX2.
            return unsafe { slots_avx2(slots, idx, ys, shape) };
        }
    }
    slots_portable(slots, idx, ys, shape)
}

#[inline(always)]
fn slots_portable(slots: &mut [u32], idx: &[u32], ys: &[u32], shape: Shape) {
    for ((s, &i), &y) in slots.iter_mut().zip(idx).zip(ys) {
        *s = shape.slot(i, y);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn slots_avx2(slots: &mut [u32], idx: &[u32], ys: &[u32], shape: Shape) {
    slots_portable(slots, idx, ys, shape)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl")]
fn slots_avx512(slots: &mut [u32], idx: &[u32], ys: &[u32], shape: Shape) {
    slots_portable(slots, idx, ys, shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_gives_the_portable_slots() {
        let shape = Shape::new(7, 5).unwrap();
        let idx: Vec<u32> = (0..1000u32).map(|k| (k * 31) % 9).collect();
        let ys: Vec<u32> = (0..1000u32).map(|k| (k * 17) % 6).collect();
        let mut expected = vec![0u32; idx.len()];
        slots_portable(&mut expected, &idx, &ys, shape);
        assert!(expected.contains(&35) && expected.contains(&36));
        let mut got = vec![0u32; idx.len()];
        block_slots(&mut got, &idx, &ys, shape);
        assert_eq!(got, expected);
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            got.fill(0);
            // SAFETY: AVX2 was detected just above.
            unsafe { slots_avx2(&mut got, &idx, &ys, shape) };
            assert_eq!(got, expected);
        }
    }

    #[test]
    fn a_shape_without_room_for_the_rejection_slots_is_refused() {
        assert!(Shape::new(1 << 16, 1 << 16).is_none());
        assert!(Shape::new(usize::MAX, 2).is_none());
        assert_eq!(Shape::new(1024, 8).map(|s| s.cells()), Some(8192));
    }
}
