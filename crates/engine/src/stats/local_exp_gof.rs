use super::{pearson_gof_cells, Decision};
use crate::mechanism::Grr;
#[cfg(test)]
use crate::sketch::nonzero_cells;

/// Gaboardi–Rogers' `LocalExpGOF` (seed 002 Alg. 3, Thm 5.4): Pearson's χ² of the GenRR
/// report counts against the report law `p̌0` implied by the null `p0`,
/// `T = Σ_j (H_j − n p̌0_j)² / (n p̌0_j)`, referred to χ²_{d−1}.
#[cfg(test)]
pub fn local_exp_gof(grr: &Grr, counts: &[u64], p0: &[f64]) -> Decision {
    local_exp_gof_cells(grr, nonzero_cells(counts), counts.iter().sum(), p0)
}

/// [`local_exp_gof`] from the non-zero cells in category order and their sum `n`, with the
/// report law computed cell by cell: at d = 2^24 neither the counts nor `p̌0` are built
/// (2 × 128 MiB a group).
pub fn local_exp_gof_cells(
    grr: &Grr,
    nonzero: impl IntoIterator<Item = (usize, u64)>,
    n: u64,
    p0: &[f64],
) -> Decision {
    pearson_gof_cells(nonzero, n, grr.report_law_cells(p0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mechanism::Grr;
    use rand::{Rng, SeedableRng};

    fn assert_rel(found: f64, expected: f64, rel: f64, what: &str) {
        assert!(
            (found - expected).abs() <= rel * expected.abs(),
            "{what}: found {found:e}, expected {expected:e}"
        );
    }

    // Reference values: with ee = exp(eps), q = (ee*p0 + 1 - p0)/(ee + d - 1) and
    // e = n*q, T = sum((h - e)**2 / e) and p = scipy.stats.chi2.sf(T, d - 1), i.e.
    //   scipy.stats.chisquare(h, f_exp=e).
    #[test]
    fn known_values() {
        // (ε, counts, p0, statistic, p-value)
        type Case<'a> = (f64, &'a [u64], &'a [f64], f64, f64);
        let cases: [Case; 3] = [
            // scipy.stats.chisquare([260,240,255,245], f_exp=[250]*4)
            //   -> statistic 1.0, pvalue 0.8012519569012009 (GenRR maps a uniform p0 to uniform)
            (
                1.0,
                &[260, 240, 255, 245],
                &[0.25; 4],
                1.0,
                0.8012519569012009,
            ),
            // d = 3, eps = 0.5, p0 = [0.5, 0.3, 0.2], h = [420, 330, 250]
            // q = (e^0.5 p0 + 1 - p0)/(e^0.5 + 2); scipy.stats.chisquare(h, f_exp=1000*q)
            //   -> statistic 20.465513790223298, pvalue 3.5972460617227446e-05
            (
                0.5,
                &[420, 330, 250],
                &[0.5, 0.3, 0.2],
                20.465513790223298,
                3.5972460617227446e-05,
            ),
            // d = 5, eps = 2, p0 uniform, h = [900, 300, 300, 250, 250]: far from the null
            // scipy.stats.chisquare([900,300,300,250,250], f_exp=[400]*5)
            //   -> statistic 787.5, pvalue 3.9162453233936885e-169
            (
                2.0,
                &[900, 300, 300, 250, 250],
                &[0.2; 5],
                787.5,
                3.9162453233936885e-169,
            ),
        ];
        for (eps, h, p0, stat, p) in cases {
            let grr = Grr::new(eps, h.len() as u32).unwrap();
            let out = local_exp_gof(&grr, h, p0);
            assert_rel(out.statistic, stat, 1e-9, "statistic");
            assert_rel(out.p_value.unwrap(), p, 1e-9, "p-value");
            assert_eq!(out.df, Some(h.len() as u32 - 1));
        }
    }

    /// 2000 null datasets privatized by the real randomizer: the rejection rate at α = 0.05
    /// must lie in [0.035, 0.065].
    #[test]
    fn type_one_error_is_alpha() {
        let p0 = [0.4, 0.3, 0.2, 0.1];
        let grr = Grr::new(1.0, 4).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(20261122);
        let (runs, n) = (2000, 2000);
        let mut rejections = 0;
        for _ in 0..runs {
            let mut counts = [0u64; 4];
            for _ in 0..n {
                let u: f64 = rng.random();
                let x = if u < 0.4 {
                    0
                } else if u < 0.7 {
                    1
                } else if u < 0.9 {
                    2
                } else {
                    3
                };
                counts[grr.randomize_with(x, &mut rng).unwrap() as usize] += 1;
            }
            if local_exp_gof(&grr, &counts, &p0).p_value.unwrap() < 0.05 {
                rejections += 1;
            }
        }
        let rate = f64::from(rejections) / f64::from(runs);
        assert!((0.035..=0.065).contains(&rate), "type I error rate {rate}");
    }
}
