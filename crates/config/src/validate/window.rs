//! A test's window, its looks, and the panes they cut a stream's state into.

use crate::duration::DurationMs;
use crate::error::ConfigError;
use crate::hypothesis_spec::TestTable;
use crate::toml_form::StreamTable;
use crate::window::WindowConfig;

/// The longest window or slide: ten years. Event times are i64 milliseconds; this keeps
/// every window bound and pane index far from overflow.
pub const MAX_WINDOW_MS: u64 = 3650 * 86_400_000;
/// The most panes one window may span. Each pane holds a sketch per group, so a window's
/// memory grows with its pane count (a 1h window sliding by 1ms would need 3.6 million).
pub const MAX_PANES_PER_WINDOW: u64 = 10_000;

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Panes are as wide as the gcd of every window size and slide of the stream, so one test's
/// short slide multiplies the panes of every other test's window.
pub(super) fn validate_pane_count(at: &str, stream: &StreamTable) -> Result<(), ConfigError> {
    let lengths = |w: &WindowConfig| match *w {
        WindowConfig::Tumbling { size } => vec![size.millis()],
        WindowConfig::Sliding { size, slide } => vec![size.millis(), slide.millis()],
        WindowConfig::Global | WindowConfig::Cumulative => Vec::new(),
    };
    // Looks are whole panes too (a look merges the panes before it).
    let all: Vec<u64> = stream
        .tests
        .iter()
        .flat_map(|t| {
            lengths(&t.window)
                .into_iter()
                .chain(t.looks.map(|l| l.millis()))
        })
        .collect();
    // A length over the bound is reported by `validate_window`, naming its key.
    if all.iter().any(|&l| l > MAX_WINDOW_MS) {
        return Ok(());
    }
    let pane = all.into_iter().fold(0, gcd);
    if pane == 0 {
        return Ok(());
    }
    for (j, test) in stream.tests.iter().enumerate() {
        let Some(&size) = lengths(&test.window).first() else {
            continue;
        };
        let panes = size / pane;
        if panes > MAX_PANES_PER_WINDOW {
            return Err(ConfigError::invalid(
                format!("{at}.test[{j}] ({:?}).window", test.name),
                format!("{size} ms in panes of {pane} ms ({panes} panes)"),
                format!(
                    "at most {MAX_PANES_PER_WINDOW} panes per window: panes are the gcd of the \
                     stream's window sizes, slides and looks, and each holds a sketch per group; \
                     use a coarser slide or looks, or fewer distinct window lengths"
                ),
            ));
        }
    }
    Ok(())
}

/// The most looks one bounded window may take (`size / looks`): each is a full evaluation
/// of every group.
pub const MAX_LOOKS_PER_WINDOW: u64 = 10_000;

/// The shortest interval between looks.
pub const MIN_LOOKS_MS: u64 = 1_000;

pub(super) fn validate_looks(key: &str, test: &TestTable) -> Result<(), ConfigError> {
    let Some(looks) = test.looks else {
        return Ok(());
    };
    // Each look evaluates every group and writes a record per group: "1ms" looks asked for
    // about a thousand records a second per group, with no warning.
    if looks.millis() < MIN_LOOKS_MS {
        return Err(ConfigError::invalid(
            key,
            looks,
            "at least 1s, e.g. \"1m\": each look evaluates every group and writes a record",
        ));
    }
    if looks.millis() > MAX_WINDOW_MS {
        return Err(ConfigError::invalid(
            key,
            looks,
            "at most 3650d (ten years): event times are milliseconds in 64 bits",
        ));
    }
    if test.spec.curator().is_some() {
        return Err(ConfigError::invalid(
            key,
            looks,
            "no looks on a private (uniformity/identity) test: each look would be a release \
             that spends privacy budget; private tests release final windows only",
        ));
    }
    if let WindowConfig::Tumbling { size } | WindowConfig::Sliding { size, .. } = test.window {
        if looks.millis() > size.millis() {
            return Err(ConfigError::invalid(
                key,
                looks,
                format!("at most the window size ({size}): a window is looked at inside it"),
            ));
        }
        let count = size.millis() / looks.millis();
        if count > MAX_LOOKS_PER_WINDOW {
            return Err(ConfigError::invalid(
                key,
                looks,
                format!(
                    "at most {MAX_LOOKS_PER_WINDOW} looks per window (size {size} gives \
                     {count}): each look evaluates every group"
                ),
            ));
        }
    }
    Ok(())
}

