use rand::seq::index;
use rand::Rng;

use super::Estimate;
use crate::error::EngineError;

/// k-subset selection (Wang et al., "Mutual information optimally local private discrete
/// distribution estimation", 2016; Ye & Barg, IEEE Trans. IT 2018): a report is a set of
/// k distinct categories. With probability `p = k e^ε/(k e^ε + d − k)` the true value is in
/// it and the other k − 1 members are uniform over the rest of [d]; otherwise all k are
/// uniform over [d] \ {x}. Every k-subset holding x has probability `e^ε` times one that
/// does not, so the report is ε-LDP (docs/STATISTICS.md §1.7).
///
/// The sketch is the d item counts plus n: a report is a d-bit vector with exactly k ones,
/// so the count of reports holding j has mean `n (q + (p − q) p_j)` with
/// `q = P(j ∈ S | x ≠ j) = (k − p)/(d − 1)`.
///
/// The probabilities come from forms that neither overflow nor cancel at the extreme ε
/// the config accepts, and the one coin is an exact Bernoulli.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Subset {
    epsilon: f64,
    domain: u32,
    k: u32,
    /// P(x ∈ S | x).
    keep: f64,
    /// 1 − keep, not taken from a cancellation.
    miss: f64,
    /// P(j ∈ S | x ≠ j).
    q: f64,
    /// p − q.
    alpha: f64,
}

impl Subset {
    /// `k = None` takes the default `⌈d/(e^ε+1)⌉`, clamped into `1..d`, which minimises the
    /// estimator's variance near the uniform distribution (Ye & Barg 2018, §III).
    pub fn new(epsilon: f64, domain: u32, k: Option<u32>) -> Result<Self, EngineError> {
        super::check_epsilon(epsilon)?;
        super::check_domain(domain)?;
        let k = match k {
            Some(k) => k,
            None => default_k(epsilon, domain),
        };
        if k == 0 || k >= domain {
            return Err(EngineError::invalid(
                "k",
                k,
                "an integer with 1 <= k < domain (the subset size)",
            ));
        }
        let (d, kf) = (f64::from(domain), f64::from(k));
        // t = (d − k) e^{−ε} / k, so p = 1/(1 + t) and 1 − p = t/(1 + t) with no overflow.
        // e^{−ε} correctly rounded: p is what the randomizer draws against, and every client
        // must compute the same double (conformance/README.md).
        let t = (d - kf) / kf * super::exp_neg(epsilon);
        let keep = 1.0 / (1.0 + t);
        let miss = t / (1.0 + t);
        // q = (k − p)/(d − 1) = (k − 1 + (1 − p))/(d − 1).
        let q = (kf - 1.0 + miss) / (d - 1.0);
        // p − q = (d − k)(1 − e^{−ε}) / ((d − 1)(1 + t)).
        let alpha = (d - kf) * (-(-epsilon).exp_m1()) / ((d - 1.0) * (1.0 + t));
        Ok(Subset {
            epsilon,
            domain,
            k,
            keep,
            miss,
            q,
            alpha,
        })
    }

    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    pub fn domain(&self) -> u32 {
        self.domain
    }

    /// The subset size.
    pub fn k(&self) -> u32 {
        self.k
    }

    /// `p = P(x ∈ S | x)`.
    pub fn keep_probability(&self) -> f64 {
        self.keep
    }

    /// `q = P(j ∈ S | x ≠ j)`.
    pub fn q(&self) -> f64 {
        self.q
    }

    /// `α = p − q`, the share of an item count's mean that is signal.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// `P(i ∈ S, j ∈ S | x = i)` for j ≠ i: x kept, then j among the other k − 1.
    pub fn pair_with_truth(&self) -> f64 {
        self.keep * f64::from(self.k - 1) / f64::from(self.domain - 1)
    }

