//! The `[serve]` table: the HTTP endpoint, the checkpoint and the sinks.

use crate::error::ConfigError;
use crate::model::{ServeConfig, SinkConfig};

pub(super) fn validate_serve(serve: &ServeConfig) -> Result<(), ConfigError> {
    validate_listen_and_intervals(serve)?;
    validate_http_access(serve)?;
    validate_checkpoint(serve)?;
    validate_sinks(&serve.sinks)
}

/// The endpoint's address and how often snapshots and checkpoints are taken.
fn validate_listen_and_intervals(serve: &ServeConfig) -> Result<(), ConfigError> {
    if serve.listen.parse::<std::net::SocketAddr>().is_err() {
        return Err(ConfigError::invalid(
            "serve.listen",
            format!("{:?}", serve.listen),
            "an IP address and port, e.g. \"127.0.0.1:9898\"",
        ));
    }
    // Above a day, results and checkpoints would wait so long that a restart replays a day
    // of input and the status page looks dead; a bigger value is a typo, not a plan.
    for (key, interval, example) in [
        ("serve.snapshot_interval", serve.snapshot_interval, "5s"),
        (
            "serve.checkpoint_interval",
            serve.checkpoint_interval,
            "10s",
        ),
    ] {
        if interval.millis() == 0 || interval.millis() > MAX_SERVE_INTERVAL_MS {
            return Err(ConfigError::invalid(
                key,
                interval,
                format!("a duration > 0 and at most 1d, e.g. \"{example}\""),
            ));
        }
    }
    Ok(())
}

/// The longest `snapshot_interval` and `checkpoint_interval`: one day.
pub const MAX_SERVE_INTERVAL_MS: u64 = 86_400_000;

/// Who may call the endpoint: the token's variable and the TLS files.
fn validate_http_access(serve: &ServeConfig) -> Result<(), ConfigError> {
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
    Ok(())
}

/// Where the state is kept, and whether it is kept at all.
fn validate_checkpoint(serve: &ServeConfig) -> Result<(), ConfigError> {
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
    Ok(())
}

fn validate_sinks(sinks: &[SinkConfig]) -> Result<(), ConfigError> {
    for (i, sink) in sinks.iter().enumerate() {
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

#[cfg(test)]
mod tests {
    use super::super::test_support::{err, GOOD};
    use crate::model::{Config, SinkConfig};

    #[test]
    fn serve_keys_validate() {
        let sim = GOOD.replace(
            "source = { kind = \"parquet\", paths = [\"data/*.parquet\"] }",
            "source = { kind = \"simulator\", rate = 1000.0, switch_at = \"1m\", switch_p = [0.4, 0.2, 0.2, 0.2] }",
        );
        let e = err(&format!("{sim}\n[serve]\nlisten = \"localhost\"\n"));
        assert!(e.contains("serve.listen = \"localhost\""), "{e}");
        let e = err(&format!("{sim}\n[serve]\nsnapshot_interval = \"0s\"\n"));
        assert!(e.contains("serve.snapshot_interval"), "{e}");
        for key in ["snapshot_interval", "checkpoint_interval"] {
            let e = err(&format!("{sim}\n[serve]\n{key} = \"2d\"\n"));
            assert!(
                e.contains(&format!("serve.{key}")) && e.contains("at most 1d"),
                "{e}"
            );
        }
        let sinks = format!(
            "{sim}\n[serve]\nsink = [{{ kind = \"kafka\", brokers = \"b:9092\", topic = \"results\", options = {{ \"acks\" = \"all\" }} }}, {{ kind = \"parquet\", dir = \"out/pq\" }}]\n"
        );
        let c = Config::from_toml_str(&sinks, "t").unwrap();
        assert!(matches!(
            &c.serve.sinks[1],
            SinkConfig::Parquet { roll_interval, .. } if roll_interval.millis() == 600_000
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
}
