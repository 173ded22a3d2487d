use rand::Rng;

use super::Estimate;
use crate::error::EngineError;

/// Generalized randomized response (k-RR, the exponential mechanism `M_EXP` of seed 002
/// Alg. 2): report the true category with probability `e^ε/(e^ε+d-1)`, otherwise one of the
/// other `d-1` categories uniformly.
///
/// Every probability is computed from `e^{−ε}`, which neither overflows nor cancels over the
/// accepted range of ε, and the lie is drawn with an exact Bernoulli, so the randomizer is
/// ε-LDP even where the lie probability is far below 2⁻⁵³.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grr {
    epsilon: f64,
    domain: u32,
    /// `(d−1)/(e^ε+d−1)`, the probability of reporting some other category, cached because
    /// the client draws against it for every value.
    lie: f64,
}

impl Grr {
    /// `epsilon` must lie in the accepted range (see `ldpstream_config::MAX_EPSILON`);
    /// `domain` (d) at least 2.
    pub fn new(epsilon: f64, domain: u32) -> Result<Self, EngineError> {
        super::check_epsilon(epsilon)?;
        super::check_domain(domain)?;
        let others = f64::from(domain) - 1.0;
        let decay = super::exp_neg(epsilon);
        Ok(Grr {
            epsilon,
            domain,
            lie: others * decay / (1.0 + others * decay),
        })
    }

    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    pub fn domain(&self) -> u32 {
        self.domain
    }

    /// `(d−1)/(e^ε+d−1)`, the double the lie is drawn against (clients must match it bit
    /// for bit: conformance/).
    pub fn lie_probability(&self) -> f64 {
        self.lie
    }

    /// Privatizes `x` with the thread's generator (tests only: rand 0.9 does not reseed it
    /// on fork; real reports draw from [`super::client_rng`]).
    #[cfg(test)]
    pub fn randomize(&self, x: u32) -> Result<u32, EngineError> {
        self.randomize_with(x, &mut rand::rng())
    }

    /// Privatizes `x` with a caller-supplied generator (seeded only for simulation).
    pub fn randomize_with<R: Rng + ?Sized>(&self, x: u32, rng: &mut R) -> Result<u32, EngineError> {
        super::check_input(x, self.domain)?;
        if !super::bernoulli_exact(rng, self.lie) {
            Ok(x)
        } else {
            // A uniform draw over the d-1 other categories: skip over x.
            let y = rng.random_range(0..self.domain - 1);
            Ok(if y >= x { y + 1 } else { y })
        }
    }

    /// `ρ = 1/(d-1+e^ε) = e^{−ε}/(1+(d−1)e^{−ε})`: the probability of reporting any one
    /// specific wrong category.
    pub fn rho(&self) -> f64 {
        let decay = (-self.epsilon).exp();
        decay / (1.0 + (f64::from(self.domain) - 1.0) * decay)
    }

    /// `γ = (e^ε-1)/(d-1+e^ε) = (1−e^{−ε})/(1+(d−1)e^{−ε})`, so that the report law is
    /// `p̌ = ρ1 + γp` (Sheffet Thm 3).
    pub fn gamma(&self) -> f64 {
        let decay = (-self.epsilon).exp();
        -(-self.epsilon).exp_m1() / (1.0 + (f64::from(self.domain) - 1.0) * decay)
    }

    /// The law of a report when true categories follow `p` (seed 002 eq. 4).
    pub fn report_law(&self, p: &[f64]) -> Vec<f64> {
        self.report_law_cells(p).collect()
    }

    /// [`report_law`](Self::report_law) cell by cell, for walks that should not hold d
    /// doubles.
    pub fn report_law_cells<'a>(&self, p: &'a [f64]) -> impl Iterator<Item = f64> + 'a {
        let (rho, gamma) = (self.rho(), self.gamma());
        p.iter().map(move |&pj| rho + gamma * pj)
    }

    /// The unbiased estimate `p̂ = (counts/n - ρ)/γ` and its plug-in standard error
    /// `sqrt(q(1-q)/(nγ²))` with `q = counts/n`. Empty for `n = 0`: there is nothing to
    /// estimate from.
    pub fn estimate(&self, counts: &[u64], n: u64) -> Estimate {
        let (rho, gamma) = (self.rho(), self.gamma());
        Estimate::from_frequencies(
            counts,
            n,
            |q| (q - rho) / gamma,
            |q, nf| (q * (1.0 - q) / nf).sqrt() / gamma,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn rejects_bad_parameters() {
        assert!(Grr::new(0.0, 4).is_err());
        assert!(Grr::new(f64::NAN, 4).is_err());
        assert!(Grr::new(1.0, 1).is_err());
        let g = Grr::new(1.0, 4).unwrap();
        assert!(matches!(
            g.randomize(4),
            Err(EngineError::InputOutOfDomain {
                value: 4,
                domain: 4
            })
        ));
        assert!(g.randomize(3).unwrap() < 4);
    }

    #[test]
    fn report_law_is_a_distribution_with_the_stated_ratio() {
        let g = Grr::new(1.5, 7).unwrap();
        let law = g.report_law(&[1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        assert!((law.iter().sum::<f64>() - 1.0).abs() < 1e-15);
        assert!((law[0] / law[1] - 1.5f64.exp()).abs() < 1e-12);
    }

    #[test]
    fn sampled_frequencies_match_the_report_law() {
        // 400k draws of x = 2: each frequency within 5 standard errors of its probability.
        let g = Grr::new(1.0, 5).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut counts = [0u64; 5];
        let n = 400_000;
        for _ in 0..n {
            counts[g.randomize_with(2, &mut rng).unwrap() as usize] += 1;
        }
        let law = g.report_law(&[0.0, 0.0, 1.0, 0.0, 0.0]);
        for (c, p) in counts.iter().zip(law) {
            let se = (p * (1.0 - p) / n as f64).sqrt();
            assert!(((*c as f64 / n as f64) - p).abs() < 5.0 * se, "{counts:?}");
        }
    }
}
