use std::collections::HashSet;

use crate::error::ConfigError;
use crate::model::{Config, MechanismConfig, SimulatorConfig, SinkConfig, SourceConfig};
use crate::null::NullSpec;
use crate::test_spec::{Calibration, TestKind, TestMethod, TestSpec};
use crate::window::WindowConfig;

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
                SourceConfig::Parquet { paths, .. } if paths.is_empty() => {
                    return Err(ConfigError::invalid(
                        format!("{at}.source.paths"),
                        "[]",
                        "at least one path or glob",
                    ))
                }
                SourceConfig::Parquet {
                    rate: Some(rate), ..
                } if !(rate.is_finite() && *rate > 0.0) => {
                    return Err(ConfigError::invalid(
                        format!("{at}.source.rate"),
                        rate,
                        "rows per second, a finite number > 0",
                    ))
                }
                SourceConfig::Parquet { .. } => {}
                SourceConfig::Kafka(k) => {
                    validate_kafka(&format!("{at}.source"), k)?;
                    if let Some(so) = &k.scale_out {
                        validate_scale_out(&format!("{at}.source.scale_out"), k, so, stream)?;
                    }
                    if k.event_time == crate::EventTime::None {
                        if let Some(test) = stream.tests.iter().find(|t| {
                            matches!(
                                t.window,
                                WindowConfig::Tumbling { .. } | WindowConfig::Sliding { .. }
                            )
                        }) {
                            return Err(ConfigError::invalid(
                                format!("{at}.source.event_time"),
                                "\"none\"",
                                format!(
                                    "\"auto\", \"payload\" or \"kafka\": test {:?} has a \
                                     time-bounded window, which needs event time (without it \
                                     use a global or cumulative window)",
                                    test.name
                                ),
                            ));
                        }
                    }
                }
                SourceConfig::Simulator(sim) => validate_simulator(
                    &format!("{at}.source"),
                    sim,
                    stream.mechanism.domain() as usize,
                )?,
            }
            if stream.max_batch_rows == 0 {
                return Err(ConfigError::invalid(
                    format!("{at}.max_batch_rows"),
                    0,
                    "at least 1 row",
                ));
            }
            if !(1..=MAX_GROUPS).contains(&stream.max_groups) {
                return Err(ConfigError::invalid(
                    format!("{at}.max_groups"),
                    stream.max_groups,
                    format!(
                        "between 1 and {MAX_GROUPS}: every group holds a sketch in every pane, \
                         so more groups than this cannot be tested within memory"
                    ),
                ));
            }
            if stream.max_batch_delay.millis() == 0 {
                return Err(ConfigError::invalid(
                    format!("{at}.max_batch_delay"),
                    stream.max_batch_delay,
                    "a duration > 0, e.g. \"100ms\"",
                ));
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
            let curator = stream.has_private_tests();
            match stream.budget_epsilon {
                Some(b) if !(b.is_finite() && b > 0.0) => {
                    return Err(ConfigError::invalid(
                        format!("{at}.budget_epsilon"),
                        compact(b),
                        "a finite total ε > 0",
                    ))
                }
                None if curator => return Err(ConfigError::invalid(
                    format!("{at}.budget_epsilon"),
                    "(missing)",
                    "a total privacy budget: this stream has private (uniformity/identity) tests",
                )),
                _ => {}
            }
            validate_pane_count(&at, stream)?;
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
                validate_kind_keys(&tat, test, d, &stream.columns.report)?;
                validate_window(&format!("{tat}.window"), &test.window)?;
                validate_looks(&format!("{tat}.window.looks"), test)?;
                let method = match test.method {
                    Some(method) => {
                        check_method_applies(&tat, method, test.kind(), &stream.mechanism)?;
                        method
                    }
                    None => match TestMethod::applicable(test.kind(), &stream.mechanism).first() {
                        Some(m) => *m,
                        None => {
                            return Err(ConfigError::invalid(
                                format!("{tat}.kind"),
                                format!("{:?}", test.kind()),
                                format!(
                                    "a test kind that a {} stream supports",
                                    stream.mechanism.kind()
                                ),
                            ))
                        }
                    },
                };
                if test.sequential && !supports_sequential(test.kind(), &stream.mechanism) {
                    return Err(ConfigError::invalid(
                        format!("{tat}.sequential"),
                        true,
                        format!(
                            "false: a sequential (anytime-valid) {:?} test is not offered on a {} stream; \
                             sequential mode covers gof on every mechanism, independence on grr and \
                             bitflip, and two_sample on grr, matrix, raw and bitflip",
                            test.kind(),
                            stream.mechanism.kind()
                        ),
                    ));
                }
                if test.calibration == Calibration::MonteCarlo && test.kind() != TestKind::Gof {
                    return Err(ConfigError::invalid(
                        format!("{tat}.calibration"),
                        "\"monte_carlo\"",
                        "\"asymptotic\": Monte Carlo calibration is offered for gof tests (SheffetQ always simulates its null)",
                    ));
                }
                let needs_mc = test.calibration == Calibration::MonteCarlo
                    || method == TestMethod::SheffetQ
                    || matches!(stream.mechanism, MechanismConfig::Laplace { .. });
                if test.mc_samples > MAX_MC_SAMPLES {
                    return Err(ConfigError::invalid(
                        format!("{tat}.mc_samples"),
                        test.mc_samples,
                        format!(
                            "at most {MAX_MC_SAMPLES}: every sample is a simulated sketch of the \
                             domain's size, so a larger count runs for minutes and holds gigabytes"
                        ),
                    ));
                }
                if needs_mc && f64::from(test.mc_samples) * test.alpha <= 1.0 {
                    return Err(ConfigError::invalid(
                        format!("{tat}.mc_samples"),
                        test.mc_samples,
                        format!(
                            "more than 1/alpha = {} simulated null samples",
                            1.0 / test.alpha
                        ),
                    ));
                }
                match (method, test.distance) {
                    (TestMethod::SheffetTV | TestMethod::SheffetTVIndependence, None) => {
                        return Err(ConfigError::invalid(
                            format!("{tat}.distance"),
                            "(missing)",
                            "SheffetTV needs a distance parameter in (0, 2]",
                        ))
                    }
                    (TestMethod::SheffetTV | TestMethod::SheffetTVIndependence, Some(x))
                        if !(x > 0.0 && x <= 2.0) =>
                    {
                        return Err(ConfigError::invalid(
                            format!("{tat}.distance"),
                            x,
                            "a total-variation distance parameter in (0, 2]",
                        ))
                    }
                    (TestMethod::SheffetTV | TestMethod::SheffetTVIndependence, Some(_))
                    | (_, None) => {}
                    (_, Some(x)) => {
                        return Err(ConfigError::invalid(
                            format!("{tat}.distance"),
                            x,
                            "only SheffetTV and SheffetTVIndependence take a distance",
                        ))
                    }
                }
            }
        }
        validate_serve(self)?;
        crate::topic_names::validate_topic_names(self)?;
        if self.max_state_memory.is_some_and(|m| m.as_u64() == 0) {
            return Err(ConfigError::invalid(
                "max_state_memory",
                "0 B",
                "a size > 0, e.g. \"8 GiB\"",
            ));
        }
        Ok(())
    }
}

