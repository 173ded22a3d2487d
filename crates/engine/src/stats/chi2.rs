use statrs::distribution::{ChiSquared, ContinuousCDF};

/// `P(χ²_df ≥ x)`. Returns NaN for `df = 0` or a NaN statistic, which callers treat as
/// "no test".
pub fn chi2_sf(df: u32, x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    match ChiSquared::new(f64::from(df)) {
        Ok(law) => law.sf(x),
        Err(_) => f64::NAN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    #[test]
    fn matches_scipy() {
        // scipy.stats.chi2.sf(3.0, 2) = exp(-1.5)
        assert!(close(chi2_sf(2, 3.0), (-1.5f64).exp(), 1e-12));
        // scipy.stats.chi2.sf(150.0, 9)
        assert!(close(chi2_sf(9, 150.0), 8.819629954805395e-28, 1e-9));
        // scipy.stats.chi2.sf(0.5, 15)
        assert!(close(chi2_sf(15, 0.5), 0.9999999982553599, 1e-12));
    }
}
