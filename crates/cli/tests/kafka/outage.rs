//! A broker outage in the middle of a run, against a real broker: the test's own Tansu
//! behind deploy/kafka/proxy.py (plain TCP), which the broker advertises. Stopping the
//! proxy for 30 s cuts every connection serve has to the broker while the broker keeps
//! its messages (Tansu's storage here is in memory, so stopping the broker itself would
//! lose them). Meanwhile `/metrics` keeps serving, `/readyz` says not ready and why, and
//! `ldpstream_kafka_brokers_unreachable` is 1; when the proxy is back, ingestion resumes
//! by itself and the final record equals a clean run's over the same messages.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::kafka::{produce, unique};
use crate::common::own_broker::{broker, create_topic, free_port, proxy, tansu};
use crate::common::{eventually, sample, Serve};

fn config(dir: &Path, run: &str, brokers: &str, topic: &str) -> PathBuf {
    let path = dir.join(format!("{run}.toml"));
    std::fs::write(
        &path,
        format!(
            r#"
[serve]
snapshot_interval = "200ms"
sink = [{{ kind = "jsonl", path = "{dir}/{run}.jsonl" }}]
[[stream]]
name = "k"
source = {{ kind = "kafka", brokers = "{brokers}", topics = ["{topic}"], group_id = "{group}", end_marker = true, options = {{ "statistics.interval.ms" = "1000", "reconnect.backoff.max.ms" = "1000" }} }}
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 8 }}
[[stream.test]]
name = "global"
kind = "gof"
null = "uniform"
"#,
            dir = dir.display(),
            group = unique("outage"),
        ),
    )
    .unwrap();
    path
}

fn messages(from: u32, to: u32) -> Vec<(i32, Vec<u8>)> {
    (from..to)
        .map(|i| {
            (
                (i % 2) as i32,
                format!("{{\"report\": {}}}", i * 7 % 8).into_bytes(),
            )
        })
        .collect()
}

#[test]
fn ingestion_resumes_after_a_30_s_broker_outage_and_counts_match_a_clean_run() {
    let tansu = tansu();
    let dir = tempfile::tempdir().unwrap();
    let (direct, via) = (free_port(), free_port());
    let _broker = broker(&tansu, direct, via, &[]);
    let topic = unique("outage");
    create_topic(&tansu, direct, &topic, 2);
    let mut up = Some(proxy(via, direct, None));
    let brokers = format!("127.0.0.1:{via}");
    produce(&brokers, &topic, &messages(0, 3000));

    let cfg = config(dir.path(), "outage", &brokers, &topic);
    let mut serve = Serve::start(&cfg, &[]);
    let reports = |s: &Serve| sample(&s.get("/metrics").1, "ldpstream_reports_total", "");
    eventually("the first 3000 reports", Duration::from_secs(60), || {
        reports(&serve).filter(|&n| n >= 3000.0)
    });
    assert_eq!(serve.get("/readyz").0, 200);

    // The outage: every connection to the broker is cut, and new ones are refused.
    drop(up.take());
    eventually("readyz to say not ready", Duration::from_secs(20), || {
        let (code, body) = serve.get("/readyz");
        (code == 503 && body.contains("Kafka brokers unreachable")).then_some(())
    });
    let down_since = Instant::now();
    while down_since.elapsed() < Duration::from_secs(30) {
        let (code, metrics) = serve.get("/metrics");
        assert_eq!(code, 200, "/metrics must keep serving during the outage");
        assert_eq!(
            sample(
                &metrics,
                "ldpstream_kafka_brokers_unreachable",
                "stream=\"k\""
            ),
            Some(1.0)
        );
        assert_eq!(serve.get("/readyz").0, 503);
        assert!(serve.child.try_wait().unwrap().is_none(), "serve exited");
        std::thread::sleep(Duration::from_secs(1));
    }

    // The broker is back: ingestion resumes by itself, with what was produced after.
    let _back = proxy(via, direct, None);
    let mut rest = messages(3000, 5000);
    rest.extend((0..2).map(|p| (p, b"{\"end\": true}".to_vec())));
    produce(&brokers, &topic, &rest);
    eventually("readyz to say ready again", Duration::from_secs(30), || {
        (serve.get("/readyz").0 == 200).then_some(())
    });
    assert!(serve.wait(Duration::from_secs(120)).success());
    let after_outage = crate::common::final_record(&dir.path().join("outage.jsonl"));
    assert_eq!(after_outage["n"], 5000, "{after_outage}");
    assert!(serve
        .stderr
        .lock()
        .unwrap()
        .contains("no Kafka broker can be reached"));

    // A clean run over the same messages, produced at once to a topic of the suite's
    // broker, gives the same record.
    let shared = crate::common::kafka::brokers();
    let clean_topic = unique("clean");
    crate::common::kafka::create_topic(&shared, &clean_topic);
    let mut all = messages(0, 5000);
    all.extend((0..4).map(|p| (p, b"{\"end\": true}".to_vec())));
    produce(&shared, &clean_topic, &all);
    let cfg = config(dir.path(), "clean", &shared, &clean_topic);
    let mut clean = Serve::start(&cfg, &[]);
    assert!(clean.wait(Duration::from_secs(120)).success());
    let clean = crate::common::final_record(&dir.path().join("clean.jsonl"));
    for field in ["n", "statistic", "p_value", "estimate", "rejected_reports"] {
        assert_eq!(after_outage[field], clean[field], "{field}");
    }
}
