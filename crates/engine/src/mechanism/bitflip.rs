use rand::Rng;

use super::Estimate;
use crate::error::EngineError;

/// Unary encoding (the one-hot vector of x, each bit reported independently), in its two
/// standard parametrisations:
///
/// * symmetric bit flipping (`bitflip`, `M_bit` of seed 002 Alg. 4, RAPPOR's SUE): each bit
///   kept with probability `e^{ε/2}/(e^{ε/2}+1)` and flipped otherwise;
/// * optimized unary encoding (`oue`, Wang et al., USENIX Security 2017, §4.3): a true 1 is
///   reported as 1 with probability `p = 1/2`, a true 0 as 1 with `q = 1/(e^ε+1)`.
///
/// Two inputs differ in two bits, and `p(1−q)/((1−p)q) = e^ε` in both, so the whole report
/// is ε-LDP. Both share the report format, the bit-count sketch and the fold; only the
/// four bit probabilities differ (docs/STATISTICS.md §1.2, §1.6).
///
/// Reports are packed LSB first: bit j is bit `j % 8` of byte `j / 8`.
///
/// The probabilities come from the stable forms `1/(1+e^{−t})`, `1/(1+e^{t})` and `tanh`,
/// and every draw is an exact Bernoulli, so the report stays ε-LDP and Σ(p) stays
/// invertible over the whole accepted range of ε.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BitFlip {
    epsilon: f64,
    domain: u32,
    optimized: bool,
    /// P(report 1 | true 1) = p.
    keep: f64,
    /// P(report 0 | true 1) = 1 − p, stored so that it never comes from a cancellation.
    drop: f64,
    /// P(report 1 | true 0) = q.
    flip: f64,
    /// P(report 0 | true 0) = 1 − q.
    stay: f64,
    /// p − q.
    alpha: f64,
}

impl BitFlip {
    /// Symmetric bit flipping (`bitflip`).
    pub fn new(epsilon: f64, domain: u32) -> Result<Self, EngineError> {
        super::check_epsilon(epsilon)?;
        super::check_domain(domain)?;
        let (keep, flip) = (
            super::sign_keep(epsilon / 2.0),
            super::sign_lie(epsilon / 2.0),
        );
        Ok(BitFlip {
            epsilon,
            domain,
            optimized: false,
            keep,
            drop: flip,
            flip,
            stay: keep,
            alpha: (epsilon / 4.0).tanh(),
        })
    }

    /// Optimized unary encoding (`oue`): `p = 1/2`, `q = 1/(e^ε+1)`, which minimises the
    /// estimator's variance among unary encodings (Wang et al. 2017, §4.3).
    pub fn optimized(epsilon: f64, domain: u32) -> Result<Self, EngineError> {
        super::check_epsilon(epsilon)?;
        super::check_domain(domain)?;
        Ok(BitFlip {
            epsilon,
            domain,
            optimized: true,
            keep: 0.5,
            drop: 0.5,
            flip: super::sign_lie(epsilon),
            stay: super::sign_keep(epsilon),
            // 1/2 − 1/(e^ε+1) = tanh(ε/2)/2.
            alpha: super::sign_eta(epsilon),
        })
    }

    /// Whether this is OUE (`p = 1/2`) rather than symmetric bit flipping.
    pub fn is_optimized(&self) -> bool {
        self.optimized
    }

    /// The config kind: `"oue"` or `"bitflip"`.
    pub fn kind(&self) -> &'static str {
        if self.optimized {
            "oue"
        } else {
            "bitflip"
        }
    }

    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    pub fn domain(&self) -> u32 {
        self.domain
    }

    /// Bytes per packed report, ⌈d/8⌉.
    pub fn report_bytes(&self) -> usize {
        (self.domain as usize).div_ceil(8)
    }

    /// `p`: the chance a one bit is reported as one (symmetric: `e^{ε/2}/(e^{ε/2}+1)`).
    pub fn keep_probability(&self) -> f64 {
        self.keep
    }

    /// `1 − p`: the chance a one bit is reported as zero.
    pub fn drop_probability(&self) -> f64 {
        self.drop
    }

    /// `1 − q`: the chance a zero bit is reported as zero.
    pub fn stay_probability(&self) -> f64 {
        self.stay
    }

    /// `α = p − q`: how much of a bit's mean is signal (symmetric:
    /// `α_ε = (e^{ε/2}−1)/(e^{ε/2}+1)`; OUE: `tanh(ε/2)/2`).
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// `q`: the chance a zero bit is reported as one (symmetric: `1/(e^{ε/2}+1)`).
    pub fn flip(&self) -> f64 {
        self.flip
    }

    /// `q(1−q)`, the variance of a zero bit: Σ(p)'s diagonal where p is 0 (symmetric:
    /// `b = e^{ε/2}/(e^{ε/2}+1)²`).
    pub fn b(&self) -> f64 {
        self.flip * self.stay
    }

    /// `α(1−2q)`, the slope of Σ(p)'s diagonal in p: Σ(p) = Diag(q(1−q) + α(1−2q)p) −
    /// α²ppᵀ (docs/STATISTICS.md §1.6); equals α² for the symmetric mechanism.
    pub fn diag_slope(&self) -> f64 {
        if self.optimized {
            // 1 − 2q = tanh(ε/2) = 2α.
            2.0 * self.alpha * self.alpha
        } else {
            self.alpha * self.alpha
        }
    }

    /// Privatizes `x` with the thread's generator (tests only: rand 0.9 does not reseed it
    /// on fork; real reports draw from [`super::client_rng`]).
    #[cfg(test)]
    pub fn randomize(&self, x: u32) -> Result<Vec<u8>, EngineError> {
        self.randomize_with(x, &mut rand::rng())
    }

    /// Privatizes `x` with a caller-supplied generator (seeded only for simulation).
    pub fn randomize_with<R: Rng + ?Sized>(
        &self,
        x: u32,
        rng: &mut R,
    ) -> Result<Vec<u8>, EngineError> {
        super::check_input(x, self.domain)?;
        let mut out = vec![0u8; self.report_bytes()];
        self.randomize_into(x, rng, &mut out);
        Ok(out)
    }

    /// Writes the packed report of `x` (< domain) into `out` (report_bytes long).
    pub(crate) fn randomize_into<R: Rng + ?Sized>(&self, x: u32, rng: &mut R, out: &mut [u8]) {
        // A one is dropped with 1 − p and a zero flipped with q; for the symmetric
        // mechanism both are q, so its draws are exactly the former "flip each bit" ones.
        for j in 0..self.domain as usize {
            let truth = j == x as usize;
            let flipped = super::bernoulli_exact(rng, if truth { self.drop } else { self.flip });
            if truth != flipped {
                out[j / 8] |= 1 << (j % 8);
            }
        }
    }

    /// Mean of a report bit under true distribution p: `p̃ = α p + q`.
    pub fn bit_law(&self, p: &[f64]) -> Vec<f64> {
        let (alpha, flip) = (self.alpha(), self.flip());
        p.iter().map(|&pj| alpha * pj + flip).collect()
    }

    /// `p̂ = (bit_counts/n − q)/α` (Wang et al. 2017, §4), with standard error
    /// `sqrt(f(1−f)/n)/α`, f the observed bit frequency.
    pub fn estimate(&self, bit_counts: &[u64], n: u64) -> Estimate {
        let (alpha, flip) = (self.alpha(), self.flip());
        Estimate::from_frequencies(
            bit_counts,
            n,
            |q| (q - flip) / alpha,
            |q, nf| (q * (1.0 - q) / nf).sqrt() / alpha,
        )
    }
}
