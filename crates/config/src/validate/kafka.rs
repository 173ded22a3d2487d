//! A Kafka source: its own keys, scale-out's restrictions, and event time.

use crate::error::ConfigError;
use crate::model::{
    Config, EventTime, KafkaConfig, MechanismConfig, MessageFormat, ScaleOutConfig, SourceConfig,
    StreamConfig,
};
use crate::toml_form::StreamTable;
use crate::window::WindowConfig;

/// A Kafka source under `key` (`stream[0] ("s").source`), with the stream it feeds.
pub(super) fn validate_kafka_source(
    key: &str,
    k: &KafkaConfig,
    stream: &StreamTable,
) -> Result<(), ConfigError> {
    validate_kafka(key, k)?;
    validate_binary_subset(key, k, &stream.mechanism)?;
    if let Some(so) = &k.scale_out {
        validate_scale_out(&format!("{key}.scale_out"), k, so, stream)?;
    }
    validate_event_time(key, k, stream)
}

/// The most items a binary subset message carries: its item count is a `u16`.
pub const MAX_BINARY_SUBSET_ITEMS: u32 = u16::MAX as u32;

/// A subset stream whose k a binary message cannot carry would reject every report as
/// `subset_wrong_size`: refused here, pointing at JSON.
fn validate_binary_subset(
    key: &str,
    k: &KafkaConfig,
    mechanism: &MechanismConfig,
) -> Result<(), ConfigError> {
    let MechanismConfig::Subset {
        epsilon,
        domain,
        k: size,
    } = mechanism
    else {
        return Ok(());
    };
    if k.format != MessageFormat::Binary {
        return Ok(());
    }
    // The default ⌈d/(e^ε+1)⌉ as the engine resolves it (`mechanism::subset_default_k`,
    // with a correctly rounded exp); the platform's exp here can only judge a k within one
    // rounding of the bound differently.
    let resolved = size.map_or_else(
        || (f64::from(*domain) / (epsilon.exp() + 1.0)).ceil(),
        f64::from,
    );
    if resolved <= f64::from(MAX_BINARY_SUBSET_ITEMS) {
        return Ok(());
    }
    Err(ConfigError::invalid(
        format!("{key}.format"),
        "\"binary\"",
        format!(
            "\"json\" (a binary subset report carries at most {MAX_BINARY_SUBSET_ITEMS} \
             items, a u16 count, and this stream's k is {resolved})"
        ),
    ))
}

/// Without event time every report falls in the global and cumulative windows only.
fn validate_event_time(
    key: &str,
    k: &KafkaConfig,
    stream: &StreamTable,
) -> Result<(), ConfigError> {
    if k.event_time != EventTime::None {
        return Ok(());
    }
    let bounded = stream.tests.iter().find(|t| {
        matches!(
            t.window,
            WindowConfig::Tumbling { .. } | WindowConfig::Sliding { .. }
        )
    });
    match bounded {
        Some(test) => Err(ConfigError::invalid(
            format!("{key}.event_time"),
            "\"none\"",
            format!(
                "\"auto\", \"payload\" or \"kafka\": test {:?} has a \
                 time-bounded window, which needs event time (without it \
                 use a global or cumulative window)",
                test.name
            ),
        )),
        None => Ok(()),
    }
}

fn validate_kafka(key: &str, k: &KafkaConfig) -> Result<(), ConfigError> {
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
    k: &KafkaConfig,
    so: &ScaleOutConfig,
    stream: &StreamTable,
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

/// `serve.checkpoint_dir` holds sketches, source positions and privacy ledgers of the
/// streams whose state is local; a scale-out stream's state is in Kafka. A config whose
/// every stream is scale-out has nothing to put there, and an operator who sets it would
/// believe the state is kept on the machine (and copy or back it up) when it is not.
pub(super) fn validate_scale_out_state(config: &Config) -> Result<(), ConfigError> {
    let scale_out =
        |s: &StreamConfig| matches!(&s.source, SourceConfig::Kafka(k) if k.scale_out.is_some());
    let Some(dir) = &config.serve.checkpoint_dir else {
        return Ok(());
    };
    if !config.streams.is_empty() && config.streams.iter().all(scale_out) {
        return Err(ConfigError::invalid(
            "serve.checkpoint_dir",
            format!("{dir:?}"),
            "no checkpoint_dir when every stream is scale_out: their state (sketches, offsets, \
             emitted windows) lives in Kafka's state topics, and nothing would be kept in this \
             directory; remove the key",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{err, GOOD};
    use crate::model::{Config, SourceConfig};

    /// A binary subset message counts its items in a u16: a k above 65,535 (given, or
    /// the default at d = 2^24, ε = 1: 4,512,089) is refused naming the format; JSON and
    /// a small k are fine.
    #[test]
    fn binary_subset_reports_need_k_below_the_u16_count() {
        let kafka = |format: &str, mechanism: &str| {
            format!(
                "[[stream]]\nname = \"k\"\nsource = {{ kind = \"kafka\", brokers = \"b:9092\", topics = [\"t\"], group_id = \"g\", format = \"{format}\" }}\nmechanism = {mechanism}\n[[stream.test]]\nname = \"w\"\nkind = \"gof\"\nnull = \"uniform\"\n"
            )
        };
        let big = "{ kind = \"subset\", epsilon = 1.0, domain = 16777216 }";
        let e = err(&kafka("binary", big));
        assert!(
            e.contains("source.format = \"binary\"") && e.contains("k is 4512089"),
            "{e}"
        );
        let e = err(&kafka(
            "binary",
            "{ kind = \"subset\", epsilon = 1.0, domain = 100000, k = 65536 }",
        ));
        assert!(e.contains("at most 65535 items"), "{e}");
        Config::from_toml_str(&kafka("json", big), "t").unwrap();
        Config::from_toml_str(
            &kafka(
                "binary",
                "{ kind = \"subset\", epsilon = 1.0, domain = 100000, k = 65535 }",
            ),
            "t",
        )
        .unwrap();
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

    /// Issue 34, item 10: with every stream scale-out, `checkpoint_dir` was accepted, got a
    /// LOCK and tiny checkpoints, and the log said the state was kept there.
    #[test]
    fn checkpoint_dir_is_refused_when_every_stream_is_scale_out() {
        let so = "[[stream]]\nname = \"k\"\nsource = { kind = \"kafka\", brokers = \"b:9092\", topics = [\"in\"], group_id = \"g\", scale_out = { results_topic = \"out\" } }\nmechanism = { kind = \"grr\", epsilon = 1.0, domain = 4 }\n";
        let e = err(&format!("[serve]\ncheckpoint_dir = \"/var/ck\"\n{so}"));
        assert!(
            e.contains("serve.checkpoint_dir") && e.contains("/var/ck") && e.contains("in Kafka"),
            "{e}"
        );
        Config::from_toml_str(so, "t").unwrap();
        // A stream whose state is local needs the directory: kept.
        let mixed = format!("[serve]\ncheckpoint_dir = \"/var/ck\"\n{so}{}", GOOD);
        Config::from_toml_str(&mixed, "t").unwrap();
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
        let SourceConfig::Kafka(k) = &c.streams[0].source else {
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
}
