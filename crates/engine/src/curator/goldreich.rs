use rand::Rng;

use crate::error::EngineError;

/// Goldreich's reduction of identity to a known q on [d] to uniformity on [6d]
/// (docs/STATISTICS.md §8, seed 004 last paragraph):
/// 1. mix: keep x w.p. ½, else replace it by a uniform point of [d], so q' = (q+u)/2 ≥ 1/(2d);
/// 2. give type i a block S_i of m_i = ⌊6d q'_i⌋ points of [6d], the rest S_0;
///    map i to a uniform point of S_i w.p. m_i/(6d q'_i), else to a uniform point of S_0.
///
/// If x ~ q the image is uniform on [6d]; if x is δ-far from q it is δ/3-far from uniform.
#[derive(Debug, Clone, PartialEq)]
pub struct GoldreichMap {
    d: u32,
    /// First point of S_i, and m_i.
    start: Vec<u32>,
    size: Vec<u32>,
    /// P(map into S_i | mixed value i) = m_i/(6d q'_i).
    inside: Vec<f64>,
    /// S_0 = [rest_start, 6d).
    rest_start: u32,
}

impl GoldreichMap {
    pub fn new(q: &[f64]) -> Result<Self, EngineError> {
        let d = q.len();
        if d < 2
            || q.iter().any(|x| !(x.is_finite() && *x >= 0.0))
            || (q.iter().sum::<f64>() - 1.0).abs() > 1e-9
        {
            return Err(EngineError::invalid(
                "null",
                format!("{q:?}"),
                "a probability vector over at least 2 categories",
            ));
        }
        let six_d = 6.0 * d as f64;
        let mut start = Vec::with_capacity(d);
        let mut size = Vec::with_capacity(d);
        let mut inside = Vec::with_capacity(d);
        let mut next = 0u32;
        for &qi in q {
            let mixed = 0.5 * qi + 0.5 / d as f64;
            // Capped so that a q summing to just over 1 cannot push the blocks past 6d.
            let m = ((six_d * mixed).floor() as u32).min(6 * d as u32 - next);
            start.push(next);
            size.push(m);
            inside.push(f64::from(m) / (six_d * mixed));
            next += m;
        }
        Ok(GoldreichMap {
            d: d as u32,
            start,
            size,
            inside,
            rest_start: next,
        })
    }

    /// The size of the image domain, 6d.
    pub fn image_domain(&self) -> u32 {
        6 * self.d
    }

    /// Maps one true value `x < d` to a point of [6d].
    pub fn map<R: Rng + ?Sized>(&self, x: u32, rng: &mut R) -> u32 {
        let mixed = if rng.random::<bool>() {
            x
        } else {
            rng.random_range(0..self.d)
        } as usize;
        let rest = self.image_domain().saturating_sub(self.rest_start);
        // With S_0 empty every 6d·q'_i is a whole number and `inside` is 1 up to rounding:
        // a draw just under 1 must not fall into the empty S_0 (index 6d, past the end).
        let into_block =
            self.size[mixed] > 0 && (rest == 0 || rng.random::<f64>() < self.inside[mixed]);
        if into_block {
            self.start[mixed] + rng.random_range(0..self.size[mixed])
        } else {
            (self.rest_start + rng.random_range(0..rest.max(1))).min(self.image_domain() - 1)
        }
    }

    /// Maps a count table over [d] to one over [6d], one random image per report.
    pub fn map_counts<R: Rng + ?Sized>(&self, counts: &[u64], rng: &mut R) -> Vec<u64> {
        let mut out = vec![0u64; self.image_domain() as usize];
        for (x, &c) in counts.iter().enumerate() {
            for _ in 0..c {
                out[self.map(x as u32, rng) as usize] += 1;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::pearson_gof;
    use rand::{RngCore, SeedableRng};

    /// A generator whose every word is all ones: `random::<f64>()` is then the largest
    /// double below 1, and integer ranges give their top value.
    struct Top;

    impl RngCore for Top {
        fn next_u32(&mut self) -> u32 {
            u32::MAX
        }
        fn next_u64(&mut self) -> u64 {
            u64::MAX
        }
        fn fill_bytes(&mut self, dst: &mut [u8]) {
            dst.fill(0xff);
        }
    }

    /// q = (0, .2, .4, .2, .2) fills [30] exactly (S_0 empty), yet 6d·q'_2 = 9 rounds to
    /// just above 9, so `inside` for category 2 is 1 − 2⁻⁵² and the top uniform draw
    /// fails it: the image must still land inside [6d], for every input.
    #[test]
    fn image_stays_inside_when_the_rest_block_is_empty() {
        let third = 1.0 / 3.0;
        for q in [
            vec![0.0, 0.2, 0.4, 0.2, 0.2],
            vec![0.25; 4],
            vec![third, third, third],
            vec![0.1, 0.7, 0.2],
        ] {
            let map = GoldreichMap::new(&q).unwrap();
            for x in 0..q.len() as u32 {
                let y = map.map(x, &mut Top);
                assert!(y < map.image_domain(), "q {q:?}, x {x}: image {y}");
            }
            let counts = map.map_counts(&vec![3; q.len()], &mut Top);
            assert_eq!(counts.len(), 6 * q.len());
        }
        // A q whose blocks, rounded, would need more than 6d points.
        let q = [0.5 + 5e-10, 0.5];
        let map = GoldreichMap::new(&q).unwrap();
        assert!(map.rest_start <= map.image_domain());
        assert!(map.map(0, &mut Top) < map.image_domain());
    }

    /// Samples from q map to a law a χ² test cannot tell from uniform on [6d]
    /// (n = 10⁶, α = 1e-6); a q-far input maps far from uniform.
    #[test]
    fn maps_q_to_uniform_and_far_to_far() {
        let q = [0.5, 0.2, 0.15, 0.1, 0.05];
        let map = GoldreichMap::new(&q).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(6);
        let n = 1_000_000u64;
        let draw = |p: &[f64], rng: &mut rand::rngs::StdRng| -> Vec<u64> {
            let mut counts = vec![0u64; p.len()];
            for _ in 0..n {
                let u: f64 = rng.random();
                let mut acc = 0.0;
                let x = p.iter().position(|&pi| {
                    acc += pi;
                    u < acc
                });
                counts[x.unwrap_or(p.len() - 1)] += 1;
            }
            counts
        };
        let uniform = vec![1.0 / 30.0; 30];
        let image = map.map_counts(&draw(&q, &mut rng), &mut rng);
        let p = pearson_gof(&image, &uniform).p_value.unwrap();
        assert!(p > 1e-6, "image of q rejected as non-uniform: p = {p}");
        let far = [0.05, 0.1, 0.15, 0.2, 0.5];
        let image = map.map_counts(&draw(&far, &mut rng), &mut rng);
        let total: u64 = image.iter().sum();
        let tv: f64 = 0.5
            * image
                .iter()
                .map(|&c| (c as f64 / total as f64 - 1.0 / 30.0).abs())
                .sum::<f64>();
        let tv_input: f64 = 0.5 * q.iter().zip(far).map(|(a, b)| (a - b).abs()).sum::<f64>();
        assert!(
            tv >= tv_input / 3.0 * 0.9,
            "image TV {tv} vs input TV {tv_input}"
        );
        assert!(pearson_gof(&image, &uniform).p_value.unwrap() < 1e-12);
    }
}
