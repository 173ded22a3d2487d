//! The alternative a plan is sized against, and the checked (null, alternative) pair.

use std::str::FromStr;

use crate::error::EngineError;

/// How far from 1 a probability vector's sum may be: what a user can type with a few
/// decimals and still mean a distribution.
const SUM_TOLERANCE: f64 = 1e-9;

/// The distribution the planner assumes the data really follow.
#[derive(Debug, Clone, PartialEq)]
pub enum Alternative {
    /// `P1,..,Pd`: an explicit distribution over the domain.
    Explicit(Vec<f64>),
    /// `paninski:DIST`: Paninski's perturbation of the null,
    /// `p1_j = p0_j (1 + DIST·s_j)` with signs `s = (+1, −1, +1, −1, …)` and, for odd d,
    /// `s_d = 0`. Its total variation distance from p0 is `DIST/2 · Σ_j p0_j |s_j|`, which is
    /// `DIST/2` for a uniform p0 on an even domain and `DIST(d−1)/(2d)` on an odd one. The
    /// perturbation keeps total mass 1 only when `Σ_j p0_j s_j = 0` (a uniform null, or
    /// equal neighbours in pairs); otherwise [`Alternative::against`] refuses it.
    Paninski { distance: f64 },
}

impl FromStr for Alternative {
    type Err = EngineError;

