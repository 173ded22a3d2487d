use rand::Rng;

use crate::error::EngineError;

/// Goldreich's reduction of identity to a known q on [d] to uniformity on [6d]
/// (STATISTICS.md §8, seed 004 last paragraph):
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
            let m = (six_d * mixed).floor() as u32;
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
        if rng.random::<f64>() < self.inside[mixed] && self.size[mixed] > 0 {
            self.start[mixed] + rng.random_range(0..self.size[mixed])
        } else {
            let rest = self.image_domain() - self.rest_start;
            self.rest_start + rng.random_range(0..rest.max(1))
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
    use rand::SeedableRng;

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
