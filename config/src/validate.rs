use std::collections::HashSet;

use crate::error::ConfigError;
use crate::model::{Config, MechanismConfig, TestKind, TestMethod};
use crate::null::NullSpec;

/// How far a null distribution's sum may be from 1.
pub const NULL_SUM_TOLERANCE: f64 = 1e-9;

impl Config {
    /// Checks every semantic rule the parser cannot express. Returns the first problem.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.streams.is_empty() {
            return Err(ConfigError::invalid(
                "stream",
                "[]",
                "at least one [[stream]] table is required",
            ));
        }
        let mut stream_names = HashSet::new();
        for (i, stream) in self.streams.iter().enumerate() {
            let at = format!("stream[{i}]");
            if stream.name.trim().is_empty() {
                return Err(ConfigError::invalid(
                    format!("{at}.name"),
                    format!("{:?}", stream.name),
                    "a non-empty name",
                ));
            }
            if !stream_names.insert(stream.name.as_str()) {
                return Err(ConfigError::invalid(
                    format!("{at}.name"),
                    format!("{:?}", stream.name),
                    "stream names must be unique; this one is used twice",
                ));
            }
            let at = format!("stream[{i}] ({:?})", stream.name);
            validate_mechanism(&at, &stream.mechanism)?;
            match &stream.source {
                crate::SourceConfig::Parquet { paths } if paths.is_empty() => {
                    return Err(ConfigError::invalid(
                        format!("{at}.source.paths"),
                        "[]",
                        "at least one path or glob",
                    ))
                }
                crate::SourceConfig::Parquet { .. } => {}
            }
            if stream.columns.report.is_empty() {
                return Err(ConfigError::invalid(
                    format!("{at}.columns.report"),
                    "\"\"",
                    "a column name",
                ));
            }
            let mut seen_group = HashSet::new();
            for g in &stream.columns.group_by {
                if g == &stream.columns.report || !seen_group.insert(g) {
                    return Err(ConfigError::invalid(
                        format!("{at}.columns.group_by"),
                        format!("{g:?}"),
                        "distinct column names other than the report column",
                    ));
                }
            }
            let d = stream.mechanism.domain() as usize;
            let mut test_names = HashSet::new();
            for (j, test) in stream.tests.iter().enumerate() {
                let tat = format!("{at}.test[{j}]");
                if !test_names.insert(test.name.as_str()) {
                    return Err(ConfigError::invalid(
                        format!("{tat}.name"),
                        format!("{:?}", test.name),
                        "test names must be unique within a stream; this one is used twice",
                    ));
                }
                let tat = format!("{at}.test[{j}] ({:?})", test.name);
                if !(test.alpha > 0.0 && test.alpha < 1.0) {
                    return Err(ConfigError::invalid(
                        format!("{tat}.alpha"),
                        test.alpha,
                        "a number strictly between 0 and 1",
                    ));
                }
                validate_null(&format!("{tat}.null"), &test.null, d)?;
                if let Some(method) = test.method {
                    check_method_applies(&tat, method, test.kind, &stream.mechanism)?;
                }
            }
        }
        Ok(())
    }
}

fn validate_mechanism(at: &str, mechanism: &MechanismConfig) -> Result<(), ConfigError> {
    match mechanism {
        MechanismConfig::Grr { epsilon, domain } => {
            if !(epsilon.is_finite() && *epsilon > 0.0) {
                return Err(ConfigError::invalid(
                    format!("{at}.mechanism.epsilon"),
                    epsilon,
                    "a finite number > 0",
                ));
            }
            if *domain < 2 {
                return Err(ConfigError::invalid(
                    format!("{at}.mechanism.domain"),
                    domain,
                    "an integer >= 2",
                ));
            }
        }
    }
    Ok(())
}

