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
/// conditions give each `p_j` in closed form for a multiplier μ; μ solves `Σ p_j(μ) = 1`
/// by safeguarded Newton steps inside a bisection bracket, to `|Σ p − 1| < 1e-12`.
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
    // For a multiplier μ: Σ p_j(μ) and its derivative. The bit mean u = c + αp zeroes
    // α(H/u − (n−H)/(1−u)) − μ, i.e. μu² − (μ + αn)u + αH = 0; take the root in (0, 1),
    // written to avoid cancellation. Clamped coordinates contribute no slope.
    let bit_mean = |h: f64, mu: f64| -> f64 {
        let b = mu + alpha * nf;
        let disc = (b * b - 4.0 * mu * alpha * h).max(0.0);
        if b > 0.0 {
            2.0 * alpha * h / (b + disc.sqrt())
        } else {
            (b - disc.sqrt()) / (2.0 * mu)
        }
    };
    let eval = |mu: f64| -> (f64, f64) {
        let mut total = 0.0;
        let mut slope = 0.0;
        for &h in bit_counts {
            let h = h as f64;
            let u = bit_mean(h, mu);
            let p = (u - c) / alpha;
            if p <= 0.0 {
                continue;
            }
            if p >= 1.0 {
                total += 1.0;
                continue;
            }
            total += p;
            let curvature = alpha * (h / (u * u) + (nf - h) / ((1.0 - u) * (1.0 - u)));
            if curvature > 0.0 {
                slope -= 1.0 / (alpha * curvature);
            }
        }
        (total, slope)
    };
    let p_of = |mu: f64| -> Vec<f64> {
        bit_counts
            .iter()
            .map(|&h| ((bit_mean(h as f64, mu) - c) / alpha).clamp(0.0, 1.0))
            .collect()
    };
    // Σp is decreasing in μ; bracket the root.
    let (mut lo, mut hi) = (-alpha * nf, alpha * nf);
    let mut widen = 0;
    while eval(lo).0 < 1.0 && widen < 200 {
        lo *= 2.0;
        widen += 1;
    }
    while eval(hi).0 > 1.0 && widen < 400 {
        hi *= 2.0;
        widen += 1;
    }
    let mut mu = 0.0f64.clamp(lo, hi);
    let mut iterations = 0;
    let mut converged = false;
    while iterations < MLE_MAX_ITERATIONS {
        iterations += 1;
        let (total, slope) = eval(mu);
        let excess = total - 1.0;
        if excess.abs() < 1e-12 {
            converged = true;
            break;
        }
        if excess > 0.0 {
            lo = mu;
        } else {
            hi = mu;
        }
        let newton = if slope < 0.0 {
            mu - excess / slope
        } else {
            f64::NAN
        };
        mu = if newton > lo && newton < hi {
            newton
        } else {
            0.5 * (lo + hi)
        };
        if (hi - lo) <= MLE_TOLERANCE * (1.0 + hi.abs().max(lo.abs())) {
            converged = (eval(mu).0 - 1.0).abs() < 1e-9;
            break;
        }
    }
    let mut p = p_of(mu);
    let s: f64 = p.iter().sum();
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

#[cfg(test)]
mod bitflip_tests {
    use super::*;

    /// The unbiased estimate is the composite MLE when it lies inside the simplex.
    #[test]
    fn interior_solution_is_the_unbiased_estimate() {
        let h = 0.5f64.exp();
        let (alpha, c) = ((h - 1.0) / (h + 1.0), 1.0 / (h + 1.0));
        let n = 100_000u64;
        let p = [0.4, 0.3, 0.2, 0.1];
        let counts: Vec<u64> = p
            .iter()
            .map(|q| ((alpha * q + c) * n as f64).round() as u64)
            .collect();
        let mle = bitflip_composite_mle(&counts, n, alpha, c);
        assert!(mle.converged && mle.iterations < 50, "{mle:?}");
        for (a, b) in mle.p.iter().zip(p) {
            assert!((a - b).abs() < 1e-4, "{mle:?}");
        }
    }
}
