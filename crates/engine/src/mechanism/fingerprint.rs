//! The mechanism fingerprint a client stamps on its messages (docs/clients.md), so that
//! reports randomized under other parameters (an old client after a change of ε or d) are
//! refused instead of being folded into the wrong estimate.

use super::{Mechanism, NoiseKind};

/// FNV-1a, 32 bits: a short, documented hash that every client can compute in a few lines
/// (clients/js/src/fingerprint.ts), not a security boundary.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |h: u32, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

impl Mechanism {
    /// FNV-1a over the kind's UTF-8 bytes, a 0 byte, and the parameters little-endian: ε as
    /// f64 bits then d as u32 (grr, bitflip, hadamard), then cohorts as u32 and seed as u64
    /// (cohort), then g and the pool size as u32 and the pool seed as u64 (olh); for matrix the number of signals and of types as u32, then every entry
    /// as f64 bits, row by row; for gauss ρ as f64 bits then d as u32, for laplace ε then d
    /// (`max_abs` is left out: it bounds what the server accepts, not how a client draws);
    /// for subset ε, d, then k as u32; for lgrr, losue and lsue ε∞ (`epsilon_perm`) and ε1
    /// as f64 bits, d as u32, then the period in ms as u64.
    /// None for raw, which no client randomizes.
    pub fn fingerprint(&self) -> Option<u32> {
        let mut bytes = self.kind().as_bytes().to_vec();
        bytes.push(0);
        let mut eps_d = |epsilon: f64, domain: u32| {
            bytes.extend_from_slice(&epsilon.to_le_bytes());
            bytes.extend_from_slice(&domain.to_le_bytes());
        };
        match self {
            Mechanism::Grr(m) => eps_d(m.epsilon(), m.domain()),
            Mechanism::BitFlip(m) => eps_d(m.epsilon(), m.domain()),
            Mechanism::Hadamard(m) => eps_d(m.epsilon(), m.domain()),
            Mechanism::Subset(m) => {
                eps_d(m.epsilon(), m.domain());
                bytes.extend_from_slice(&m.k().to_le_bytes());
            }
            Mechanism::Cohort(m) => {
                eps_d(m.epsilon(), m.domain());
                bytes.extend_from_slice(&m.cohorts().to_le_bytes());
                bytes.extend_from_slice(&m.seed().to_le_bytes());
            }
            Mechanism::Olh(m) => {
                eps_d(m.epsilon(), m.domain());
                bytes.extend_from_slice(&m.g().to_le_bytes());
                bytes.extend_from_slice(&m.pool_size().to_le_bytes());
                bytes.extend_from_slice(&m.pool_seed().to_le_bytes());
            }
            Mechanism::Channel(m) => {
                bytes.extend_from_slice(&(m.signals() as u32).to_le_bytes());
                bytes.extend_from_slice(&m.domain().to_le_bytes());
                for s in 0..m.signals() {
                    for x in 0..m.domain() as usize {
                        bytes.extend_from_slice(&m.entry(s, x).to_le_bytes());
                    }
                }
            }
            Mechanism::Noise(n) => match n.kind() {
                NoiseKind::Gauss { rho } => eps_d(rho, n.domain()),
                NoiseKind::Laplace { epsilon } => eps_d(epsilon, n.domain()),
            },
            Mechanism::Raw { .. } => return None,
            Mechanism::Longitudinal(l) => {
                bytes.extend_from_slice(&l.epsilon_perm().to_le_bytes());
                bytes.extend_from_slice(&l.epsilon_1().to_le_bytes());
                bytes.extend_from_slice(&l.domain().to_le_bytes());
                bytes.extend_from_slice(&l.period_ms().to_le_bytes());
            }
        }
        Some(fnv1a(&bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mechanism::{Grr, Hadamard, Noise};

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        assert_eq!(fnv1a(b""), 0x811c_9dc5);
        assert_eq!(fnv1a(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a(b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn every_parameter_changes_the_fingerprint() {
        let grr = |e, d| Mechanism::Grr(Grr::new(e, d).unwrap()).fingerprint();
        assert_ne!(grr(1.0, 4), grr(1.0, 5));
        assert_ne!(grr(1.0, 4), grr(1.0 + f64::EPSILON, 4));
        assert_ne!(
            grr(1.0, 4),
            Mechanism::Hadamard(Hadamard::new(1.0, 4).unwrap()).fingerprint()
        );
        assert_eq!(grr(1.0, 4), grr(1.0, 4));
        assert_eq!(Mechanism::Raw { domain: 4 }.fingerprint(), None);
        // Subset: k is a parameter of how a client draws, so it changes the fingerprint.
        let subset = |k| {
            Mechanism::Subset(crate::mechanism::Subset::new(1.0, 8, Some(k)).unwrap()).fingerprint()
        };
        assert_ne!(subset(2), subset(3));
        assert_eq!(
            subset(crate::mechanism::subset_default_k(1.0, 8)),
            Mechanism::Subset(crate::mechanism::Subset::new(1.0, 8, None).unwrap()).fingerprint()
        );
        let olh = |g, s, seed| {
            Mechanism::Olh(Box::new(
                crate::mechanism::Olh::new(1.0, 4, g, s, seed).unwrap(),
            ))
            .fingerprint()
        };
        assert_ne!(olh(4, 8, 0), olh(5, 8, 0));
        assert_ne!(olh(4, 8, 0), olh(4, 9, 0));
        assert_ne!(olh(4, 8, 0), olh(4, 8, 1));
        assert_eq!(olh(4, 8, 0), olh(4, 8, 0));
    }

    /// The noise mechanisms have one too (they had none, so stamped noise messages were
    /// refused): ρ or ε and d change it, `max_abs` does not.
    #[test]
    fn noise_mechanisms_have_a_fingerprint() {
        let noise = |kind, d| {
            Mechanism::Noise(Noise::new(kind, d).unwrap())
                .fingerprint()
                .unwrap()
        };
        let gauss = |rho| NoiseKind::Gauss { rho };
        let laplace = |epsilon| NoiseKind::Laplace { epsilon };
        assert_ne!(noise(gauss(0.5), 4), noise(gauss(0.25), 4));
        assert_ne!(noise(gauss(0.5), 4), noise(gauss(0.5), 5));
        assert_ne!(noise(gauss(1.0), 4), noise(laplace(1.0), 4));
        assert_ne!(noise(laplace(1.0), 4), noise(laplace(2.0), 4));
        let bounded = Noise::new(gauss(0.5), 4)
            .unwrap()
            .with_max_abs(Some(3.0))
            .unwrap();
        assert_eq!(
            Mechanism::Noise(bounded).fingerprint(),
            Some(noise(gauss(0.5), 4))
        );
        // FNV-1a of "gauss\0", 0.5f64 LE, 4u32 LE: pinned so that clients can check theirs.
        let mut bytes = b"gauss\0".to_vec();
        bytes.extend_from_slice(&0.5f64.to_le_bytes());
        bytes.extend_from_slice(&4u32.to_le_bytes());
        assert_eq!(noise(gauss(0.5), 4), fnv1a(&bytes));
    }
}
