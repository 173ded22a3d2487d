//! The longitudinal kinds (`lgrr`, `losue`, `lsue`): their two ε and period, and the
//! windows their tests may use. Within one period a device's report is independent of
//! every other report in the window; across periods its reports share its memo, so a
//! window that spans periods holds correlated reports and no test's level holds there
//! (docs/STATISTICS.md §1.9: a cumulative GOF over 10 periods rejected a true null 42% of
//! the time at α = 0.05). Such windows are refused here, naming why.

use super::window::MAX_WINDOW_MS;
use crate::error::ConfigError;
use crate::hypothesis_spec::TestTable;
use crate::longitudinal::MIN_PERIOD;
use crate::model::{EventTime, MechanismConfig, SourceConfig};
use crate::number_text::compact;
use crate::toml_form::StreamTable;
use crate::window::WindowConfig;

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Both ε (each in the mechanisms' range, checked by `epsilon`), their order, and the
/// period; `m` names the table in errors.
pub(super) fn validate_longitudinal_mechanism(
    m: &str,
    mechanism: &MechanismConfig,
    epsilon: impl Fn(String, f64) -> Result<(), ConfigError>,
) -> Result<(), ConfigError> {
    let Some(l) = mechanism.longitudinal() else {
        return Ok(());
    };
    epsilon(format!("{m}.epsilon_perm"), l.epsilon_perm)?;
    epsilon(format!("{m}.epsilon_1"), l.epsilon_1)?;
    if l.epsilon_1 >= l.epsilon_perm {
        return Err(ConfigError::invalid(
            format!("{m}.epsilon_1"),
            compact(l.epsilon_1),
            format!(
                "less than epsilon_perm ({}): a single report must be more private than the \
                 memo it is drawn from; at epsilon_1 = epsilon_perm the second round would be \
                 the identity and every report would repeat the memo",
                compact(l.epsilon_perm)
            ),
        ));
    }
    if l.period < MIN_PERIOD || l.period.millis() > MAX_WINDOW_MS {
        return Err(ConfigError::invalid(
            format!("{m}.period"),
            l.period,
            "a duration from 1s to 3650d, e.g. \"1d\": a device reports each metric at most \
             once per period",
        ));
    }
    Ok(())
}

/// Why a window that spans periods is refused, with the sequential test's own reason when
/// the test is one.
fn spans_periods(test: &TestTable) -> String {
    let mut why = "reports of one device in different periods share its memoized response, so \
                   they are not independent and no test's level holds over them (a cumulative \
                   GOF over 10 periods rejected a true null 42% of the time at alpha = 0.05)"
        .to_string();
    if test.sequential {
        why.push_str(
            "; a sequential test across periods is refused for the same reason: its \
             e-process multiplies evidence from reports it assumes independent",
        );
    }
    why
}

/// A test's window on a longitudinal stream: inside one period (windows and periods are
/// both aligned to the Unix epoch), where a device reports at most once.
pub(super) fn validate_longitudinal_window(
    key: &str,
    test: &TestTable,
    mechanism: &MechanismConfig,
) -> Result<(), ConfigError> {
    let Some(l) = mechanism.longitudinal() else {
        return Ok(());
    };
    let period = l.period;
    match test.window {
        WindowConfig::Global | WindowConfig::Cumulative => {
            let kind = if test.window == WindowConfig::Global {
                "global"
            } else {
                "cumulative"
            };
            Err(ConfigError::invalid(
                format!("{key}.kind"),
                format!("{kind:?}"),
                format!(
                    "a tumbling window of period = {period} or a divisor of it on a {} \
                     stream: a {kind} window spans periods, and {}",
                    l.kind.name(),
                    spans_periods(test)
                ),
            ))
        }
        WindowConfig::Tumbling { size } if !period.millis().is_multiple_of(size.millis()) => {
            Err(ConfigError::invalid(
                format!("{key}.size"),
                size,
                format!(
                    "a size dividing period = {period} (e.g. {period}) on a {} stream, so that \
                     each window lies inside one period: a window that spans periods holds \
                     two reports of a device, and {}",
                    l.kind.name(),
                    spans_periods(test)
                ),
            ))
        }
        WindowConfig::Tumbling { .. } => Ok(()),
        WindowConfig::Sliding { size, slide } => {
            // Windows start at every multiple of slide, so at every multiple of
            // g = gcd(slide, period) inside a period: all lie inside one iff size <= g.
            let g = gcd(slide.millis(), period.millis());
            if size.millis() <= g {
                return Ok(());
            }
            Err(ConfigError::invalid(
                format!("{key}.size"),
                size,
                format!(
                    "at most gcd(slide, period) = {} ms on a {} stream (period = {period}), \
                     so that every window lies inside one period; use a tumbling window of \
                     the period instead: a window that spans periods holds two reports of a \
                     device, and {}",
                    g,
                    l.kind.name(),
                    spans_periods(test)
                ),
            ))
        }
    }
}

/// A device's period comes from the `ts` it stamps; a Kafka record timestamp can move a
/// report into another period, where the same device may report too.
pub(super) fn validate_longitudinal_source(
    at: &str,
    stream: &StreamTable,
) -> Result<(), ConfigError> {
    let Some(l) = stream.mechanism.longitudinal() else {
        return Ok(());
    };
    if let SourceConfig::Kafka(k) = &stream.source {
        if matches!(k.event_time, EventTime::Kafka | EventTime::None) {
            let shown = if k.event_time == EventTime::Kafka {
                "\"kafka\""
            } else {
                "\"none\""
            };
            return Err(ConfigError::invalid(
                format!("{at}.source.event_time"),
                shown,
                format!(
                    "\"payload\" or \"auto\" on a {} stream: a device reports once per period \
                     of the ts it stamps on its message, and the windows must cut time where \
                     the devices do",
                    l.kind.name()
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::test_support::err;
    use crate::model::Config;

    fn stream(mechanism: &str, window: &str, extra: &str) -> String {
        format!(
            "[[stream]]\nname = \"s\"\nsource = {{ kind = \"parquet\", paths = [\"x\"] }}\nmechanism = {mechanism}\n[[stream.test]]\nname = \"t\"\nkind = \"gof\"\nnull = \"uniform\"\nwindow = {window}\n{extra}"
        )
    }

    const LGRR: &str =
        "{ kind = \"lgrr\", epsilon_perm = 2.0, epsilon_1 = 1.0, domain = 4, period = \"1d\" }";

    #[test]
    fn accepts_windows_inside_one_period() {
        for window in [
            "{ kind = \"tumbling\", size = \"1d\" }",
            "{ kind = \"tumbling\", size = \"6h\" }",
            "{ kind = \"tumbling\", size = \"1d\", looks = \"1h\" }",
            "{ kind = \"sliding\", size = \"1h\", slide = \"1h\" }",
        ] {
            let text = stream(LGRR, window, "sequential = true\n");
            let c = Config::from_toml_str(&text, "t.toml");
            assert!(c.is_ok(), "{window}: {c:?}");
        }
        // The default period is a day.
        let text = stream(
            "{ kind = \"lsue\", epsilon_perm = 2.0, epsilon_1 = 1.0, domain = 4 }",
            "{ kind = \"tumbling\", size = \"1d\" }",
            "",
        );
        let c = Config::from_toml_str(&text, "t.toml").unwrap();
        assert_eq!(
            c.streams[0].mechanism.longitudinal().unwrap().period,
            crate::DEFAULT_PERIOD
        );
    }

    #[test]
    fn refuses_windows_that_span_periods_saying_why() {
        for (window, key) in [
            ("{ kind = \"global\" }", "window.kind"),
            ("{ kind = \"cumulative\" }", "window.kind"),
            ("{ kind = \"tumbling\", size = \"2d\" }", "window.size"),
            ("{ kind = \"tumbling\", size = \"7h\" }", "window.size"),
            (
                "{ kind = \"sliding\", size = \"2h\", slide = \"1h\" }",
                "window.size",
            ),
        ] {
            let e = err(&stream(LGRR, window, ""));
            assert!(e.contains(key), "{window}: {e}");
            assert!(e.contains("share its memoized response"), "{e}");
            assert!(e.contains("lgrr"), "{e}");
        }
        let e = err(&stream(
            "{ kind = \"losue\", epsilon_perm = 2.0, epsilon_1 = 1.0, domain = 4 }",
            "{ kind = \"cumulative\" }",
            "sequential = true\n",
        ));
        assert!(e.contains("e-process"), "{e}");
    }

    #[test]
    fn refuses_bad_parameters_naming_the_key() {
        let with = |m: &str| err(&stream(m, "{ kind = \"tumbling\", size = \"1d\" }", ""));
        let e = with("{ kind = \"lgrr\", epsilon_perm = 1.0, epsilon_1 = 1.0, domain = 4 }");
        assert!(
            e.contains("epsilon_1") && e.contains("less than epsilon_perm"),
            "{e}"
        );
        let e = with("{ kind = \"lgrr\", epsilon_perm = 701.0, epsilon_1 = 1.0, domain = 4 }");
        assert!(e.contains("epsilon_perm") && e.contains("700"), "{e}");
        let e = with("{ kind = \"lgrr\", epsilon_perm = 2.0, epsilon_1 = 0.0, domain = 4 }");
        assert!(e.contains("epsilon_1"), "{e}");
        let e = with(
            "{ kind = \"lgrr\", epsilon_perm = 2.0, epsilon_1 = 1.0, domain = 4, period = \"500ms\" }",
        );
        assert!(e.contains("period"), "{e}");
        let e = with("{ kind = \"lgrr\", epsilon_perm = 2.0, epsilon_1 = 1.0, domain = 1 }");
        assert!(e.contains("domain"), "{e}");
        // `epsilon` belongs to the one-shot kinds: the parser names the keys these take.
        let e = with("{ kind = \"lgrr\", epsilon = 1.0, domain = 4 }");
        assert!(e.contains("epsilon") && e.contains("epsilon_perm"), "{e}");
    }

    #[test]
    fn refuses_kafka_time_for_the_period() {
        let text = "[[stream]]\nname = \"s\"\nsource = { kind = \"kafka\", brokers = \"b:1\", topics = [\"t\"], group_id = \"g\", event_time = \"kafka\" }\nmechanism = { kind = \"lgrr\", epsilon_perm = 2.0, epsilon_1 = 1.0, domain = 4 }\n";
        let e = err(text);
        assert!(e.contains("event_time") && e.contains("payload"), "{e}");
        let ok = text.replace("\"kafka\" }", "\"payload\" }");
        assert!(Config::from_toml_str(&ok, "t.toml").is_ok());
    }
}