    /// `P(i ∈ S, j ∈ S | x ∉ {i, j})`: a given pair among the members other than x, which
    /// are k − 1 of d − 1 with probability p and k of d − 1 otherwise. Zero when d = 2,
    /// where no pair avoids x.
    pub fn pair_without_truth(&self) -> f64 {
        if self.domain < 3 {
            return 0.0;
        }
        let (d, k) = (f64::from(self.domain), f64::from(self.k));
        // [p(k−1)(k−2) + (1−p)k(k−1)] / ((d−1)(d−2)) = (k−1)(k−2p)/((d−1)(d−2)).
        (k - 1.0) * (k - 2.0 * self.keep) / ((d - 1.0) * (d - 2.0))
    }

    /// Privatizes `x` with the thread's generator (tests only: rand 0.9 does not reseed it
    /// on fork; real reports draw from [`super::client_rng`]); the report is sorted.
    #[cfg(test)]
    pub fn randomize(&self, x: u32) -> Result<Vec<u32>, EngineError> {
        self.randomize_with(x, &mut rand::rng())
    }

    /// Privatizes `x` with a caller-supplied generator (seeded only for simulation).
    pub fn randomize_with<R: Rng + ?Sized>(
        &self,
        x: u32,
        rng: &mut R,
    ) -> Result<Vec<u32>, EngineError> {
        super::check_input(x, self.domain)?;
        let mut out = Vec::with_capacity(self.k as usize);
        self.randomize_into(x, rng, &mut out);
        Ok(out)
    }

    /// Clears `out` and writes the sorted report of `x` (< domain) into it.
    pub(crate) fn randomize_into<R: Rng + ?Sized>(&self, x: u32, rng: &mut R, out: &mut Vec<u32>) {
        out.clear();
        let holds_x = super::bernoulli_exact(rng, self.keep);
        let others = if holds_x { self.k - 1 } else { self.k };
        // A uniform `others`-subset of the d − 1 categories other than x: rand draws the
        // indices exactly (Floyd's or a partial shuffle, by size), and index i ≥ x stands
        // for category i + 1.
        let drawn = index::sample(rng, (self.domain - 1) as usize, others as usize);
        out.extend(
            drawn
                .into_iter()
                .map(|i| i as u32)
                .map(|i| if i >= x { i + 1 } else { i }),
        );
        if holds_x {
            out.push(x);
        }
        out.sort_unstable();
    }

    /// Mean of the item counts over n under true distribution p: `q + α p_j`.
    pub fn item_law(&self, p: &[f64]) -> Vec<f64> {
        p.iter().map(|&pj| self.q + self.alpha * pj).collect()
    }

    /// `p̂_j = (c_j/n − q)/α`, with standard error `sqrt(f(1−f)/n)/α`, f = c_j/n the
    /// observed share of reports holding j (each count is Binomial(n, q + α p_j)).
    pub fn estimate(&self, item_counts: &[u64], n: u64) -> Estimate {
        let (alpha, q) = (self.alpha, self.q);
        Estimate::from_frequencies(
            item_counts,
            n,
            |f| (f - q) / alpha,
            |f, nf| (f * (1.0 - f) / nf).sqrt() / alpha,
        )
    }

    /// `n·Var(p̂_j)` at `p_j → 0`: `q(1−q)/α²` (docs/STATISTICS.md §1.7).
    pub fn variance_at_zero(&self) -> f64 {
        self.q * (1.0 - self.q) / (self.alpha * self.alpha)
    }

    /// `1 − p`, not taken from a cancellation (it is ≈ (d−k)e^{−ε}/k at large ε).
    pub fn miss_probability(&self) -> f64 {
        self.miss
    }
}

