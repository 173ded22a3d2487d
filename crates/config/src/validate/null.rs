//! A null distribution (a test's `null`, a simulator's `p`) against the stream's domain.

use crate::error::ConfigError;
use crate::null::NullSpec;

/// How far a null distribution's sum may be from 1.
pub const NULL_SUM_TOLERANCE: f64 = 1e-9;

pub(super) fn validate_null(key: &str, null: &NullSpec, d: usize) -> Result<(), ConfigError> {
    let NullSpec::Probabilities(p) = null else {
        return Ok(());
    };
    if p.len() != d {
        return Err(ConfigError::invalid(
            key,
            format!("a list of {} probabilities", p.len()),
            format!("\"uniform\" or exactly {d} probabilities (the mechanism's domain)"),
        ));
    }
    if let Some((j, x)) = p
        .iter()
        .enumerate()
        .find(|(_, x)| !(x.is_finite() && **x > 0.0))
    {
        return Err(ConfigError::invalid(
            format!("{key}[{j}]"),
            x,
            "every null probability must be finite and > 0",
        ));
    }
    let sum: f64 = p.iter().sum();
    if (sum - 1.0).abs() > NULL_SUM_TOLERANCE {
        return Err(ConfigError::invalid(
            key,
            format!("probabilities summing to {sum}"),
            format!("probabilities that sum to 1 within {NULL_SUM_TOLERANCE:e}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{err, GOOD};
    use crate::model::Config;

    #[test]
    fn rejects_bad_nulls() {
        let e = err(&GOOD.replace("null = \"uniform\"", "null = [0.5, 0.5, 0.1, 0.1]"));
        assert!(e.contains("summing to 1.2"), "{e}");
        let e = err(&GOOD.replace("null = \"uniform\"", "null = [0.5, 0.5, 0.0, 0.0]"));
        assert!(e.contains("null[2] = 0"), "{e}");
        let e = err(&GOOD.replace("null = \"uniform\"", "null = [0.5, 0.5]"));
        assert!(e.contains("exactly 4 probabilities"), "{e}");
        let e = err(&GOOD.replace("null = \"uniform\"", "null = \"zipf\""));
        assert!(e.contains("\"uniform\" or a list"), "{e}");
        // within tolerance is fine
        Config::from_toml_str(
            &GOOD.replace(
                "null = \"uniform\"",
                "null = [0.25, 0.25, 0.25, 0.2500000000001]",
            ),
            "t",
        )
        .unwrap();
    }
}