    /// Parses `paninski:DIST` or a comma-separated list of probabilities. The list is only
    /// checked against a null (length, sum) by [`Alternative::against`].
    fn from_str(text: &str) -> Result<Self, EngineError> {
        let text = text.trim();
        if let Some(rest) = text.strip_prefix("paninski:") {
            let distance = rest.trim().parse::<f64>().map_err(|_| {
                EngineError::invalid("paninski distance", rest, "a number in (0, 1]")
            })?;
            if !(distance.is_finite() && distance > 0.0) {
                return Err(EngineError::invalid(
                    "paninski distance",
                    distance,
                    "a number in (0, 1]",
                ));
            }
            return Ok(Alternative::Paninski { distance });
        }
        let p = text
            .split(',')
            .map(|s| {
                s.trim().parse::<f64>().map_err(|_| {
                    EngineError::invalid(
                        "alternative",
                        s.trim(),
                        "`paninski:DIST` or comma-separated probabilities",
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Alternative::Explicit(p))
    }
}

impl Alternative {
    /// The alternative distribution for the null `p0`, checked together with it.
    pub fn against(&self, p0: &[f64]) -> Result<Hypotheses, EngineError> {
        let p1 = match self {
            Alternative::Explicit(p1) => p1.clone(),
            Alternative::Paninski { distance } => {
                let p1: Vec<f64> = p0
                    .iter()
                    .zip(paninski_signs(p0.len()))
                    .map(|(&p, s)| p * (1.0 + distance * s))
                    .collect();
                if let Some(&bad) = p1.iter().find(|&&p| p < 0.0) {
                    return Err(EngineError::invalid(
                        "paninski perturbation",
                        format!("an entry {bad} < 0 at DIST = {distance}"),
                        "DIST at most 1, so that every p1_j >= 0",
                    ));
                }
                let sum: f64 = p1.iter().sum();
                if (sum - 1.0).abs() > SUM_TOLERANCE {
                    return Err(EngineError::invalid(
                        "paninski perturbation",
                        format!("total mass {sum}"),
                        "a null whose +/- paired entries balance (e.g. uniform); \
                         give an explicit alternative otherwise",
                    ));
                }
                p1
            }
        };
        Hypotheses::new(p0.to_vec(), p1)
    }
}

/// `+1, −1, +1, −1, …`, with the last sign 0 on an odd domain so the pairs balance.
fn paninski_signs(d: usize) -> impl Iterator<Item = f64> {
    (0..d).map(move |j| {
        if d % 2 == 1 && j == d - 1 {
            0.0
        } else if j % 2 == 0 {
            1.0
        } else {
            -1.0
        }
    })
}

/// A null `p0` (every entry > 0) and an alternative `p1` (entries ≥ 0) on the same domain
/// of at least two categories, both summing to 1 within 1e-9 and stored rescaled to sum
/// to 1 up to rounding.
#[derive(Debug, Clone, PartialEq)]
pub struct Hypotheses {
    p0: Vec<f64>,
    p1: Vec<f64>,
}

impl Hypotheses {
    pub fn new(p0: Vec<f64>, p1: Vec<f64>) -> Result<Self, EngineError> {
        let d = p0.len();
        if d < 2 {
            return Err(EngineError::invalid(
                "null",
                format!("{d} categories"),
                "at least 2 categories",
            ));
        }
        if p1.len() != d {
            return Err(EngineError::WrongLength {
                name: "alternative",
                expected: d,
                found: p1.len(),
            });
        }
        // Every test divides by the null's cells.
        if let Some(&bad) = p0.iter().find(|&&p| !(p.is_finite() && p > 0.0)) {
            return Err(EngineError::invalid("null", bad, "entries finite and > 0"));
        }
        if let Some(&bad) = p1.iter().find(|&&p| !(p.is_finite() && p >= 0.0)) {
            return Err(EngineError::invalid(
                "alternative",
                bad,
                "entries finite and >= 0",
            ));
        }
        for (name, p) in [("null", &p0), ("alternative", &p1)] {
            let sum: f64 = p.iter().sum();
            if (sum - 1.0).abs() > SUM_TOLERANCE {
                return Err(EngineError::invalid(
                    name,
                    format!("entries summing to {sum}"),
                    "entries summing to 1 (within 1e-9)",
                ));
            }
        }
        // The noncentrality formulas rely on Σp = 1 exactly (Σ(p)1 = b1, a zero-sum Δ); a
        // typed "0.333,0.333,0.334" should not feed its 1e-10 slack into them.
        let normalise = |p: Vec<f64>| {
            let sum: f64 = p.iter().sum();
            p.into_iter().map(|x| x / sum).collect()
        };
        Ok(Hypotheses {
            p0: normalise(p0),
            p1: normalise(p1),
        })
    }

    pub fn p0(&self) -> &[f64] {
        &self.p0
    }

    pub fn p1(&self) -> &[f64] {
        &self.p1
    }

    pub fn domain(&self) -> usize {
        self.p0.len()
    }

    /// `½ Σ_j |p1_j − p0_j|`.
    pub fn tv_distance(&self) -> f64 {
        0.5 * self
            .p0
            .iter()
            .zip(&self.p1)
            .map(|(a, b)| (a - b).abs())
            .sum::<f64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_forms() {
        assert_eq!(
            "paninski:0.2".parse::<Alternative>().unwrap(),
            Alternative::Paninski { distance: 0.2 }
        );
        assert_eq!(
            " 0.5, 0.25,0.25 ".parse::<Alternative>().unwrap(),
            Alternative::Explicit(vec![0.5, 0.25, 0.25])
        );
        for bad in [
            "paninski:x",
            "paninski:-0.1",
            "paninski:0",
            "paninski:inf",
            "0.5,a",
        ] {
            assert!(bad.parse::<Alternative>().is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn paninski_perturbation_of_uniform() {
        let h = Alternative::Paninski { distance: 0.2 }
            .against(&[0.25; 4])
            .unwrap();
        assert_eq!(h.p1(), &[0.3, 0.2, 0.3, 0.2]);
        assert!((h.tv_distance() - 0.1).abs() < 1e-15);
        // Odd d: the last category keeps its mass; TV = DIST (d-1) / (2d).
        let h = Alternative::Paninski { distance: 0.5 }
            .against(&[0.2; 5])
            .unwrap();
        assert_eq!(h.p1()[4], 0.2);
        assert!((h.tv_distance() - 0.5 * 4.0 / 10.0).abs() < 1e-15);
        // Paired entries need not be uniform across pairs.
        let h = Alternative::Paninski { distance: 1.0 }
            .against(&[0.4, 0.4, 0.1, 0.1])
            .unwrap();
        assert_eq!(h.p1(), &[0.8, 0.0, 0.2, 0.0]);
    }

    #[test]
    fn rejects_invalid_alternatives() {
        let p0 = [0.25; 4];
        // Negative entries.
        assert!(Alternative::Paninski { distance: 1.5 }
            .against(&p0)
            .is_err());
        // A null whose pairs do not balance.
        assert!(Alternative::Paninski { distance: 0.1 }
            .against(&[0.4, 0.3, 0.2, 0.1])
            .is_err());
        // Wrong length, wrong sum, negative entry.
        assert!(matches!(
            Alternative::Explicit(vec![0.5, 0.5]).against(&p0),
            Err(EngineError::WrongLength {
                expected: 4,
                found: 2,
                ..
            })
        ));
        assert!(Alternative::Explicit(vec![0.3, 0.3, 0.3, 0.3])
            .against(&p0)
            .is_err());
        assert!(Alternative::Explicit(vec![0.6, -0.1, 0.25, 0.25])
            .against(&p0)
            .is_err());
        // The null needs positive entries and two categories.
        assert!(Hypotheses::new(vec![0.5, 0.5, 0.0], vec![0.5, 0.25, 0.25]).is_err());
        assert!(Hypotheses::new(vec![1.0], vec![1.0]).is_err());
    }
}