pub(super) fn validate_window(key: &str, window: &WindowConfig) -> Result<(), ConfigError> {
    let too_long = |name: &str, d: DurationMs| {
        (d.millis() > MAX_WINDOW_MS).then(|| {
            ConfigError::invalid(
                format!("{key}.{name}"),
                d,
                "at most 3650d (ten years): event times are milliseconds in 64 bits",
            )
        })
    };
    match *window {
        WindowConfig::Tumbling { size } | WindowConfig::Sliding { size, .. } => {
            if let Some(e) = too_long("size", size) {
                return Err(e);
            }
        }
        WindowConfig::Global | WindowConfig::Cumulative => {}
    }
    if let WindowConfig::Sliding { slide, .. } = *window {
        if let Some(e) = too_long("slide", slide) {
            return Err(e);
        }
    }
    match *window {
        WindowConfig::Global | WindowConfig::Cumulative => Ok(()),
        WindowConfig::Tumbling { size } if size.millis() == 0 => Err(ConfigError::invalid(
            format!("{key}.size"),
            size,
            "a duration > 0, e.g. \"1h\"",
        )),
        WindowConfig::Tumbling { .. } => Ok(()),
        WindowConfig::Sliding { size, slide } => {
            if size.millis() == 0 {
                return Err(ConfigError::invalid(
                    format!("{key}.size"),
                    size,
                    "a duration > 0, e.g. \"1h\"",
                ));
            }
            if slide.millis() == 0 {
                return Err(ConfigError::invalid(
                    format!("{key}.slide"),
                    slide,
                    "a duration > 0, e.g. \"5m\"",
                ));
            }
            if size.millis() % slide.millis() != 0 {
                return Err(ConfigError::invalid(
                    format!("{key}.size"),
                    size,
                    format!("a whole multiple of slide = {slide}"),
                ));
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{config, err, gof_err, gof_stream, GOOD, GRR, PARQUET};
    use crate::duration::DurationMs;
    use crate::model::Config;
    use crate::window::WindowConfig;

    #[test]
    fn looks_are_bounded_and_refused_on_private_tests() {
        let with = |window: &str| {
            format!(
                "[[stream]]\nname = \"s\"\nsource = {{ kind = \"parquet\", paths = [\"x\"] }}\nmechanism = {{ kind = \"grr\", epsilon = 1.0, domain = 4 }}\n[[stream.test]]\nname = \"w\"\nkind = \"gof\"\nnull = \"uniform\"\nwindow = {window}\n"
            )
        };
        let c = Config::from_toml_str(
            &with("{ kind = \"tumbling\", size = \"1h\", looks = \"1m\" }"),
            "t",
        )
        .unwrap();
        assert_eq!(
            c.streams[0].tests[0].looks.map(|l| l.millis()),
            Some(60_000)
        );
        Config::from_toml_str(&with("{ kind = \"cumulative\", looks = \"1s\" }"), "t").unwrap();
        let e = err(&with(
            "{ kind = \"tumbling\", size = \"1m\", looks = \"0s\" }",
        ));
        assert!(
            e.contains("window.looks") && e.contains("at least 1s"),
            "{e}"
        );
        // A cumulative window has no pane bound: "1ms" looks were accepted and wrote about a
        // thousand records a second per group.
        let e = err(&with("{ kind = \"cumulative\", looks = \"1ms\" }"));
        assert!(
            e.contains("window.looks") && e.contains("at least 1s"),
            "{e}"
        );
        let e = err(&with(
            "{ kind = \"tumbling\", size = \"1m\", looks = \"2m\" }",
        ));
        assert!(
            e.contains("window.looks") && e.contains("window size"),
            "{e}"
        );
        // Looks are panes too, so the pane bound also bounds looks per window.
        let e = err(&with(
            "{ kind = \"tumbling\", size = \"1d\", looks = \"1s\" }",
        ));
        assert!(e.contains("at most 10000 panes per window"), "{e}");
        let e = err(&with("{ kind = \"global\", looks = \"3651d\" }"));
        assert!(e.contains("window.looks") && e.contains("3650d"), "{e}");
        let private = "[[stream]]\nname = \"s\"\nsource = { kind = \"parquet\", paths = [\"x\"] }\nmechanism = { kind = \"raw\", domain = 4 }\nbudget_epsilon = 1.0\n[[stream.test]]\nname = \"u\"\nkind = \"uniformity\"\nepsilon = 1.0\nwindow = { kind = \"cumulative\", looks = \"1m\" }\n";
        let e = err(private);
        assert!(
            e.contains("window.looks") && e.contains("privacy budget"),
            "{e}"
        );
        // Looks enter the pane width: 7 s looks under a 1 h window are 514 panes, fine;
        // 1 ms looks would be 3.6 million.
        let e = err(&with(
            "{ kind = \"tumbling\", size = \"1h\", looks = \"1ms\" }",
        ));
        assert!(e.contains("panes"), "{e}");
    }

    #[test]
    fn rejects_unknown_window_and_kind() {
        let e = err(&GOOD.replace("kind = \"global\"", "kind = \"hourly\""));
        assert!(e.contains("hourly") && e.contains("global"), "{e}");
        let e = err(&GOOD.replace("kind = \"grr\"", "kind = \"rappor\""));
        assert!(e.contains("rappor"), "{e}");
    }

    #[test]
    fn windows_parse_and_validate() {
        let c = Config::from_toml_str(
            &GOOD.replace(
                "kind = \"global\"",
                "kind = \"sliding\", size = \"1h\", slide = \"5m\"",
            ),
            "t",
        )
        .unwrap();
        assert_eq!(
            c.streams[0].tests[0].window,
            WindowConfig::Sliding {
                size: DurationMs(3_600_000),
                slide: DurationMs(300_000)
            }
        );
        let e = err(&GOOD.replace(
            "kind = \"global\"",
            "kind = \"sliding\", size = \"1h\", slide = \"7m\"",
        ));
        assert!(
            e.contains("window.size = \"1h\"") && e.contains("multiple of slide = \"7m\""),
            "{e}"
        );
        let e = err(&GOOD.replace("kind = \"global\"", "kind = \"tumbling\", size = \"0s\""));
        assert!(e.contains("window.size") && e.contains("> 0"), "{e}");
        let e = err(&GOOD.replace(
            "kind = \"global\"",
            "kind = \"tumbling\", size = \"1 hour\"",
        ));
        assert!(
            e.contains("\"1 hour\"") && e.contains("ms, s, m, h or d"),
            "{e}"
        );
        let e = err(&GOOD.replace(
            "kind = \"global\"",
            "kind = \"sliding\", size = \"1h\", slide = \"0m\"",
        ));
        assert!(e.contains("window.slide"), "{e}");
    }

    #[test]
    fn window_lengths_pane_counts_and_mc_samples_are_bounded() {
        let g = "{ kind = \"grr\", epsilon = 1.0, domain = 4 }";
        let ok = |extra: &str| Config::from_toml_str(&gof_stream(g, extra), "t");
        // Each of these once validated, then panicked or exhausted memory at run time.
        let huge = gof_err(
            g,
            "window = { kind = \"tumbling\", size = \"18446744073709551615ms\" }",
        );
        assert!(
            huge.contains("window.size") && huge.contains("3650d"),
            "{huge}"
        );
        let far = gof_err(
            g,
            "window = { kind = \"sliding\", size = \"100000000000d\", slide = \"1ms\" }",
        );
        assert!(
            far.contains("window.size") && far.contains("3650d"),
            "{far}"
        );
        let fine = gof_err(
            g,
            "window = { kind = \"sliding\", size = \"1h\", slide = \"1ms\" }",
        );
        assert!(
            fine.contains("3600000 panes") && fine.contains("at most 10000 panes"),
            "{fine}"
        );
        let mc = gof_err(g, "calibration = \"monte_carlo\"\nmc_samples = 4294967295");
        assert!(
            mc.contains("mc_samples = 4294967295") && mc.contains("at most 1000000"),
            "{mc}"
        );
        // The bounds themselves are accepted.
        assert!(ok("window = { kind = \"sliding\", size = \"10000s\", slide = \"1s\" }").is_ok());
        assert!(ok("window = { kind = \"tumbling\", size = \"3650d\" }").is_ok());
        assert!(ok("calibration = \"monte_carlo\"\nmc_samples = 1000000").is_ok());
    }

    #[test]
    fn global_and_cumulative_windows_reject_a_size_or_slide() {
        for kind in ["global", "cumulative"] {
            let e = config(
                PARQUET,
                GRR,
                &format!("{{ kind = \"{kind}\", size = \"1h\" }}"),
            )
            .unwrap_err();
            assert!(
                e.contains(&format!("window kind \"{kind}\" takes no `size` key")),
                "{e}"
            );
            let e = config(
                PARQUET,
                GRR,
                &format!("{{ kind = \"{kind}\", slide = \"1h\" }}"),
            )
            .unwrap_err();
            assert!(e.contains("takes no `slide` key"), "{e}");
            let e = config(
                PARQUET,
                GRR,
                &format!("{{ kind = \"{kind}\", colour = 1 }}"),
            )
            .unwrap_err();
            assert!(e.contains("colour"), "{e}");
            config(PARQUET, GRR, &format!("{{ kind = \"{kind}\" }}")).unwrap();
        }
        let e = config(
            PARQUET,
            GRR,
            "{ kind = \"tumbling\", size = \"1h\", slide = \"1m\" }",
        )
        .unwrap_err();
        assert!(e.contains("takes no `slide` key"), "{e}");
        let e = config(PARQUET, GRR, "{ kind = \"sliding\", size = \"1h\" }").unwrap_err();
        assert!(e.contains("needs `slide`"), "{e}");
        let e = config(PARQUET, GRR, "{ kind = \"tumbling\" }").unwrap_err();
        assert!(e.contains("needs `size`"), "{e}");
    }
}