/// `⌈d/(e^ε+1)⌉`, clamped into `1..d`.
pub fn default_k(epsilon: f64, domain: u32) -> u32 {
    let share = super::sign_lie(epsilon);
    let k = (f64::from(domain) * share).ceil();
    (k as u32).clamp(1, domain.saturating_sub(1).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// With k = 1 the mechanism is GenRR: p = e^ε/(e^ε+d−1), q = 1/(e^ε+d−1).
    #[test]
    fn k_one_is_grr() {
        for (eps, d) in [(0.5, 4u32), (2.0, 16), (5.0, 1024)] {
            let m = Subset::new(eps, d, Some(1)).unwrap();
            let e = f64::exp(eps);
            let z = e + f64::from(d) - 1.0;
            assert!((m.keep_probability() - e / z).abs() < 1e-12);
            assert!((m.q() - 1.0 / z).abs() < 1e-12);
            assert!((m.alpha() - (e - 1.0) / z).abs() < 1e-12);
        }
    }

    /// The stable forms agree with the textbook ones, `p + (d−1)q = k`.
    #[test]
    fn probabilities_are_consistent() {
        for (eps, d, k) in [
            (0.5, 16u32, 6u32),
            (2.0, 1024, 120),
            (5.0, 16, 2),
            (1e-6, 3, 2),
        ] {
            let m = Subset::new(eps, d, Some(k)).unwrap();
            let (e, df, kf) = (f64::exp(eps), f64::from(d), f64::from(k));
            let p = kf * e / (kf * e + df - kf);
            assert!((m.keep_probability() - p).abs() < 1e-12);
            assert!((p + (df - 1.0) * m.q() - kf).abs() < 1e-9);
            assert!((m.alpha() - (p - m.q())).abs() < 1e-12);
            assert!((m.miss_probability() + p - 1.0).abs() < 1e-12);
        }
        assert!(Subset::new(700.0, 1 << 24, None).unwrap().alpha() > 0.99);
        assert!(Subset::new(1e-9, 2, None).unwrap().alpha() > 0.0);
    }

    #[test]
    fn default_k_and_limits() {
        assert_eq!(default_k(2.0, 1000), 120); // ⌈1000/(e²+1)⌉ = ⌈119.2⌉
        assert_eq!(default_k(1e-9, 2), 1);
        assert_eq!(default_k(700.0, 1 << 24), 1);
        assert_eq!(Subset::new(1.0, 16, None).unwrap().k(), 5);
        for bad in [0u32, 16, 17] {
            let e = Subset::new(1.0, 16, Some(bad)).unwrap_err().to_string();
            assert!(e.contains('k') && e.contains(&bad.to_string()), "{e}");
        }
        assert!(Subset::new(1.0, 16, None).unwrap().randomize(16).is_err());
    }

    /// The CSPRNG path gives k distinct sorted categories, at the extremes of k too.
    #[test]
    fn csprng_reports_are_k_subsets() {
        for (d, k) in [(2u32, 1u32), (16, 15), (1000, 120)] {
            let m = Subset::new(2.0, d, Some(k)).unwrap();
            for x in [0, d - 1] {
                let r = m.randomize(x).unwrap();
                assert_eq!(r.len(), k as usize);
                assert!(r.windows(2).all(|w| w[0] < w[1]) && r[r.len() - 1] < d);
            }
        }
    }

    /// Reports have k distinct sorted members below d, and each member's frequency matches
    /// `p` for x and `q` elsewhere (5 s.e.), as do the pair frequencies.
    #[test]
    fn report_law() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let m = Subset::new(1.0, 7, Some(3)).unwrap();
        let trials = 200_000;
        let mut hits = [0u64; 7];
        let (mut pair_x, mut pair_other) = (0u64, 0u64);
        for _ in 0..trials {
            let r = m.randomize_with(2, &mut rng).unwrap();
            assert_eq!(r.len(), 3);
            assert!(r.windows(2).all(|w| w[0] < w[1]) && r[2] < 7);
            for &j in &r {
                hits[j as usize] += 1;
            }
            pair_x += u64::from(r.contains(&2) && r.contains(&5));
            pair_other += u64::from(r.contains(&0) && r.contains(&6));
        }
        let check = |count: u64, p: f64| {
            let f = count as f64 / trials as f64;
            let se = (p * (1.0 - p) / trials as f64).sqrt();
            assert!((f - p).abs() < 5.0 * se, "{f} vs {p}");
        };
        for (j, &h) in hits.iter().enumerate() {
            check(h, if j == 2 { m.keep_probability() } else { m.q() });
        }
        check(pair_x, m.pair_with_truth());
        check(pair_other, m.pair_without_truth());
    }
}
