use rand::Rng;

use super::Estimate;
use crate::error::EngineError;

/// Bit flipping (unary encoding, `M_bit` of seed 002 Alg. 4): the one-hot vector of x with
/// each bit kept with probability `a = e^{ε/2}/(e^{ε/2}+1)` and flipped otherwise. Two
/// inputs differ in two bits, so the whole report is ε-LDP.
///
/// Reports are packed LSB first: bit j is bit `j % 8` of byte `j / 8`.
///
/// The probabilities come from the stable forms `1/(1+e^{−ε/2})`, `1/(1+e^{ε/2})` and
/// `tanh(ε/4)`, and every flip is an exact Bernoulli draw, so the report stays ε-LDP and
/// Σ(p) stays invertible over the whole accepted range of ε.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BitFlip {
    epsilon: f64,
    domain: u32,
    keep: f64,
    flip: f64,
}

impl BitFlip {
    pub fn new(epsilon: f64, domain: u32) -> Result<Self, EngineError> {
        super::check_epsilon(epsilon)?;
        super::check_domain(domain)?;
        Ok(BitFlip {
            epsilon,
            domain,
            keep: super::sign_keep(epsilon / 2.0),
            flip: super::sign_lie(epsilon / 2.0),
        })
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

    /// Probability that a bit is reported as it truly is.
    pub fn keep_probability(&self) -> f64 {
        self.keep
    }

    /// `α_ε = (e^{ε/2}−1)/(e^{ε/2}+1)`: how much of a bit's mean is signal.
    pub fn alpha(&self) -> f64 {
        (self.epsilon / 4.0).tanh()
    }

    /// `1/(e^{ε/2}+1)`: the chance a zero bit is reported as one.
    pub fn flip(&self) -> f64 {
        self.flip
    }

    /// `b = e^{ε/2}/(e^{ε/2}+1)²`, the per-bit noise variance in Σ(p).
    pub fn b(&self) -> f64 {
        self.keep * self.flip
    }

    /// Privatizes `x` with the thread's CSPRNG.
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
        let flip = self.flip();
        for j in 0..self.domain as usize {
            let truth = j == x as usize;
            let flipped = super::bernoulli_exact(rng, flip);
            if truth != flipped {
                out[j / 8] |= 1 << (j % 8);
            }
        }
    }

    /// Mean of a report bit under true distribution p: `p̃ = α_ε p + 1/(e^{ε/2}+1)`.
    pub fn bit_law(&self, p: &[f64]) -> Vec<f64> {
        let (alpha, flip) = (self.alpha(), self.flip());
        p.iter().map(|&pj| alpha * pj + flip).collect()
    }

    /// `p̂ = (bit_counts/n − 1/(e^{ε/2}+1))/α_ε`, with standard error
    /// `sqrt(q(1−q)/n)/α_ε`, q the observed bit frequency.
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
