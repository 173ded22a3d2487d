//! Which counts and which matrix each oracle's iterative Bayesian update uses: the ones
//! multi-freq-ldpy 0.2.5's `*_Aggregator_IBU` use (docs/STATISTICS.md §2.2), so that the
//! two give the same estimate on the same reports.

use super::{Estimate, Mechanism};
use crate::error::EngineError;
use crate::mle::{ibu, Mle, IBU_MAX_DOMAIN};
use crate::sketch::Sketch;

/// OLH's plain estimate `(C_v/n − 1/g)/(p − 1/g)`, which a fixed pool biases, with the
/// bound on that bias (None where the pool's C was not built).
#[derive(Debug, Clone, PartialEq)]
pub struct PlainEstimate {
    pub estimate: Vec<f64>,
    pub bias_bound: Option<f64>,
}

/// A snapshot's estimates, as a record shows them.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotEstimates {
    pub estimate: Estimate,
    pub ibu: Option<Mle>,
    /// OLH only.
    pub plain: Option<PlainEstimate>,
    /// Why `estimate` is empty although the domain is recorded (OLH beyond its dense
    /// factor, or a pool that does not identify the categories).
    pub omitted: Option<String>,
}

fn as_f64(values: &[u64]) -> Vec<f64> {
    values.iter().map(|&v| v as f64).collect()
}

impl Mechanism {
    /// `(p, q)` of the IBU matrix `A = q·11ᵀ + (p − q)·I` over this mechanism's
    /// per-category counts, or `None` for a mechanism without one:
    ///
    /// * grr (`GRR_Aggregator_IBU`): `p = e^ε/(e^ε+d−1)`, `q = 1/(e^ε+d−1)`, on the
    ///   category counts. A is the channel itself, so the IBU is the MLE (as `mle`, to
    ///   multi-freq-ldpy's tolerance rather than `mle`'s).
    /// * oue (`UE_Aggregator_IBU(optimal=True)`): the bit probabilities `p = P(1 | 1)`,
    ///   `q = P(1 | 0)`, on the bit counts.
    /// * subset (`SS_Aggregator_IBU`): `p = P(x ∈ S | x)`, `q = P(j ∈ S | x ≠ j)`, on the
    ///   item counts (the k of this stream, not multi-freq-ldpy's fixed `rint(d/(e^ε+1))`).
    /// * olh (`LH_Aggregator_IBU`): `p = e^ε/(e^ε+g−1)`, `q = 1/g` (the chance a wrong
    ///   value's hash agrees with the report), on the support counts.
    ///
    /// Other mechanisms (raw, matrix, noise, Hadamard, cohort, and the symmetric bit flip,
    /// whose MLE is in closed form) report their MLE instead: an IBU per group per snapshot
    /// took `serve`'s 1,000-group bit-flip round from 10 ms to 46 ms (issue 8's bench).
    pub fn ibu_matrix(&self) -> Option<(f64, f64)> {
        match self {
            Mechanism::Grr(m) => Some((m.rho() + m.gamma(), m.rho())),
            Mechanism::BitFlip(m) if m.kind() == "oue" => Some((m.keep_probability(), m.flip())),
            Mechanism::BitFlip(_) => None,
            Mechanism::Subset(m) => Some((m.keep_probability(), m.q())),
            Mechanism::Olh(m) => Some((m.q() + m.p_minus_q(), 1.0 / f64::from(m.g()))),
            Mechanism::Raw { .. }
            | Mechanism::Channel(_)
            | Mechanism::Noise(_)
            | Mechanism::Hadamard(_)
            | Mechanism::Cohort(_) => None,
            Mechanism::Longitudinal(l) => l.composed().ibu_matrix(),
        }
    }

    /// The unbiased estimate and, for the mechanisms of [`Mechanism::ibu_matrix`], the
    /// IBU (`None` for the others, for an empty sketch and above `IBU_MAX_DOMAIN`
    /// categories). OLH's support counts, the snapshot's O(S·d) hashing, are computed
    /// once for the estimates and the IBU; the IBU itself costs O(d) per iteration, at most
    /// `IBU_MAX_CELL_UPDATES` category updates in all.
    pub fn estimate_and_ibu(&self, sketch: &Sketch) -> Result<SnapshotEstimates, EngineError> {
        if let Mechanism::Longitudinal(l) = self {
            return l.composed().estimate_and_ibu(sketch);
        }
        let ibu = match (self, sketch) {
            (Mechanism::Olh(m), Sketch::Pool(s)) => {
                let supports = m.supports(s.table());
                let plain = m.estimate_plain(&supports, s.n()).estimate;
                let (estimate, omitted, bias_bound) = match m.solver() {
                    Ok(solver) => (
                        solver.estimate(m.as_ref(), &supports, s.n()),
                        None,
                        Some(solver.bias_bound()),
                    ),
                    Err(why) => (Estimate::default(), Some(why.to_string()), None),
                };
                return Ok(SnapshotEstimates {
                    estimate,
                    ibu: self.ibu_of(&supports, s.n()),
                    plain: Some(PlainEstimate {
                        estimate: plain,
                        bias_bound,
                    }),
                    omitted,
                });
            }
            (Mechanism::Grr(_), Sketch::Counts(s)) => self.ibu_of(&s.counts(), s.n()),
            (Mechanism::BitFlip(_) | Mechanism::Subset(_), Sketch::Bits(s)) => {
                self.ibu_of(s.bit_counts(), s.n())
            }
            _ => None,
        };
        Ok(SnapshotEstimates {
            estimate: self.estimate(sketch)?,
            ibu,
            plain: None,
            omitted: None,
        })
    }

