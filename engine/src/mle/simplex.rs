use super::{Mle, MLE_MAX_ITERATIONS, MLE_TOLERANCE};

/// Euclidean projection onto the probability simplex (sort-based, O(d log d)).
pub fn project_to_simplex(v: &[f64]) -> Vec<f64> {
    let mut sorted = v.to_vec();
    sorted.sort_by(|a, b| b.total_cmp(a));
    let mut cumulative = 0.0;
    let mut theta = 0.0;
    for (k, &u) in sorted.iter().enumerate() {
        cumulative += u;
        let t = (cumulative - 1.0) / (k + 1) as f64;
        if u - t > 0.0 {
            theta = t;
        }
    }
    v.iter().map(|&x| (x - theta).max(0.0)).collect()
}

/// The maximiser over the simplex of the composite likelihood that treats the d report
/// bits as independent: `Σ_j H_j ln p̃_j + (n − H_j) ln(1 − p̃_j)`, `p̃_j = c + α p_j`.
/// (Bit counts are not sufficient for the full likelihood of bit-flip reports, so this is
/// the likelihood the sketch supports.) The problem is separable and concave, so the KKT
/// conditions give each `p_j` in closed form for a multiplier μ, found by bisection so that
/// `Σ p_j = 1`.
pub fn bitflip_composite_mle(bit_counts: &[u64], n: u64, alpha: f64, c: f64) -> Mle {
    let d = bit_counts.len();
    if n == 0 {
        return Mle {
            p: vec![1.0 / d as f64; d],
            iterations: 0,
            converged: false,
        };
    }
    let nf = n as f64;
    // The bit mean u = c + αp that zeroes the derivative α(H/u − (n−H)/(1−u)) − μ:
    // μu² − (μ + αn)u + αH = 0, the root in (0, 1), written to avoid cancellation.
    let p_of = |mu: f64| -> Vec<f64> {
        bit_counts
            .iter()
            .map(|&h| {
                let h = h as f64;
                let b = mu + alpha * nf;
                let disc = (b * b - 4.0 * mu * alpha * h).max(0.0);
                let u = if b > 0.0 {
                    2.0 * alpha * h / (b + disc.sqrt())
                } else {
                    (b - disc.sqrt()) / (2.0 * mu)
                };
                ((u - c) / alpha).clamp(0.0, 1.0)
            })
            .collect()
    };
    let total = |mu: f64| p_of(mu).iter().sum::<f64>();
    // Σp is decreasing in μ; bracket the root.
    let (mut lo, mut hi) = (-alpha * nf, alpha * nf);
    let mut widen = 0;
    while total(lo) < 1.0 && widen < 200 {
        lo *= 2.0;
        widen += 1;
    }
    while total(hi) > 1.0 && widen < 400 {
        hi *= 2.0;
        widen += 1;
    }
    let mut iterations = 0;
    while iterations < MLE_MAX_ITERATIONS
        && (hi - lo) > MLE_TOLERANCE * (1.0 + hi.abs().max(lo.abs()))
    {
        let mid = 0.5 * (lo + hi);
        if total(mid) > 1.0 {
            lo = mid;
        } else {
            hi = mid;
        }
        iterations += 1;
    }
    let mut p = p_of(0.5 * (lo + hi));
    let s: f64 = p.iter().sum();
    let converged = (s - 1.0).abs() < 1e-9;
    if s > 0.0 {
        p.iter_mut().for_each(|x| *x /= s);
    }
    Mle {
        p,
        iterations,
        converged,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projection_is_identity_inside_and_clips_outside() {
        let inside = [0.2, 0.3, 0.5];
        assert_eq!(project_to_simplex(&inside), inside.to_vec());
        let p = project_to_simplex(&[0.9, 0.4, -0.3]);
        assert!((p[0] - 0.75).abs() < 1e-15 && (p[1] - 0.25).abs() < 1e-15 && p[2] == 0.0);
    }
}
