//! End to end as a user would run it: the JS client privatizes 10⁶ values of a known
//! distribution in Node and produces them with kafkajs (clients/js/scripts/produce-kafka.mjs)
//! to the real broker; `serve` reads the topic. Its final GOF record must not reject the
//! true distribution, and every estimate must lie within 4 standard errors of it.
//!
//! Ignored by plain `cargo test`: it needs the built client and its npm tooling;
//! scripts/js_client_test.sh runs it (with the broker scripts/test.sh starts).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::common::kafka::{brokers, create_topic, unique};
use crate::common::Serve;

const N: u64 = 1_000_000;
const P: [f64; 4] = [0.4, 0.3, 0.2, 0.1];

#[test]
#[ignore = "needs the built JS client and kafkajs: scripts/js_client_test.sh runs it"]
fn js_client_reports_through_kafka_estimate_the_true_distribution() {
    let brokers = brokers();
    let dir = tempfile::tempdir().unwrap();
    let topic = unique("js-client");
    create_topic(&brokers, &topic);
    let p: Vec<String> = P.iter().map(f64::to_string).collect();
    let started = std::time::Instant::now();
    let produced = Command::new("node")
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../clients/js/scripts/produce-kafka.mjs"),
        )
        .args([
            &brokers,
            &topic,
            r#"{"kind":"grr","epsilon":1,"domain":4}"#,
            &p.join(","),
            &N.to_string(),
        ])
        .output()
        .expect("node on PATH");
    assert!(
        produced.status.success(),
        "{}",
        String::from_utf8_lossy(&produced.stderr)
    );
    println!("node produced {N} reports in {:?}", started.elapsed());

    let out = dir.path().join("out.jsonl");
    let cfg = dir.path().join("js.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"[serve]
snapshot_interval = "1s"
checkpoint_dir = "{dir}/ck"
sink = [{{ kind = "jsonl", path = "{out}" }}]
[[stream]]
name = "js"
source = {{ kind = "kafka", brokers = "{brokers}", topics = ["{topic}"], group_id = "{topic}-g", format = "json", end_marker = true }}
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 4 }}
# The four partitions are read interleaved and the event time is the Kafka record
# timestamp: without lateness, reports produced seconds before the latest one read from
# another partition would be late (a slow CI run counted 540,000 of 10^6 late).
allowed_lateness = "1h"
[[stream.test]]
name = "truth"
kind = "gof"
null = [{p}]
alpha = 0.001
"#,
            dir = dir.path().display(),
            out = out.display(),
            p = p.join(", "),
        ),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let mut serve = Serve::start(&cfg, &[]);
    let status = serve.wait(Duration::from_secs(300));
    assert!(status.success(), "serve exited with {status:?}");
    println!("serve read them in {:?}", started.elapsed());

    let text = std::fs::read_to_string(&out).unwrap();
    let r: Value = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .rfind(|r| r["final"] == true)
        .expect("a final record");
    assert_eq!(r["n"], N, "{r}");
    assert_eq!(r["reject"], false, "the true distribution is rejected: {r}");
    for (k, &pk) in P.iter().enumerate() {
        let (e, se) = (
            r["estimate"][k].as_f64().unwrap(),
            r["std_error"][k].as_f64().unwrap(),
        );
        assert!(
            (e - pk).abs() < 4.0 * se,
            "category {k}: {e} ± {se} vs {pk}"
        );
    }
    println!("p-value {}, estimate {}", r["p_value"], r["estimate"]);
}
