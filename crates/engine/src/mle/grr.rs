use super::Mle;

/// The exact maximum-likelihood estimate under GenRR, whose report law is `q = ρ1 + γp`.
///
/// EM on this channel converges sublinearly whenever the maximiser lies on a face of the
/// simplex (some unbiased estimate below 0, which is the common case for a near-uniform
/// law and a few thousand reports): it ran to its iteration cap on most windows of a
/// 500-group sliding-window monitor and held a snapshot round for minutes
/// (benches/overload_rss.sh). The likelihood `Σ c_s log(ρ + γ p_s)` is separable, so its
/// KKT conditions give the maximiser directly: `p_s = max(0, c_s/λ − ρ/γ)` with λ fixed by
/// `Σ p_s = 1`, found by water-filling over the counts in decreasing order. With every
/// category active this is the unbiased estimate `(c/n − ρ)/γ`.
pub fn grr_mle(counts: &[f64], rho: f64, gamma: f64) -> Mle {
    let d = counts.len();
    let n: f64 = counts.iter().sum();
    if d == 0 || n <= 0.0 || gamma <= 0.0 || !n.is_finite() {
        // ε = 0 (γ = 0) carries no information: every law is a maximiser.
        return Mle {
            p: vec![1.0 / d.max(1) as f64; d],
            iterations: 0,
            converged: false,
        };
    }
    let shift = rho / gamma;
    let mut order: Vec<usize> = (0..d).collect();
    order.sort_by(|&a, &b| counts[b].total_cmp(&counts[a]));
    // The active set is a prefix of the counts in decreasing order: p_s > 0 exactly when
    // c_s > λ·ρ/γ. Grow it while the next count still clears the threshold of the prefix.
    let mut sum = 0.0;
    let mut lambda = f64::INFINITY;
    for (k, &s) in order.iter().enumerate() {
        let c = counts[s];
        if c <= 0.0 {
            break;
        }
        let candidate = (sum + c) / (1.0 + (k + 1) as f64 * shift);
        if k > 0 && c <= candidate * shift {
            break;
        }
        sum += c;
        lambda = candidate;
    }
    let mut p: Vec<f64> = counts
        .iter()
        .map(|&c| (c / lambda - shift).max(0.0))
        .collect();
    // The prefix sums to 1 up to rounding; renormalise so the result is on the simplex.
    let total: f64 = p.iter().sum();
    p.iter_mut().for_each(|x| *x /= total);
    Mle {
        p,
        iterations: 0,
        converged: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mle::{em, EmOperator};
    use proptest::prelude::*;

    struct Grr {
        d: usize,
        rho: f64,
        gamma: f64,
    }

    impl EmOperator for Grr {
        fn types(&self) -> usize {
            self.d
        }
        fn forward(&self, p: &[f64]) -> Vec<f64> {
            p.iter().map(|&x| self.rho + self.gamma * x).collect()
        }
        fn adjoint(&self, w: &[f64]) -> Vec<f64> {
            let total: f64 = w.iter().sum();
            w.iter()
                .map(|&x| self.rho * total + self.gamma * x)
                .collect()
        }
    }

    fn channel(epsilon: f64, d: usize) -> Grr {
        let decay = (-epsilon).exp();
        let denom = 1.0 + (d as f64 - 1.0) * decay;
        Grr {
            d,
            rho: decay / denom,
            gamma: -(-epsilon).exp_m1() / denom,
        }
    }

    fn log_likelihood(op: &Grr, counts: &[f64], p: &[f64]) -> f64 {
        counts
            .iter()
            .zip(op.forward(p))
            .filter(|(&c, _)| c > 0.0)
            .map(|(&c, q)| c * q.ln())
            .sum()
    }

    #[test]
    fn interior_maximiser_is_the_unbiased_estimate() {
        let op = channel(2.0, 4);
        let counts = [400.0, 300.0, 200.0, 100.0];
        let mle = grr_mle(&counts, op.rho, op.gamma);
        for (s, &c) in counts.iter().enumerate() {
            let unbiased = (c / 1000.0 - op.rho) / op.gamma;
            assert!((mle.p[s] - unbiased).abs() < 1e-14, "{s}: {mle:?}");
        }
        assert!(mle.converged);
    }

    #[test]
    fn boundary_maximiser_sets_small_counts_to_zero_and_satisfies_kkt() {
        // At ε = 1, d = 16, a category with 40 of 1,000 reports has an unbiased estimate
        // below 0 (ρ ≈ 0.0523).
        let op = channel(1.0, 16);
        let mut counts = vec![70.0; 16];
        counts[0] = 40.0;
        counts[1] = 0.0;
        counts[2] = 20.0;
        let mle = grr_mle(&counts, op.rho, op.gamma);
        assert_eq!(mle.p[1], 0.0);
        assert!((mle.p.iter().sum::<f64>() - 1.0).abs() < 1e-14);
        // KKT: the gradient γ c_s / q_s equals the multiplier on the support and is at
        // most it off the support.
        let q = op.forward(&mle.p);
        let grad: Vec<f64> = counts
            .iter()
            .zip(&q)
            .map(|(&c, &qs)| op.gamma * c / qs)
            .collect();
        let lambda = (0..16)
            .filter(|&s| mle.p[s] > 0.0)
            .map(|s| grad[s])
            .fold(f64::NEG_INFINITY, f64::max);
        for (s, (&g, &ps)) in grad.iter().zip(&mle.p).enumerate() {
            if ps > 0.0 {
                assert!((g - lambda).abs() < 1e-9 * lambda, "{s}");
            } else {
                assert!(g <= lambda * (1.0 + 1e-12), "{s}");
            }
        }
    }

    proptest! {
        /// The closed form is at least as likely as EM's answer (which stops at a
        /// Frank–Wolfe gap of 1e-13 per report) and agrees with it.
        #[test]
        fn matches_em(
            epsilon in 0.1f64..6.0,
            counts in prop::collection::vec(0u32..200, 2..24),
        ) {
            let counts: Vec<f64> = counts.into_iter().map(f64::from).collect();
            prop_assume!(counts.iter().sum::<f64>() > 0.0);
            let op = channel(epsilon, counts.len());
            let exact = grr_mle(&counts, op.rho, op.gamma);
            let iterative = em(&op, &counts);
            let (l_exact, l_em) = (
                log_likelihood(&op, &counts, &exact.p),
                log_likelihood(&op, &counts, &iterative.p),
            );
            prop_assert!(l_exact >= l_em - 1e-9 * l_em.abs().max(1.0), "{l_exact} < {l_em}");
            if iterative.converged {
                for (a, b) in exact.p.iter().zip(&iterative.p) {
                    prop_assert!((a - b).abs() < 1e-4, "{:?} vs {:?}", exact.p, iterative.p);
                }
            }
        }
    }
}