    fn ibu_of(&self, counts: &[u64], n: u64) -> Option<Mle> {
        let (p, q) = self.ibu_matrix()?;
        (n > 0 && counts.len() <= IBU_MAX_DOMAIN).then(|| ibu(&as_f64(counts), p, q))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldpstream_config::MechanismConfig;
    use rand::SeedableRng;

    use crate::mechanism::simulate_sketch;

    const P: [f64; 8] = [0.3, 0.2, 0.15, 0.1, 0.1, 0.08, 0.05, 0.02];

    fn mechanism(config: MechanismConfig) -> Mechanism {
        Mechanism::from_config(&config).unwrap()
    }

    /// Each oracle's IBU runs on its own counts with multi-freq-ldpy's matrix: consistent,
    /// near the truth (converged or at its cap) at n = 200,000, with the same unbiased estimate as
    /// `estimate` (OLH's support counts are shared, not changed); the other mechanisms and
    /// an empty sketch have none.
    #[test]
    fn each_oracle_has_a_consistent_ibu_beside_its_estimate() {
        let (epsilon, domain) = (2.0, 8);
        let oracles = [
            MechanismConfig::Grr { epsilon, domain },
            MechanismConfig::Oue { epsilon, domain },
            MechanismConfig::Subset {
                epsilon,
                domain,
                k: None,
            },
            MechanismConfig::Olh {
                epsilon,
                domain,
                g: None,
                pool_size: Some(256),
                pool_seed: 9,
            },
        ];
        let mut rng = rand::rngs::StdRng::seed_from_u64(30);
        for config in oracles {
            let m = mechanism(config);
            let sketch = simulate_sketch(&m, &P, 200_000, &mut rng).unwrap();
            let both = m.estimate_and_ibu(&sketch).unwrap();
            assert_eq!(both.estimate, m.estimate(&sketch).unwrap(), "{}", m.kind());
            let ibu = both.ibu.unwrap_or_else(|| panic!("{}: no IBU", m.kind()));
            assert!(ibu.iterations > 0, "{}: {ibu:?}", m.kind());
            assert!(ibu.p.iter().all(|&x| x >= 0.0), "{}: {ibu:?}", m.kind());
            assert!((ibu.p.iter().sum::<f64>() - 1.0).abs() < 1e-12, "{ibu:?}");
            for (x, p) in ibu.p.iter().zip(P) {
                assert!((x - p).abs() < 0.02, "{}: {:?}", m.kind(), ibu.p);
            }
            assert!(m.estimate_and_ibu(&m.new_sketch()).unwrap().ibu.is_none());
        }
        // The symmetric bit flip (closed-form MLE) and raw counts have none.
        for none in [
            Mechanism::Raw { domain: 8 },
            mechanism(MechanismConfig::Bitflip { epsilon, domain }),
        ] {
            let sketch = simulate_sketch(&none, &P, 1_000, &mut rng).unwrap();
            assert!(none.ibu_matrix().is_none(), "{}", none.kind());
            assert!(none.estimate_and_ibu(&sketch).unwrap().ibu.is_none());
        }
        // Above IBU_MAX_DOMAIN the cap would leave fewer than 16 iterations: none.
        let wide = mechanism(MechanismConfig::Oue {
            epsilon,
            domain: 1025,
        });
        let sketch = simulate_sketch(&wide, &[1.0 / 1025.0; 1025], 100, &mut rng).unwrap();
        assert!(wide.estimate_and_ibu(&sketch).unwrap().ibu.is_none());
    }

    /// The matrices are multi-freq-ldpy's closed forms (its `GRR_`, `UE_`, `SS_` and
    /// `LH_Aggregator_IBU`), from our stable forms.
    #[test]
    fn matrices_are_multi_freq_ldpy_s() {
        let (eps, d) = (1.5f64, 10u32);
        let (e, df) = (eps.exp(), f64::from(d));
        let close = |(p, q): (f64, f64), (wp, wq): (f64, f64)| {
            assert!((p - wp).abs() < 1e-15 && (q - wq).abs() < 1e-15, "{p} {q}");
        };
        let grr = mechanism(MechanismConfig::Grr {
            epsilon: eps,
            domain: d,
        });
        let p = e / (e + df - 1.0);
        close(grr.ibu_matrix().unwrap(), (p, (1.0 - p) / (df - 1.0)));
        let oue = mechanism(MechanismConfig::Oue {
            epsilon: eps,
            domain: d,
        });
        close(oue.ibu_matrix().unwrap(), (0.5, 1.0 / (e + 1.0)));
        let k = 3.0;
        let ss = mechanism(MechanismConfig::Subset {
            epsilon: eps,
            domain: d,
            k: Some(3),
        });
        let p = k * e / (k * e + df - k);
        let q = ((k - 1.0) * k * e + (df - k) * k) / ((df - 1.0) * (k * e + df - k));
        close(ss.ibu_matrix().unwrap(), (p, q));
        let olh = mechanism(MechanismConfig::Olh {
            epsilon: eps,
            domain: d,
            g: None,
            pool_size: Some(4),
            pool_seed: 1,
        });
        let g = (e.round() + 1.0) as u32;
        let gf = f64::from(g);
        close(olh.ibu_matrix().unwrap(), (e / (e + gf - 1.0), 1.0 / gf));
    }
}
