//! Two client versions in one topic (docs/clients.md, "Mechanism fingerprint"): after ε changed from 2
//! to 1, new clients stamp the stream's fingerprint, old ones still stamp ε = 2's, and a
//! third kind stamps nothing. Through a real broker, in JSON and binary: only the old
//! clients' reports are refused, counted under `mechanism_mismatch` and dead-lettered.

use std::time::Duration;

use ldpstream_config::MechanismConfig;
use ldpstream_engine::mechanism::Mechanism;
use serde_json::Value;

use crate::common::kafka::{brokers, consume_all, create_topic, produce, unique};
use crate::common::{eventually, sample, Serve};

const NEW: usize = 3_000;
const OLD: usize = 1_000;
const UNSTAMPED: usize = 1_000;

fn fingerprint(epsilon: f64) -> u32 {
    let config = MechanismConfig::Grr { epsilon, domain: 4 };
    Mechanism::from_config(&config)
        .unwrap()
        .fingerprint()
        .unwrap()
}

/// The messages of one format, on partitions 0..4, then the end markers.
fn messages(binary: bool) -> Vec<(i32, Vec<u8>)> {
    let (ours, old) = (fingerprint(1.0), fingerprint(2.0));
    let stamped = |i: usize| match i {
        i if i < NEW => Some(ours),
        i if i < NEW + OLD => Some(old),
        _ => None,
    };
    let mut out: Vec<(i32, Vec<u8>)> = (0..NEW + OLD + UNSTAMPED)
        .map(|i| {
            let report = (i % 4) as u32;
            let m = match (binary, stamped(i)) {
                (false, Some(f)) => {
                    format!(r#"{{"report":{report},"fingerprint":"{f:08x}"}}"#).into_bytes()
                }
                (false, None) => format!(r#"{{"report":{report}}}"#).into_bytes(),
                (true, f) => {
                    let plain =
                        ldpstream_connectors::messages::encode_binary_u32(None, report, &[]);
                    match f {
                        Some(f) => [&[2u8][..], &f.to_le_bytes(), &plain[1..]].concat(),
                        None => plain,
                    }
                }
            };
            ((i % 4) as i32, m)
        })
        .collect();
    let end = if binary {
        vec![0xFF]
    } else {
        br#"{"end":true}"#.to_vec()
    };
    out.extend((0..4).map(|p| (p, end.clone())));
    out
}

#[test]
fn old_clients_reports_are_refused_as_mechanism_mismatch() {
    let brokers = brokers();
    let dir = tempfile::tempdir().unwrap();
    let topics: Vec<String> = ["json", "json-dead", "bin", "bin-dead"]
        .iter()
        .map(|t| unique(&format!("fp-{t}")))
        .collect();
    for t in &topics {
        create_topic(&brokers, t);
    }
    let stream = |name: &str, format: &str, topic: &str, dead: &str| {
        format!(
            r#"[[stream]]
name = "{name}"
source = {{ kind = "kafka", brokers = "{brokers}", topics = ["{topic}"], group_id = "{topic}-g", format = "{format}", end_marker = true, dead_letter_topic = "{dead}" }}
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 4 }}
[[stream.test]]
name = "all"
kind = "gof"
null = "uniform"
"#
        )
    };
    let cfg = dir.path().join("fp.toml");
    let out = dir.path().join("fp.jsonl");
    std::fs::write(
        &cfg,
        format!(
            "[serve]\nsnapshot_interval = \"200ms\"\ncheckpoint_dir = \"{}/ck\"\nsink = [{{ kind = \"jsonl\", path = \"{}\" }}]\n{}{}",
            dir.path().display(),
            out.display(),
            stream("json", "json", &topics[0], &topics[1]),
            stream("bin", "binary", &topics[2], &topics[3]),
        ),
    )
    .unwrap();
    let mut serve = Serve::start(&cfg, &[]);
    // The end markers go last, once the rejections are visible in the metrics.
    let (json, bin) = (messages(false), messages(true));
    produce(&brokers, &topics[0], &json[..json.len() - 4]);
    produce(&brokers, &topics[2], &bin[..bin.len() - 4]);
    eventually(
        "the old clients' reports refused",
        Duration::from_secs(120),
        || {
            let m = serve.get("/metrics").1;
            ["json", "bin"]
                .iter()
                .all(|s| {
                    sample(
                        &m,
                        "ldpstream_reports_rejected_total",
                        &format!("reason=\"mechanism_mismatch\",stream=\"{s}\""),
                    ) == Some(OLD as f64)
                })
                .then_some(())
        },
    );
    produce(&brokers, &topics[0], &json[json.len() - 4..]);
    produce(&brokers, &topics[2], &bin[bin.len() - 4..]);
    let status = serve.wait(Duration::from_secs(120));
    assert!(status.success(), "serve exited with {status:?}");

    let finals: Vec<Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["final"] == true)
        .collect();
    for s in ["json", "bin"] {
        let r = finals.iter().find(|r| r["stream"] == s).unwrap();
        assert_eq!(r["n"], (NEW + UNSTAMPED) as u64, "{s}: {r}");
    }
    for dead in [&topics[1], &topics[3]] {
        let letters = consume_all(&brokers, dead, OLD, Duration::from_secs(60));
        assert_eq!(letters.len(), OLD, "{dead}");
        let reason = &letters[0].headers["ldpstream-reason"];
        assert!(
            reason.contains(&format!("{:08x}", fingerprint(2.0)))
                && reason.contains(&format!("{:08x}", fingerprint(1.0))),
            "{reason}"
        );
    }
}