fn validate_null(key: &str, null: &NullSpec, d: usize) -> Result<(), ConfigError> {
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

fn check_method_applies(
    at: &str,
    method: TestMethod,
    kind: TestKind,
    mechanism: &MechanismConfig,
) -> Result<(), ConfigError> {
    let ok = matches!(
        (method, kind, mechanism),
        (
            TestMethod::LocalExpGOF,
            TestKind::Gof,
            MechanismConfig::Grr { .. }
        )
    );
    if ok {
        Ok(())
    } else {
        Err(ConfigError::invalid(
            format!("{at}.method"),
            method.name(),
            format!(
                "a method for a {:?} test on a {} stream (LocalExpGOF for gof on grr)",
                kind,
                mechanism.kind()
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use crate::{Config, ConfigError};

    const GOOD: &str = r#"
[[stream]]
name = "homepage"
source = { kind = "parquet", paths = ["data/*.parquet"] }
mechanism = { kind = "grr", epsilon = 1.0, domain = 4 }
columns = { report = "report", group_by = ["group"] }
[[stream.test]]
name = "uniform_gof"
kind = "gof"
null = "uniform"
alpha = 0.05
window = { kind = "global" }
"#;

    fn err(text: &str) -> String {
        match Config::from_toml_str(text, "test.toml") {
            Ok(_) => panic!("config should have been rejected:\n{text}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn accepts_the_documented_example() {
        let c = Config::from_toml_str(GOOD, "test.toml").unwrap();
        assert_eq!(c.streams.len(), 1);
        assert_eq!(c.streams[0].columns.group_by, vec!["group".to_string()]);
        assert_eq!(c.streams[0].tests[0].alpha, 0.05);
    }

    #[test]
    fn rejects_unknown_keys_naming_them() {
        let e = err(&GOOD.replace("alpha = 0.05", "alpha = 0.05\nalhpa = 0.1"));
        assert!(e.contains("alhpa"), "{e}");
        let e = err(&GOOD.replace("domain = 4", "domain = 4, epsilom = 2"));
        assert!(e.contains("epsilom"), "{e}");
    }

    #[test]
    fn rejects_bad_epsilon() {
        for bad in ["0.0", "-1.0", "inf", "nan"] {
            let e = err(&GOOD.replace("epsilon = 1.0", &format!("epsilon = {bad}")));
            assert!(e.contains("mechanism.epsilon"), "{e}");
            assert!(e.contains("finite number > 0"), "{e}");
        }
    }

    #[test]
    fn rejects_small_domain() {
        let e = err(&GOOD.replace("domain = 4", "domain = 1"));
        assert!(e.contains("mechanism.domain = 1"), "{e}");
    }

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

    #[test]
    fn rejects_alpha_outside_unit_interval() {
        for bad in ["0.0", "1.0", "1.5", "-0.1"] {
            let e = err(&GOOD.replace("alpha = 0.05", &format!("alpha = {bad}")));
            assert!(e.contains(".alpha"), "{e}");
            assert!(e.contains("strictly between 0 and 1"), "{e}");
        }
    }

    #[test]
    fn rejects_duplicate_names() {
        let twice = format!("{GOOD}\n{GOOD}");
        let e = err(&twice);
        assert!(e.contains("used twice") && e.contains("homepage"), "{e}");
        let tests_twice = GOOD.to_string()
            + "[[stream.test]]\nname = \"uniform_gof\"\nkind = \"gof\"\nnull = \"uniform\"\n";
        let e = err(&tests_twice);
        assert!(
            e.contains("test[1].name") && e.contains("used twice"),
            "{e}"
        );
    }

    #[test]
    fn rejects_unknown_window_and_kind() {
        let e = err(&GOOD.replace("kind = \"global\"", "kind = \"hourly\""));
        assert!(e.contains("hourly") && e.contains("global"), "{e}");
        let e = err(&GOOD.replace("kind = \"grr\"", "kind = \"rappor\""));
        assert!(e.contains("rappor"), "{e}");
    }

    #[test]
    fn parse_errors_name_the_file() {
        match Config::from_toml_str("[[stream]\n", "bad.toml") {
            Err(ConfigError::Parse { origin, .. }) => assert_eq!(origin, "bad.toml"),
            other => panic!("unexpected {other:?}"),
        }
    }
}
