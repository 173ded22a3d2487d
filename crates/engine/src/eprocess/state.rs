//! What a caller keeps between looks: the running maximum of the e-process and whether
//! the window has rejected. Small and serde-able, so a service can checkpoint it.

use serde::{Deserialize, Serialize};

/// One look's sequential outcome.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Look {
    /// The e-value at this look (finite: capped at `f64::MAX`).
    pub e_value: f64,
    /// `min(1, 1/max e-value so far)`.
    pub anytime_p_value: f64,
    /// True from the first look whose e-value reached `1/α`, for ever after.
    pub reject: bool,
}

/// The running state of one e-process (one stream, test, window and group).
///
/// `max_e` starts at 1, the value of every e-process before any report.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SequentialState {
    pub max_e: f64,
    pub rejected: bool,
}

impl Default for SequentialState {
    fn default() -> Self {
        SequentialState {
            max_e: 1.0,
            rejected: false,
        }
    }
}

/// An e-value as records carry it: JSON has no infinity, and an e-value above `f64::MAX`
/// rejects at every level anyway.
pub fn finite_e_value(log_e: f64) -> f64 {
    if log_e.is_nan() {
        return 1.0;
    }
    log_e.exp().min(f64::MAX)
}

/// `min(1, 1/e)`: the anytime-valid p-value of a running maximum e.
pub fn anytime_p_value(max_e: f64) -> f64 {
    if max_e <= 1.0 {
        1.0
    } else {
        1.0 / max_e
    }
}

/// `e ≥ 1/α`, the Ville threshold.
pub fn crosses(e_value: f64, alpha: f64) -> bool {
    e_value >= 1.0 / alpha
}

impl SequentialState {
    /// Folds in the e-value of a new look. Ville's inequality bounds the chance that any
    /// look ever crosses 1/α, so rejection is kept once reached: later, smaller e-values
    /// do not withdraw it.
    pub fn observe(&mut self, e_value: f64, alpha: f64) -> Look {
        let e_value = if e_value.is_nan() {
            1.0
        } else {
            e_value.min(f64::MAX)
        };
        self.max_e = self.max_e.max(e_value);
        self.rejected |= crosses(e_value, alpha);
        Look {
            e_value,
            anytime_p_value: anytime_p_value(self.max_e),
            reject: self.rejected,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_rejected_stays_rejected() {
        let mut s = SequentialState::default();
        let a = s.observe(3.0, 0.05);
        assert!(!a.reject);
        assert!((a.anytime_p_value - 1.0 / 3.0).abs() < 1e-15);
        let b = s.observe(25.0, 0.05);
        assert!(b.reject);
        assert!((b.anytime_p_value - 0.04).abs() < 1e-15);
        let c = s.observe(0.5, 0.05);
        assert!(c.reject);
        assert_eq!(c.e_value, 0.5);
        assert!((c.anytime_p_value - 0.04).abs() < 1e-15);
    }

    #[test]
    fn threshold_is_inclusive_and_p_is_capped() {
        assert!(crosses(20.0, 0.05));
        assert!(!crosses(19.999, 0.05));
        assert_eq!(anytime_p_value(0.2), 1.0);
        assert_eq!(finite_e_value(1e6), f64::MAX);
        assert_eq!(finite_e_value(f64::INFINITY), f64::MAX);
    }
}
