//! The iterative Bayesian update (IBU; Agrawal & Aggarwal, PODS 2001; ElSalamouny &
//! Palamidessi, EuroS&P 2020) on per-category counts, exactly as multi-freq-ldpy 0.2.5's
//! `estimators.Histogram_estimator.IBU` runs it for its GRR, UE, LH and SS aggregators
//! (docs/STATISTICS.md §2.2): records' `estimate_ibu`.

use super::Mle;

/// multi-freq-ldpy's default `tol`: stop when no entry moved by this much in one step.
pub const IBU_TOLERANCE: f64 = 1e-12;
/// multi-freq-ldpy's default `nb_iter`.
pub const IBU_MAX_ITERATIONS: u32 = 10_000;
/// The widest domain with an IBU: beyond it the cap leaves fewer than 16 iterations, too
/// few to move far from the uniform start, and records leave `estimate_ibu` empty.
pub const IBU_MAX_DOMAIN: usize = 1024;
/// The most category updates (iterations × d) one IBU run may spend: 2¹⁴, ≈ 30 µs, because
/// `serve` computes one per group at every snapshot (1,000 groups of d = 64 took 1.2 s a
/// round with multi-freq-ldpy's 10,000 iterations, against 7.8 ms without the IBU). So the
/// cap is `min(10,000, 2¹⁴/d)` iterations: 1,024 at d = 16, 256 at d = 64, 16 at
/// d = 1,024. A capped result says `converged: false` (still non-negative, summing to 1:
/// IBU stopped early).
pub const IBU_MAX_CELL_UPDATES: u64 = 1 << 14;

/// The IBU of `counts`, at most [`ibu_iteration_cap`] iterations, through the symmetric
/// matrix `A = q·11ᵀ + (p − q)·I` (`p` on the diagonal, `q` off it), applied in O(d) per step instead of as a dense d × d product:
/// with `f = counts/Σcounts` and `π⁰` uniform,
///
/// `π^{t+1} = π^t ⊙ A (f ⊘ A π^t)`,
///
/// until `max_x |π^{t+1}_x − π^t_x| < `[`IBU_TOLERANCE`] (multi-freq-ldpy's `"max_abs"`
/// rule; the step that meets it is the one returned, and `iterations` counts it) or the
/// cap. A is symmetric, so every iterate is non-negative and sums to `Σ f = 1`: the result
/// is consistent whether or not it converged. A's columns sum to the constant
/// `p + (d − 1)q`, so the step is EM for the multinomial pseudo-likelihood
/// `Π_v ((Aπ)_v)^{counts_v}` of the counts (the true likelihood when A is GRR's channel).
/// With no counts the data say nothing: the uniform start, zero iterations.
pub fn ibu(counts: &[f64], p: f64, q: f64) -> Mle {
    ibu_capped(counts, p, q, ibu_iteration_cap(counts.len()))
}

/// `min(`[`IBU_MAX_ITERATIONS`]`, `[`IBU_MAX_CELL_UPDATES`]` / d)`, at least 1.
pub fn ibu_iteration_cap(d: usize) -> u32 {
    (IBU_MAX_CELL_UPDATES / d.max(1) as u64).clamp(1, u64::from(IBU_MAX_ITERATIONS)) as u32
}

/// [`ibu`] with an explicit iteration cap (multi-freq-ldpy's `nb_iter`).
pub fn ibu_capped(counts: &[f64], p: f64, q: f64, cap: u32) -> Mle {
    let d = counts.len();
    let total: f64 = counts.iter().sum();
    if d == 0 || total <= 0.0 || !total.is_finite() {
        return Mle {
            p: vec![1.0 / d as f64; d],
            iterations: 0,
            converged: total == 0.0,
        };
    }
    // Padded to whole lanes with zero counts and zero mass, which stay zero; the sums run
    // in LANES independent accumulators, so that the loops vectorise instead of waiting
    // on one addition chain (a third of the time at d = 65,536).
    let padded = d.next_multiple_of(LANES);
    let mut f: Vec<f64> = counts.iter().map(|&c| c / total).collect();
    f.resize(padded, 0.0);
    let mut pi = vec![1.0 / d as f64; d];
    pi.resize(padded, 0.0);
    let mut w = vec![0.0; padded];
    let diagonal = p - q;
    let mut mass = 1.0;
    for iteration in 1..=cap {
        // (Aπ)_v = q·Σπ + (p − q)·π_v; w = f ⊘ Aπ, and a zero count contributes nothing,
        // even where (Aπ)_v underflowed to 0.
        let scaled = q * mass;
        let mut w_sum = [0.0; LANES];
        for ((wc, fc), pc) in w
            .chunks_exact_mut(LANES)
            .zip(f.chunks_exact(LANES))
            .zip(pi.chunks_exact(LANES))
        {
            for l in 0..LANES {
                wc[l] = if fc[l] > 0.0 {
                    fc[l] / (scaled + diagonal * pc[l])
                } else {
                    0.0
                };
                w_sum[l] += wc[l];
            }
        }
        // π ⊙ Aw, with (Aw)_v = q·Σw + (p − q)·w_v.
        let spread = q * w_sum.iter().sum::<f64>();
        let (mut moved, mut pi_sum) = ([0.0f64; LANES], [0.0; LANES]);
        for (pc, wc) in pi.chunks_exact_mut(LANES).zip(w.chunks_exact(LANES)) {
            for l in 0..LANES {
                let next = pc[l] * (spread + diagonal * wc[l]);
                let step = (next - pc[l]).abs();
                moved[l] = if step > moved[l] { step } else { moved[l] };
                pi_sum[l] += next;
                pc[l] = next;
            }
        }
        mass = pi_sum.iter().sum();
        if moved.iter().all(|&m| m < IBU_TOLERANCE) {
            pi.truncate(d);
            return Mle {
                p: pi,
                iterations: iteration,
                converged: true,
            };
        }
    }
    pi.truncate(d);
    Mle {
        p: pi,
        iterations: cap,
        converged: false,
    }
}

