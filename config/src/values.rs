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