/// The longest window or slide: ten years. Event times are i64 milliseconds; this keeps
/// every window bound and pane index far from overflow.
pub const MAX_WINDOW_MS: u64 = 3650 * 86_400_000;
/// The most panes one window may span. Each pane holds a sketch per group, so a window's
/// memory grows with its pane count (a 1h window sliding by 1ms would need 3.6 million).
pub const MAX_PANES_PER_WINDOW: u64 = 10_000;
/// The most simulated null sketches a Monte Carlo test may draw per evaluation.
pub const MAX_MC_SAMPLES: u32 = 1_000_000;
/// The largest `max_groups`.
pub const MAX_GROUPS: usize = 10_000_000;

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Panes are as wide as the gcd of every window size and slide of the stream, so one test's
/// short slide multiplies the panes of every other test's window.
fn validate_pane_count(at: &str, stream: &crate::StreamConfig) -> Result<(), ConfigError> {
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

fn validate_looks(key: &str, test: &crate::TestConfig) -> Result<(), ConfigError> {
    let Some(looks) = test.looks else {
        return Ok(());
    };
    if looks.millis() == 0 {
        return Err(ConfigError::invalid(
            key,
            looks,
            "a duration > 0, e.g. \"1m\"",
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

/// The (kind, mechanism) pairs that have an e-process (engine `sequential` module).
fn supports_sequential(kind: TestKind, mechanism: &MechanismConfig) -> bool {
    match kind {
        TestKind::Gof => true,
        TestKind::Independence => matches!(
            mechanism,
            MechanismConfig::Grr { .. } | MechanismConfig::Bitflip { .. }
        ),
        TestKind::TwoSample => matches!(
            mechanism,
            MechanismConfig::Grr { .. }
                | MechanismConfig::Matrix { .. }
                | MechanismConfig::Raw { .. }
                | MechanismConfig::Bitflip { .. }
        ),
        TestKind::Uniformity | TestKind::Identity => false,
    }
}

fn validate_window(key: &str, window: &WindowConfig) -> Result<(), ConfigError> {
    let too_long = |name: &str, d: crate::DurationMs| {
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

fn validate_simulator(key: &str, sim: &SimulatorConfig, d: usize) -> Result<(), ConfigError> {
    if !(sim.rate.is_finite() && sim.rate > 0.0 && sim.rate <= 1e8) {
        return Err(ConfigError::invalid(
            format!("{key}.rate"),
            sim.rate,
            "reports per second, a finite number in (0, 1e8]",
        ));
    }
    validate_null(&format!("{key}.p"), &sim.p, d)?;
    match (&sim.switch_at, &sim.switch_p) {
        (Some(_), Some(p)) => validate_null(&format!("{key}.switch_p"), p, d)?,
        (None, None) => {}
        (Some(at), None) => {
            return Err(ConfigError::invalid(
                format!("{key}.switch_p"),
                format!("(missing, with switch_at = {at})"),
                "switch_at and switch_p go together",
            ))
        }
        (None, Some(_)) => {
            return Err(ConfigError::invalid(
                format!("{key}.switch_at"),
                "(missing, with switch_p set)",
                "switch_at and switch_p go together",
            ))
        }
    }
    if sim.groups.iter().any(|g| g.is_empty()) {
        return Err(ConfigError::invalid(
            format!("{key}.groups"),
            format!("{:?}", sim.groups),
            "non-empty group labels",
        ));
    }
    Ok(())
}

fn validate_kafka(key: &str, k: &crate::KafkaConfig) -> Result<(), ConfigError> {
    if k.brokers.trim().is_empty() {
        return Err(ConfigError::invalid(
            format!("{key}.brokers"),
            "\"\"",
            "a bootstrap list such as \"127.0.0.1:9092\"",
        ));
    }
    if k.topics.is_empty() || k.topics.iter().any(|t| t.trim().is_empty()) {
        return Err(ConfigError::invalid(
            format!("{key}.topics"),
            format!("{:?}", k.topics),
            "one or more non-empty topic names",
        ));
    }
    if k.group_id.trim().is_empty() {
        return Err(ConfigError::invalid(
            format!("{key}.group_id"),
            "\"\"",
            "a consumer group name",
        ));
    }
    if let Some(t) = &k.dead_letter_topic {
        if t.trim().is_empty() || k.topics.contains(t) {
            return Err(ConfigError::invalid(
                format!("{key}.dead_letter_topic"),
                format!("{t:?}"),
                "a non-empty topic name that is not one of `topics`",
            ));
        }
    }
    for reserved in ["enable.auto.commit", "bootstrap.servers", "group.id"] {
        if k.options.contains_key(reserved) || k.options_from_env.contains_key(reserved) {
            return Err(ConfigError::invalid(
                format!("{key}.options.\"{reserved}\""),
                "(set)",
                "set by ldpstream itself (brokers, group_id; auto-commit stays off)",
            ));
        }
    }
    Ok(())
}

/// What the scale-out mode does not carry across instances is refused up front, naming
/// the key, rather than giving results that differ from one instance's.
fn validate_scale_out(
    key: &str,
    k: &crate::KafkaConfig,
    so: &crate::ScaleOutConfig,
    stream: &crate::StreamConfig,
) -> Result<(), ConfigError> {
    if so.results_topic.trim().is_empty() || k.topics.contains(&so.results_topic) {
        return Err(ConfigError::invalid(
            format!("{key}.results_topic"),
            format!("{:?}", so.results_topic),
            "a non-empty topic name that is not one of `topics`",
        ));
    }
    if k.topics.len() != 1 {
        return Err(ConfigError::invalid(
            key.to_string(),
            format!("topics = {:?}", k.topics),
            "exactly one input topic (the changelog has one partition per input partition)",
        ));
    }
    if !(10..=3_600_000).contains(&so.commit_interval.millis()) {
        return Err(ConfigError::invalid(
            format!("{key}.commit_interval"),
            so.commit_interval.to_string(),
            "between 10ms and 1h",
        ));
    }
    if let Some(t) = stream.tests.iter().find(|t| t.spec.curator().is_some()) {
        return Err(ConfigError::invalid(
            key.to_string(),
            format!("test {:?}", t.name),
            "no curator-model (private) tests: their privacy ledger is kept on one machine",
        ));
    }
    if let Some(t) = stream.tests.iter().find(|t| t.looks.is_some()) {
        return Err(ConfigError::invalid(
            key.to_string(),
            format!("test {:?} with looks", t.name),
            "tests without `looks` (scale-out emits each window's final record; event-time looks are single-instance)",
        ));
    }
    Ok(())
}

fn validate_serve(config: &Config) -> Result<(), ConfigError> {
    let serve = &config.serve;
    if serve.listen.parse::<std::net::SocketAddr>().is_err() {
        return Err(ConfigError::invalid(
            "serve.listen",
            format!("{:?}", serve.listen),
            "an IP address and port, e.g. \"127.0.0.1:9898\"",
        ));
    }
    if serve.snapshot_interval.millis() == 0 {
        return Err(ConfigError::invalid(
            "serve.snapshot_interval",
            serve.snapshot_interval,
            "a duration > 0, e.g. \"5s\"",
        ));
    }
    if serve.checkpoint_interval.millis() == 0 {
        return Err(ConfigError::invalid(
            "serve.checkpoint_interval",
            serve.checkpoint_interval,
            "a duration > 0, e.g. \"10s\"",
        ));
    }
    if let Some(var) = &serve.auth_token_env {
        if var.trim().is_empty() || var.contains('=') || var.contains('\0') {
            return Err(ConfigError::invalid(
                "serve.auth_token_env",
                format!("{var:?}"),
                "the name of an environment variable holding the token (not the token)",
            ));
        }
    }
    if let Some(tls) = &serve.tls {
        for (key, path) in [("serve.tls.cert", &tls.cert), ("serve.tls.key", &tls.key)] {
            if path.trim().is_empty() {
                return Err(ConfigError::invalid(
                    key,
                    "\"\"",
                    "the path of a PEM file (or leave serve.tls out for plain HTTP)",
                ));
            }
        }
    }
    if serve.checkpoint_dir.as_deref() == Some("") {
        return Err(ConfigError::invalid(
            "serve.checkpoint_dir",
            "\"\"",
            "a directory path (or leave the key out for the default beside the config file)",
        ));
    }
    if let (false, Some(dir)) = (serve.durable_state, &serve.checkpoint_dir) {
        return Err(ConfigError::invalid(
            "serve.durable_state",
            "false",
            format!(
                "contradicts serve.checkpoint_dir = {dir:?}: keep the directory for durable \
                 state, or drop it to keep the state only in memory"
            ),
        ));
    }
    for (i, sink) in serve.sinks.iter().enumerate() {
        let empty = |key: &str, what: &str| {
            Err(ConfigError::invalid(
                format!("serve.sink[{i}].{key}"),
                "\"\"",
                what,
            ))
        };
        match sink {
            SinkConfig::Jsonl { path } if path.is_empty() => return empty("path", "a file path"),
            SinkConfig::Kafka { brokers, .. } if brokers.is_empty() => {
                return empty("brokers", "bootstrap servers, e.g. \"broker1:9092\"")
            }
            SinkConfig::Kafka { topic, .. } if topic.is_empty() => {
                return empty("topic", "a topic name")
            }
            SinkConfig::Parquet { dir, .. } if dir.is_empty() => {
                return empty("dir", "a directory path")
            }
            SinkConfig::Parquet { roll_interval, .. } if roll_interval.millis() == 0 => {
                return Err(ConfigError::invalid(
                    format!("serve.sink[{i}].roll_interval"),
                    roll_interval,
                    "a duration > 0, e.g. \"10m\"",
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Largest domain any mechanism accepts: sketches are dense tables of this size.
pub const MAX_DOMAIN: u32 = 1 << 24;
/// Largest cohort count.
pub const MAX_COHORTS: u32 = 1 << 20;
/// Largest cohorts × domain² of a cohort mechanism (the engine's `MAX_GRAM_WORK`).
pub const MAX_COHORT_GRAM_WORK: f64 = 4.0e9;
/// How far a channel column's sum may be from 1.
pub const CHANNEL_SUM_TOLERANCE: f64 = 1e-9;
/// Smallest local ε: below it a test needs more than 1/ε² = 10¹⁸ reports to see anything,
/// beyond what a sketch's 64-bit counters hold.
pub const MIN_EPSILON: f64 = 1e-9;
/// Largest local ε. The randomizers draw their lie with probability about e^{−ε} exactly,
/// and the engine computes every probability from e^{−ε}; both need e^{−ε} to be a normal
/// double, and e^{−708} is the last one.
pub const MAX_EPSILON: f64 = 700.0;
/// Smallest ε of Laplace noise: one coordinate of Lap(2/ε) must stay far inside the ±2³¹ a
/// sum sketch accepts (at ε = 1e-7 it leaves it with probability e^{−107}).
pub const MIN_LAPLACE_EPSILON: f64 = 1e-7;

/// A mechanism's ε: finite, positive, and within the range where the randomizers stay
/// exactly ε-LDP and the statistics stay computable. The message says which side failed
/// and why.
/// The smallest ρ of `gauss`: its noise N(0, 1/ρ) then has σ ≈ 3.2e7, so a coordinate
/// beyond the ±2³¹ a sum sketch accepts is a 68σ event and no honest report is rejected.
pub const MIN_RHO: f64 = 1e-15;
/// The largest ρ of `gauss`: ε²/2 at the largest ε, the same "this is no longer a privacy
/// parameter" line the other mechanisms draw.
pub const MAX_RHO: f64 = MAX_EPSILON * MAX_EPSILON / 2.0;

fn local_rho(key: String, value: f64) -> Result<(), ConfigError> {
    if !(value.is_finite() && (MIN_RHO..=MAX_RHO).contains(&value)) {
        return Err(ConfigError::invalid(
            key,
            format!("{value:e}"),
            format!(
                "a number from {MIN_RHO:e} to {MAX_RHO}: below it the noise N(0, 1/ρ) would \
                 overflow the ±2^31 a sum sketch accepts per coordinate, and above it ρ-zCDP \
                 is weaker than ε = {MAX_EPSILON}"
            ),
        ));
    }
    Ok(())
}

fn local_epsilon(key: String, value: f64, laplace: bool) -> Result<(), ConfigError> {
    let min = if laplace {
        MIN_LAPLACE_EPSILON
    } else {
        MIN_EPSILON
    };
    let shown = compact(value);
    if !(value.is_finite() && value > 0.0) {
        return Err(ConfigError::invalid(
            key,
            shown,
            format!("a finite number > 0, from {min:e} to {MAX_EPSILON}"),
        ));
    }
    if value > MAX_EPSILON {
        return Err(ConfigError::invalid(
            key,
            shown,
            format!(
                "at most {MAX_EPSILON}: above it the lie probability e^-ε leaves the normal \
                 doubles (e^-708 is the last), so it can no longer be drawn exactly and the \
                 reports would not be ε-LDP"
            ),
        ));
    }
    if value < min {
        let why = if laplace {
            "Lap(2/ε) noise would overflow the ±2^31 a sum sketch accepts per coordinate"
        } else {
            "a test would need more than 1/ε² = 10^18 reports to detect anything"
        };
        return Err(ConfigError::invalid(
            key,
            shown,
            format!("at least {min:e}: below it {why}"),
        ));
    }
    Ok(())
}

fn positive(key: String, value: f64) -> Result<(), ConfigError> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(ConfigError::invalid(
            key,
            compact(value),
            "a finite number > 0",
        ))
    }
}

/// A number as a person would write it: `f64`'s `Display` spells 1e308 with 309 digits.
pub fn compact(value: f64) -> String {
    let plain = value.to_string();
    if plain.len() > 12 {
        format!("{value:e}")
    } else {
        plain
    }
}

impl MechanismConfig {
    /// Checks the mechanism's parameters; errors name keys under `prefix` (e.g.
    /// `stream[0].mechanism`, or `--matrix` on the command line).
    pub fn validate(&self, prefix: &str) -> Result<(), ConfigError> {
        validate_mechanism_at(prefix, self)
    }
}

fn validate_mechanism(at: &str, mechanism: &MechanismConfig) -> Result<(), ConfigError> {
    validate_mechanism_at(&format!("{at}.mechanism"), mechanism)
}

fn validate_mechanism_at(m: &str, mechanism: &MechanismConfig) -> Result<(), ConfigError> {
    let m = m.to_string();
    match mechanism {
        MechanismConfig::Laplace {
            epsilon, max_abs, ..
        } => {
            local_epsilon(format!("{m}.epsilon"), *epsilon, true)?;
            if let Some(v) = max_abs {
                positive(format!("{m}.max_abs"), *v)?;
            }
        }
        MechanismConfig::Grr { epsilon, .. }
        | MechanismConfig::Bitflip { epsilon, .. }
        | MechanismConfig::Hadamard { epsilon, .. }
        | MechanismConfig::Cohort { epsilon, .. } => {
            local_epsilon(format!("{m}.epsilon"), *epsilon, false)?
        }
        MechanismConfig::Gauss { rho, max_abs, .. } => {
            local_rho(format!("{m}.rho"), *rho)?;
            if let Some(v) = max_abs {
                positive(format!("{m}.max_abs"), *v)?;
            }
        }
        MechanismConfig::Matrix { matrix } => validate_channel(&m, matrix)?,
        MechanismConfig::Raw { .. } => {}
    }
    if let MechanismConfig::Cohort {
        cohorts, domain, ..
    } = mechanism
    {
        if !(*domain..=MAX_COHORTS).contains(cohorts) {
            return Err(ConfigError::invalid(
                format!("{m}.cohorts"),
                cohorts,
                format!("an integer from the domain ({domain}) to {MAX_COHORTS}, so the family identifies the distribution"),
            ));
        }
        // Checked here as well as in the engine so that it is a config error (exit 2), not
        // a failure at start-up.
        let work = f64::from(*cohorts) * f64::from(*domain) * f64::from(*domain);
        if work > MAX_COHORT_GRAM_WORK {
            return Err(ConfigError::invalid(
                format!("{m}.cohorts"),
                cohorts,
                format!(
                    "cohorts × domain² at most {MAX_COHORT_GRAM_WORK:e} (here {work:e}): the \
                     engine inverts the family's d×d Gram matrix; use hadamard for large domains"
                ),
            ));
        }
    }
    if !matches!(mechanism, MechanismConfig::Matrix { .. }) {
        let domain = mechanism.domain();
        if !(2..=MAX_DOMAIN).contains(&domain) {
            return Err(ConfigError::invalid(
                format!("{m}.domain"),
                domain,
                format!("an integer from 2 to {MAX_DOMAIN}"),
            ));
        }
    }
    Ok(())
}

/// A channel must be a rectangular, column-stochastic |S|×d matrix with d ≥ 2.
fn validate_channel(m: &str, matrix: &[Vec<f64>]) -> Result<(), ConfigError> {
    let key = format!("{m}.matrix");
    let d = matrix.first().map_or(0, Vec::len);
    if matrix.is_empty() || d < 2 {
        return Err(ConfigError::invalid(
            key,
            format!("a {}x{d} matrix", matrix.len()),
            "at least one signal row and at least 2 type columns (matrix[s][x] = P(s | x))",
        ));
    }
    if let Some((s, row)) = matrix.iter().enumerate().find(|(_, r)| r.len() != d) {
        return Err(ConfigError::invalid(
            format!("{key}[{s}]"),
            format!("a row of {} entries", row.len()),
            format!("every row has {d} entries, like row 0"),
        ));
    }
    for x in 0..d {
        if let Some((s, v)) = matrix
            .iter()
            .enumerate()
            .map(|(s, r)| (s, r[x]))
            .find(|(_, v)| !(v.is_finite() && *v >= 0.0))
        {
            return Err(ConfigError::invalid(
                format!("{key}[{s}][{x}]"),
                v,
                format!("column {x}: every entry is a probability (finite, >= 0)"),
            ));
        }
        let sum: f64 = matrix.iter().map(|r| r[x]).sum();
        if (sum - 1.0).abs() > CHANNEL_SUM_TOLERANCE {
            return Err(ConfigError::invalid(
                key,
                format!("column {x} summing to {sum}"),
                format!(
                    "every column sums to 1 within {CHANNEL_SUM_TOLERANCE:e} (column-stochastic)"
                ),
            ));
        }
    }
    Ok(())
}

/// The kind-specific values, against the stream they run on. Which keys a kind takes was
/// settled at parse time ([`TestSpec`]); here only their values are checked.
fn validate_kind_keys(
    at: &str,
    test: &crate::TestConfig,
    d: usize,
    report: &str,
) -> Result<(), ConfigError> {
    if let Some(null) = test.spec.null() {
        validate_null(&format!("{at}.null"), null, d)?;
    }
    match &test.spec {
        TestSpec::Gof { .. } => {}
        TestSpec::Independence { rows, cols } => {
            let (r, c) = (*rows, *cols);
            if r < 2 || c < 2 || (r as usize) * (c as usize) != d {
                return Err(ConfigError::invalid(
                    format!("{at}.rows"),
                    format!("{r} (cols = {c})"),
                    format!("rows >= 2 and cols >= 2 with rows × cols = the domain ({d})"),
                ));
            }
        }
        TestSpec::TwoSample { by, a, b } => {
            if a == b {
                return Err(ConfigError::invalid(
                    format!("{at}.b"),
                    format!("{b:?}"),
                    "a value different from `a`",
                ));
            }
            if by == report {
                return Err(ConfigError::invalid(
                    format!("{at}.by"),
                    format!("{report:?}"),
                    "a label column, not the report column",
                ));
            }
        }
        TestSpec::Uniformity(curator) | TestSpec::Identity { curator, .. } => {
            if !(curator.epsilon.is_finite() && curator.epsilon > 0.0) {
                return Err(ConfigError::invalid(
                    format!("{at}.epsilon"),
                    curator.epsilon,
                    "the finite ε > 0 each release spends",
                ));
            }
            if !(curator.epsilon_split > 0.0 && curator.epsilon_split < 1.0) {
                return Err(ConfigError::invalid(
                    format!("{at}.epsilon_split"),
                    curator.epsilon_split,
                    "a share strictly between 0 and 1",
                ));
            }
            if !(curator.delta > 0.0 && curator.delta <= 0.5) {
                return Err(ConfigError::invalid(
                    format!("{at}.delta"),
                    curator.delta,
                    "a flip probability in (0, 0.5]",
                ));
            }
            if test.method == Some(TestMethod::SubsampleAndAggregate)
                && curator.block_size.is_none_or(|b| b < 1)
            {
                return Err(ConfigError::invalid(
                    format!("{at}.block_size"),
                    curator
                        .block_size
                        .map_or("(missing)".to_string(), |b| b.to_string()),
                    "the number of consecutive reports per block (>= 1)",
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
    let allowed = TestMethod::applicable(kind, mechanism);
    if allowed.contains(&method) {
        return Ok(());
    }
    let names: Vec<&str> = allowed.iter().map(TestMethod::name).collect();
    Err(ConfigError::invalid(
        format!("{at}.method"),
        method.name(),
        format!(
            "one of {} for a {kind:?} test on a {} stream",
            names.join(", "),
            mechanism.kind()
        ),
    ))
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
    fn sequential_defaults_off_and_is_checked_per_kind_and_mechanism() {
        let c = Config::from_toml_str(GOOD, "test.toml").unwrap();
        assert!(!c.streams[0].tests[0].sequential);
        let on = GOOD.replace("alpha = 0.05", "alpha = 0.05\nsequential = true");
        let c = Config::from_toml_str(&on, "test.toml").unwrap();
        assert!(c.streams[0].tests[0].sequential);
        let gauss_ind = on
            .replace(
                "{ kind = \"grr\", epsilon = 1.0, domain = 4 }",
                "{ kind = \"gauss\", rho = 1.0, domain = 4 }",
            )
            .replace(
                "kind = \"gof\"\nnull = \"uniform\"",
                "kind = \"independence\"\nrows = 2\ncols = 2",
            );
        let e = err(&gauss_ind);
        assert!(e.contains("test[0] (\"uniform_gof\").sequential"), "{e}");
        assert!(e.contains("gauss stream"), "{e}");
        // The same independence test without sequential mode is fine.
        Config::from_toml_str(&gauss_ind.replace("\nsequential = true", ""), "t").unwrap();
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

    /// The bounds on ε, with the reason in the message; the bounds themselves pass.
    #[test]
    fn bounds_rho_and_says_why() {
        for bad in ["1e-16", "245001.0", "1e308", "0.0", "-1.0"] {
            let e = err(&GOOD.replace(
                "mechanism = { kind = \"grr\", epsilon = 1.0, domain = 4 }",
                &format!("mechanism = {{ kind = \"gauss\", rho = {bad}, domain = 4 }}"),
            ));
            assert!(
                e.contains("mechanism.rho") && e.contains("±2^31"),
                "{bad}: {e}"
            );
            assert!(e.len() < 400, "the value is printed compactly: {e}");
        }
        for good in ["1e-15", "245000.0", "0.5"] {
            let text = GOOD.replace(
                "mechanism = { kind = \"grr\", epsilon = 1.0, domain = 4 }",
                &format!("mechanism = {{ kind = \"gauss\", rho = {good}, domain = 4 }}"),
            );
            assert!(Config::from_toml_str(&text, "t").is_ok(), "{good}");
        }
    }

    #[test]
    fn bounds_epsilon_and_says_why() {
        let e = err(&GOOD.replace("epsilon = 1.0", "epsilon = 701.0"));
        assert!(e.contains("at most 700") && e.contains("ε-LDP"), "{e}");
        let e = err(&GOOD.replace("epsilon = 1.0", "epsilon = 1e-10"));
        assert!(
            e.contains("at least 1e-9") && e.contains("10^18 reports"),
            "{e}"
        );
        for ok in ["1e-9", "700.0", "60.0"] {
            Config::from_toml_str(
                &GOOD.replace("epsilon = 1.0", &format!("epsilon = {ok}")),
                "t",
            )
            .unwrap();
        }
        let laplace = GOOD.replace("kind = \"grr\"", "kind = \"laplace\"");
        let e = err(&laplace.replace("epsilon = 1.0", "epsilon = 1e-8"));
        assert!(e.contains("at least 1e-7") && e.contains("2^31"), "{e}");
        Config::from_toml_str(&laplace.replace("epsilon = 1.0", "epsilon = 1e-7"), "t").unwrap();
    }

    #[test]
    fn rejects_small_domain() {
        let e = err(&GOOD.replace("domain = 4", "domain = 1"));
        assert!(e.contains("mechanism.domain = 1"), "{e}");
        assert!(e.contains("from 2 to"), "{e}");
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
    fn kafka_event_time_none_needs_unbounded_windows() {
        let kafka = |event_time: &str, window: &str| {
            format!(
                "[[stream]]\nname = \"k\"\nsource = {{ kind = \"kafka\", brokers = \"b:9092\", topics = [\"t\"], group_id = \"g\", event_time = \"{event_time}\" }}\nmechanism = {{ kind = \"grr\", epsilon = 1.0, domain = 4 }}\n[[stream.test]]\nname = \"w\"\nkind = \"gof\"\nnull = \"uniform\"\nwindow = {window}\n"
            )
        };
        let e = err(&kafka("none", "{ kind = \"tumbling\", size = \"1m\" }"));
        assert!(
            e.contains("source.event_time")
                && e.contains("\"w\"")
                && e.contains("global or cumulative"),
            "{e}"
        );
        for ok in ["auto", "payload", "kafka"] {
            Config::from_toml_str(&kafka(ok, "{ kind = \"tumbling\", size = \"1m\" }"), "t")
                .unwrap();
        }
        Config::from_toml_str(&kafka("none", "{ kind = \"cumulative\" }"), "t").unwrap();
        let e = err(&kafka("wall", "{ kind = \"global\" }"));
        assert!(e.contains("wall"), "{e}");
    }

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
        assert!(e.contains("window.looks") && e.contains("> 0"), "{e}");
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
            crate::WindowConfig::Sliding {
                size: crate::DurationMs(3_600_000),
                slide: crate::DurationMs(300_000)
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
    fn scale_out_refuses_what_it_cannot_carry_across_instances() {
        let so = |extra: &str, test: &str| {
            format!(
                "[[stream]]\nname = \"k\"\nsource = {{ kind = \"kafka\", brokers = \"b:9092\", topics = [\"in\"], group_id = \"g\", scale_out = {{ results_topic = \"out\"{extra} }} }}\nmechanism = {{ kind = \"raw\", domain = 4 }}\nbudget_epsilon = 1.0\n[[stream.test]]\nname = \"t\"\n{test}\n"
            )
        };
        let gof = "kind = \"gof\"\nnull = \"uniform\"";
        let c = Config::from_toml_str(&so("", gof), "t").unwrap();
        let crate::SourceConfig::Kafka(k) = &c.streams[0].source else {
            panic!("a Kafka source")
        };
        let scale_out = k.scale_out.as_ref().unwrap();
        assert_eq!(
            scale_out.commit_interval.millis(),
            1_000,
            "documented default"
        );
        let e = err(&so(", commit_interval = \"0ms\"", gof));
        assert!(e.contains("scale_out.commit_interval = \"0ms\""), "{e}");
        let e = err(&so(", commit_interval = \"2h\"", gof));
        assert!(e.contains("between 10ms and 1h"), "{e}");
        let e = err(&so("", gof).replace("results_topic = \"out\"", "results_topic = \"in\""));
        assert!(e.contains("results_topic"), "{e}");
        let e = err(&so("", gof).replace("topics = [\"in\"]", "topics = [\"in\", \"in2\"]"));
        assert!(e.contains("exactly one input topic"), "{e}");
        let e = err(&so("", "kind = \"uniformity\"\nepsilon = 1.0"));
        assert!(e.contains("curator-model") && e.contains("\"t\""), "{e}");
        let e = err(&so(
            "",
            "kind = \"gof\"\nnull = \"uniform\"\nsequential = true\nwindow = { kind = \"cumulative\", looks = \"1m\" }",
        ));
        assert!(e.contains("looks"), "{e}");
        let e = err(&so(", partitions = 3", gof));
        assert!(e.contains("partitions"), "{e}");
    }

    #[test]
    fn simulator_and_serve_keys_validate() {
        let sim = GOOD.replace(
            "source = { kind = \"parquet\", paths = [\"data/*.parquet\"] }",
            "source = { kind = \"simulator\", rate = 1000.0, switch_at = \"1m\", switch_p = [0.4, 0.2, 0.2, 0.2] }",
        );
        Config::from_toml_str(&sim, "t").unwrap();
        let e = err(&sim.replace("rate = 1000.0", "rate = -1.0"));
        assert!(e.contains("source.rate = -1"), "{e}");
        let e = err(&sim.replace("switch_p = [0.4, 0.2, 0.2, 0.2]", "switch_p = [0.5, 0.5]"));
        assert!(e.contains("source.switch_p"), "{e}");
        let e = err(&sim.replace(", switch_p = [0.4, 0.2, 0.2, 0.2]", ""));
        assert!(e.contains("switch_p") && e.contains("go together"), "{e}");
        let e = err(&format!("{sim}\n[serve]\nlisten = \"localhost\"\n"));
        assert!(e.contains("serve.listen = \"localhost\""), "{e}");
        let e = err(&format!("{sim}\n[serve]\nsnapshot_interval = \"0s\"\n"));
        assert!(e.contains("serve.snapshot_interval"), "{e}");
        let sinks = format!(
            "{sim}\n[serve]\nsink = [{{ kind = \"kafka\", brokers = \"b:9092\", topic = \"results\", options = {{ \"acks\" = \"all\" }} }}, {{ kind = \"parquet\", dir = \"out/pq\" }}]\n"
        );
        let c = Config::from_toml_str(&sinks, "t").unwrap();
        assert!(matches!(
            &c.serve.sinks[1],
            crate::SinkConfig::Parquet { roll_interval, .. } if roll_interval.millis() == 600_000
        ));
        let e = err(&sinks.replace("topic = \"results\"", "topic = \"\""));
        assert!(e.contains("serve.sink[0].topic"), "{e}");
        let e = err(&sinks.replace(
            "dir = \"out/pq\"",
            "dir = \"out/pq\", roll_interval = \"0s\"",
        ));
        assert!(e.contains("serve.sink[1].roll_interval"), "{e}");
        let e = err(&sinks.replace("dir = \"out/pq\"", "path = \"x\""));
        assert!(e.contains("path"), "{e}");
    }

    #[test]
    fn kafka_source_keys_validate() {
        let kafka = GOOD.replace(
            "source = { kind = \"parquet\", paths = [\"data/*.parquet\"] }",
            "source = { kind = \"kafka\", brokers = \"b:9092\", topics = [\"events\"], group_id = \"g\", dead_letter_topic = \"events-dlq\" }",
        );
        Config::from_toml_str(&kafka, "t").unwrap();
        let e = err(&kafka.replace("\"events-dlq\"", "\"events\""));
        assert!(e.contains("source.dead_letter_topic = \"events\""), "{e}");
        let e = err(&kafka.replace("group_id = \"g\"", "group_id = \"\""));
        assert!(e.contains("source.group_id"), "{e}");
        let e = err(&kafka.replace(
            "group_id = \"g\"",
            "group_id = \"g\", options = { \"enable.auto.commit\" = \"true\" }",
        ));
        assert!(e.contains("enable.auto.commit"), "{e}");
    }

    #[test]
    fn parse_errors_name_the_file() {
        match Config::from_toml_str("[[stream]\n", "bad.toml") {
            Err(ConfigError::Parse { origin, .. }) => assert_eq!(origin, "bad.toml"),
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[cfg(test)]
mod mechanism_tests {
    use crate::Config;

    #[test]
    fn window_lengths_pane_counts_and_mc_samples_are_bounded() {
        let g = "{ kind = \"grr\", epsilon = 1.0, domain = 4 }";
        let ok = |extra: &str| Config::from_toml_str(&stream(g, extra), "t");
        // Each of these once validated, then panicked or exhausted memory at run time.
        let huge = err(
            g,
            "window = { kind = \"tumbling\", size = \"18446744073709551615ms\" }",
        );
        assert!(
            huge.contains("window.size") && huge.contains("3650d"),
            "{huge}"
        );
        let far = err(
            g,
            "window = { kind = \"sliding\", size = \"100000000000d\", slide = \"1ms\" }",
        );
        assert!(
            far.contains("window.size") && far.contains("3650d"),
            "{far}"
        );
        let fine = err(
            g,
            "window = { kind = \"sliding\", size = \"1h\", slide = \"1ms\" }",
        );
        assert!(
            fine.contains("3600000 panes") && fine.contains("at most 10000 panes"),
            "{fine}"
        );
        let mc = err(g, "calibration = \"monte_carlo\"\nmc_samples = 4294967295");
        assert!(
            mc.contains("mc_samples = 4294967295") && mc.contains("at most 1000000"),
            "{mc}"
        );
        // The bounds themselves are accepted.
        assert!(ok("window = { kind = \"sliding\", size = \"10000s\", slide = \"1s\" }").is_ok());
        assert!(ok("window = { kind = \"tumbling\", size = \"3650d\" }").is_ok());
        assert!(ok("calibration = \"monte_carlo\"\nmc_samples = 1000000").is_ok());
    }

    fn stream(mechanism: &str, test: &str) -> String {
        format!(
            "[[stream]]\nname = \"s\"\nsource = {{ kind = \"parquet\", paths = [\"x\"] }}\nmechanism = {mechanism}\n[[stream.test]]\nname = \"t\"\nkind = \"gof\"\nnull = \"uniform\"\n{test}\n"
        )
    }

    fn err(mechanism: &str, test: &str) -> String {
        match Config::from_toml_str(&stream(mechanism, test), "t") {
            Ok(_) => panic!("should be rejected: {mechanism} {test}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn every_mechanism_parses() {
        for m in [
            "{ kind = \"grr\", epsilon = 1.0, domain = 3 }",
            "{ kind = \"bitflip\", epsilon = 1.0, domain = 3 }",
            "{ kind = \"gauss\", rho = 0.5, domain = 3 }",
            "{ kind = \"laplace\", epsilon = 1.0, domain = 3 }",
            "{ kind = \"hadamard\", epsilon = 1.0, domain = 3 }",
            "{ kind = \"cohort\", epsilon = 1.0, domain = 3, cohorts = 16, seed = 4 }",
            "{ kind = \"matrix\", matrix = [[0.5, 0.25, 0.25], [0.5, 0.75, 0.75]] }",
            "{ kind = \"raw\", domain = 3 }",
        ] {
            Config::from_toml_str(&stream(m, ""), "t").unwrap_or_else(|e| panic!("{m}: {e}"));
        }
    }

    #[test]
    fn bad_channels_name_the_column() {
        let e = err(
            "{ kind = \"matrix\", matrix = [[0.5, 0.2], [0.5, 0.7]] }",
            "",
        );
        assert!(e.contains("column 1 summing to 0.8999"), "{e}");
        let e = err(
            "{ kind = \"matrix\", matrix = [[1.5, 0.5], [-0.5, 0.5]] }",
            "",
        );
        assert!(
            e.contains("matrix[1][0] = -0.5") && e.contains("column 0"),
            "{e}"
        );
        let e = err("{ kind = \"matrix\", matrix = [[0.5, 0.5], [0.5]] }", "");
        assert!(e.contains("matrix[1]"), "{e}");
    }

    #[test]
    fn method_must_fit_mechanism() {
        let e = err(
            "{ kind = \"bitflip\", epsilon = 1.0, domain = 3 }",
            "method = \"LocalExpGOF\"",
        );
        assert!(
            e.contains("one of LocalBitFlipGOF") && e.contains("bitflip"),
            "{e}"
        );
    }

    #[test]
    fn tv_needs_a_distance_and_mc_needs_samples() {
        let h = "{ kind = \"hadamard\", epsilon = 1.0, domain = 3 }";
        let e = err(h, "method = \"SheffetTV\"");
        assert!(e.contains("distance = (missing)"), "{e}");
        let e = err(h, "method = \"SheffetTV\"\ndistance = 3.0");
        assert!(e.contains("distance = 3"), "{e}");
        let e = err(h, "calibration = \"monte_carlo\"\nmc_samples = 10");
        assert!(
            e.contains("mc_samples = 10") && e.contains("1/alpha = 20"),
            "{e}"
        );
        let e = err(
            "{ kind = \"laplace\", epsilon = 1.0, domain = 3 }",
            "mc_samples = 19",
        );
        assert!(e.contains("mc_samples = 19"), "{e}");
        let e = err(
            "{ kind = \"cohort\", epsilon = 1.0, domain = 3, cohorts = 0 }",
            "",
        );
        assert!(e.contains("cohorts = 0"), "{e}");
    }
}

#[cfg(test)]
mod kind_tests {
    use crate::Config;

    fn cfg(mechanism: &str, test: &str) -> Result<Config, String> {
        Config::from_toml_str(
            &format!("[[stream]]\nname = \"s\"\nsource = {{ kind = \"parquet\", paths = [\"x\"] }}\nmechanism = {mechanism}\n[[stream.test]]\nname = \"t\"\n{test}\n"),
            "t",
        )
        .map_err(|e| e.to_string())
    }

    const GRR6: &str = "{ kind = \"grr\", epsilon = 1.0, domain = 6 }";

    #[test]
    fn independence_needs_a_table_matching_the_domain() {
        cfg(GRR6, "kind = \"independence\"\nrows = 2\ncols = 3").unwrap();
        let e = cfg(GRR6, "kind = \"independence\"\nrows = 2\ncols = 2").unwrap_err();
        assert!(
            e.contains("rows = 2 (cols = 2)") && e.contains("domain (6)"),
            "{e}"
        );
        let e = cfg(GRR6, "kind = \"independence\"").unwrap_err();
        assert!(e.contains("rows = (missing)"), "{e}");
        let e = cfg(
            GRR6,
            "kind = \"independence\"\nrows = 2\ncols = 3\nnull = \"uniform\"",
        )
        .unwrap_err();
        assert!(e.contains("only gof and identity tests take `null`"), "{e}");
    }

    #[test]
    fn two_sample_needs_by_a_and_distinct_b() {
        cfg(
            GRR6,
            "kind = \"two_sample\"\nby = \"g\"\na = \"x\"\nb = \"y\"",
        )
        .unwrap();
        let e = cfg(GRR6, "kind = \"two_sample\"\nby = \"g\"\na = \"x\"").unwrap_err();
        assert!(e.contains(".b = (missing)"), "{e}");
        let e = cfg(
            GRR6,
            "kind = \"two_sample\"\nby = \"g\"\na = \"x\"\nb = \"x\"",
        )
        .unwrap_err();
        assert!(e.contains("different from `a`"), "{e}");
        let e = cfg(
            "{ kind = \"gauss\", rho = 1.0, domain = 4 }",
            "kind = \"two_sample\"\nby = \"g\"\na = \"x\"\nb = \"y\"",
        )
        .unwrap_err();
        assert!(e.contains("kind") && e.contains("gauss"), "{e}");
    }

    #[test]
    fn gof_still_needs_a_null() {
        let e = cfg(GRR6, "kind = \"gof\"").unwrap_err();
        assert!(e.contains("null = (missing)"), "{e}");
    }
}

#[cfg(test)]
mod issue_19_tests {
    use crate::Config;

    fn config(source: &str, mechanism: &str, window: &str) -> Result<Config, String> {
        Config::from_toml_str(
            &format!(
                "[[stream]]\nname = \"s\"\nsource = {source}\nmechanism = {mechanism}\n\
                 [[stream.test]]\nname = \"t\"\nkind = \"gof\"\nnull = \"uniform\"\nwindow = {window}\n"
            ),
            "t.toml",
        )
        .map_err(|e| e.to_string())
    }

    const PARQUET: &str = "{ kind = \"parquet\", paths = [\"x\"] }";
    const GRR: &str = "{ kind = \"grr\", epsilon = 1.0, domain = 4 }";

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

    /// `rate` on a Parquet source is the documented `serve` replay throttle, and validated.
    #[test]
    fn parquet_rate_is_validated() {
        let with_rate = |rate: &str| {
            config(
                &format!("{{ kind = \"parquet\", paths = [\"x\"], rate = {rate} }}"),
                GRR,
                "{ kind = \"global\" }",
            )
        };
        with_rate("1000.0").unwrap();
        let e = with_rate("0.0").unwrap_err();
        assert!(
            e.contains("source.rate = 0") && e.contains("rows per second"),
            "{e}"
        );
        let e = config(
            "{ kind = \"parquet\", paths = [\"x\"], speed = 2.0 }",
            GRR,
            "{ kind = \"global\" }",
        )
        .unwrap_err();
        assert!(e.contains("speed"), "{e}");
    }

    /// The engine refuses cohorts × d² above 4e9; the config says so first.
    #[test]
    fn cohort_gram_work_is_a_config_error() {
        let e = config(
            PARQUET,
            "{ kind = \"cohort\", epsilon = 1.0, domain = 1000, cohorts = 5000 }",
            "{ kind = \"global\" }",
        )
        .unwrap_err();
        assert!(
            e.contains("mechanism.cohorts = 5000") && e.contains("cohorts × domain² at most 4e9"),
            "{e}"
        );
        config(
            PARQUET,
            "{ kind = \"cohort\", epsilon = 1.0, domain = 1000, cohorts = 4000 }",
            "{ kind = \"global\" }",
        )
        .unwrap();
    }

    #[test]
    fn huge_epsilon_is_printed_compactly_under_its_own_key() {
        let e = config(
            PARQUET,
            "{ kind = \"grr\", epsilon = 1e308, domain = 4 }",
            "{ kind = \"global\" }",
        )
        .unwrap_err();
        assert!(e.contains("mechanism.epsilon = 1e308: at most 700"), "{e}");
        assert!(e.len() < 400, "{e}");
        let e = config(
            PARQUET,
            "{ kind = \"gauss\", rho = -1e300, domain = 4 }",
            "{ kind = \"global\" }",
        )
        .unwrap_err();
        assert!(e.contains("mechanism.rho = -1e300"), "{e}");
    }
}
