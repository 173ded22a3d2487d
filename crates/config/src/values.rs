//! Numbers the config has checked, as types: holding one proves it is in range, so code
//! downstream need not check it again. Each is made only by its checking constructor.

/// A significance level, strictly between 0 and 1.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Alpha(f64);

impl Alpha {
    /// `value` if it lies strictly between 0 and 1 (NaN does not).
    pub fn new(value: f64) -> Option<Self> {
        (value > 0.0 && value < 1.0).then_some(Alpha(value))
    }

    pub fn get(self) -> f64 {
        self.0
    }
}

/// Smallest local ε: below it a test needs more than 1/ε² = 10¹⁸ reports to see anything,
/// beyond what a sketch's 64-bit counters hold.
pub const MIN_EPSILON: f64 = 1e-9;
/// Largest local ε. The randomizers draw their lie with probability about e^{−ε} exactly,
/// and the engine computes every probability from e^{−ε}; both need e^{−ε} to be a normal
/// double, and e^{−708} is the last one.
pub const MAX_EPSILON: f64 = 700.0;

/// A local randomizer's ε, from [`MIN_EPSILON`] to [`MAX_EPSILON`]: the range where the
/// randomizers stay exactly ε-LDP and the statistics stay computable. (Laplace noise needs
/// more, see `MIN_LAPLACE_EPSILON`.)
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Epsilon(f64);

impl Epsilon {
    /// `value` if it lies in the accepted range (NaN does not).
    pub fn new(value: f64) -> Option<Self> {
        (MIN_EPSILON..=MAX_EPSILON)
            .contains(&value)
            .then_some(Epsilon(value))
    }

    pub fn get(self) -> f64 {
        self.0
    }
}

/// Largest domain any mechanism accepts: sketches are dense tables of this size.
pub const MAX_DOMAIN: u32 = 1 << 24;

/// A mechanism's number of true categories d, from 2 to [`MAX_DOMAIN`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Domain(u32);

impl Domain {
    /// `value` if it lies from 2 to [`MAX_DOMAIN`].
    pub fn new(value: u32) -> Option<Self> {
        (2..=MAX_DOMAIN).contains(&value).then_some(Domain(value))
    }

    pub fn get(self) -> u32 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::{Alpha, Domain, Epsilon, MAX_DOMAIN, MAX_EPSILON, MIN_EPSILON};

    #[test]
    fn each_holds_only_what_its_range_allows() {
        for bad in [0.0, 1.0, -0.5, f64::NAN] {
            assert_eq!(Alpha::new(bad), None, "{bad}");
        }
        assert_eq!(Alpha::new(0.05).map(Alpha::get), Some(0.05));
        for bad in [
            0.0,
            MIN_EPSILON / 2.0,
            MAX_EPSILON * 1.01,
            f64::INFINITY,
            f64::NAN,
        ] {
            assert_eq!(Epsilon::new(bad), None, "{bad}");
        }
        for good in [MIN_EPSILON, 1.0, MAX_EPSILON] {
            assert_eq!(Epsilon::new(good).map(Epsilon::get), Some(good));
        }
        assert_eq!(Domain::new(1), None);
        assert_eq!(Domain::new(MAX_DOMAIN + 1), None);
        assert_eq!(Domain::new(2).map(Domain::get), Some(2));
        assert_eq!(Domain::new(MAX_DOMAIN).map(Domain::get), Some(MAX_DOMAIN));
    }
}