/// Accumulators per sum: enough independent chains for two AVX2 vectors.
const LANES: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_close(got: &[f64], want: &[f64]) {
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= 1e-12, "{got:?}\nvs\n{want:?}");
        }
    }

    /// multi-freq-ldpy 0.2.5's IBU on a fixed count table, to 1e-12. The expected values
    /// were computed with (benches/.venv; `IBU` is the numba-jitted function the UE, LH and
    /// SS aggregators call, default `nb_iter`, `tol`, `err_func`):
    ///
    /// ```python
    /// import numpy as np
    /// from multi_freq_ldpy.estimators.Histogram_estimator import IBU
    /// def run(counts, p, q):
    ///     k = len(counts); A = np.full((k, k), q); np.fill_diagonal(A, p)
    ///     obs = np.array(counts, float); obs /= obs.sum()
    ///     print(repr(IBU(k, A, obs, 10000, 1e-12, "max_abs").tolist()))
    /// e = np.exp(1.0); run([361, 338, 304, 292, 280], 0.5, 1 / (e + 1))      # OUE
    /// e = np.exp(2.0); g = int(round(e)) + 1
    /// run([410, 236, 198, 171, 150, 133], e / (e + g - 1), 1 / g)            # OLH
    /// e = np.exp(1.0); d, k = 8, 3                                          # subset
    /// p = k * e / (k * e + d - k)
    /// q = ((k - 1) * k * e + (d - k) * k) / ((d - 1) * (k * e + d - k))
    /// run([620, 455, 391, 350, 322, 300, 290, 272], p, q)
    /// ```
    ///
    /// (numba needs scipy for the jitted `np.dot`; without it `IBU.py_func`, the same
    /// function uncompiled, gives the same numbers. Checked with both.)
    #[test]
    fn equals_multi_freq_ldpy_ibu() {
        let e = 1f64.exp();
        let ibu = |c: &[f64], p, q| ibu_capped(c, p, q, IBU_MAX_ITERATIONS);
        let oue = ibu(&[361.0, 338.0, 304.0, 292.0, 280.0], 0.5, 1.0 / (e + 1.0));
        assert_close(&oue.p, &OUE_WANT);
        assert!(oue.converged);
        let e = 2f64.exp();
        let g = e.round() + 1.0;
        let olh = ibu(
            &[410.0, 236.0, 198.0, 171.0, 150.0, 133.0],
            e / (e + g - 1.0),
            1.0 / g,
        );
        assert_close(&olh.p, &OLH_WANT);
        let (e, d, k) = (1f64.exp(), 8.0, 3.0);
        let p = k * e / (k * e + d - k);
        let q = ((k - 1.0) * k * e + (d - k) * k) / ((d - 1.0) * (k * e + d - k));
        let counts = [620.0, 455.0, 391.0, 350.0, 322.0, 300.0, 290.0, 272.0];
        assert_close(&ibu(&counts, p, q).p, &SUBSET_WANT);
    }

    const OUE_WANT: [f64; 5] = [
        0.39918049848241355,
        0.29959024922564803,
        0.15236988075384783,
        0.10040975069350536,
        0.048449620844585234,
    ];
    const OLH_WANT: [f64; 6] = [
        0.5963390448176815,
        0.20671761091612592,
        0.12162787247741917,
        0.061169374111854455,
        0.014146097676917033,
        1.770975624859614e-15,
    ];
    const SUBSET_WANT: [f64; 8] = [
        0.7493986024627831,
        0.226677007779311,
        0.023924389757905867,
        1.5307257197067257e-28,
        9.104884162867203e-51,
        2.1292565285801134e-68,
        1.8704764714297198e-76,
        5.096764364935684e-91,
    ];

    /// Every iterate is consistent, converged or capped; a GRR channel gives the MLE
    /// (the EM fixed point: the unbiased estimate when that lies inside the simplex).
    #[test]
    fn is_consistent_and_the_grr_mle_inside_the_simplex() {
        let counts = [400.0, 300.0, 200.0, 100.0];
        let (e, d) = (3f64.exp(), 4.0);
        let (p, q) = (e / (e + d - 1.0), 1.0 / (e + d - 1.0));
        let r = ibu(&counts, p, q);
        assert!(r.converged && r.iterations > 1, "{r:?}");
        let n: f64 = counts.iter().sum();
        for (x, c) in r.p.iter().zip(counts) {
            let unbiased = (c / n - q) / (p - q);
            assert!((x - unbiased).abs() < 1e-9, "{x} vs {unbiased}");
        }
        let wide: Vec<f64> = (0..1024).map(|v| ((v * 7919) % 13) as f64).collect();
        let capped = ibu(&wide, 0.5, 0.01);
        assert!(!capped.converged && capped.iterations == ibu_iteration_cap(1024));
        assert_eq!(ibu_iteration_cap(1024), 16);
        assert!(capped.p.iter().all(|&x| x >= 0.0));
        assert!((capped.p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert_eq!(ibu(&[0.0, 0.0], 0.5, 0.1).p, [0.5, 0.5]);
        assert!(ibu(&[], 0.5, 0.1).p.is_empty());
    }
}
