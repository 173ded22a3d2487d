//! Event time of Kafka reports against the real broker: a message without a payload `ts`
//! takes its Kafka record timestamp (the default `event_time = "auto"`), so it lands in the
//! tumbling window of that timestamp; with `event_time = "none"` (or `"payload"` and no
//! `ts`) it has no event time, yet the global and cumulative windows still count it.
//! Before, such reports were all counted late and every window said n = 0.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::common::kafka::{brokers, create_topic, produce_at, unique};
use crate::common::Serve;

/// 2026-01-01T00:00:00Z.
const T0: i64 = 1_767_225_600_000;
const REPORTS: i64 = 400;
/// One report every 700 ms of Kafka time: 280 s, five one-minute windows.
const STEP_MS: i64 = 700;

fn config(
    dir: &Path,
    run: &str,
    brokers: &str,
    topic: &str,
    format: &str,
    event_time: &str,
) -> PathBuf {
    let tumbling = if event_time == "none" {
        String::new()
    } else {
        "[[stream.test]]\nname = \"minute\"\nkind = \"gof\"\nnull = \"uniform\"\nwindow = { kind = \"tumbling\", size = \"1m\" }\n".to_string()
    };
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
source = {{ kind = "kafka", brokers = "{brokers}", topics = ["{topic}"], group_id = "{run}", format = "{format}", end_marker = true, event_time = "{event_time}" }}
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 8 }}
allowed_lateness = "1h"
{tumbling}
[[stream.test]]
name = "all"
kind = "gof"
null = "uniform"
window = {{ kind = "cumulative" }}
[[stream.test]]
name = "global"
kind = "gof"
null = "uniform"
"#,
            dir = dir.display()
        ),
    )
    .unwrap();
    path
}

/// Messages without a payload timestamp, each with an explicit Kafka timestamp, then an
/// end marker on each of the 4 partitions.
fn messages(format: &str) -> Vec<(i32, Option<i64>, Vec<u8>)> {
    let mut out: Vec<(i32, Option<i64>, Vec<u8>)> = (0..REPORTS)
        .map(|i| {
            let report = (i * 5 % 8) as u32;
            let payload = match format {
                "json" => format!("{{\"report\": {report}}}").into_bytes(),
                _ => ldpstream_connectors::messages::encode_binary_u32(None, report, &[]),
            };
            ((i % 4) as i32, Some(T0 + i * STEP_MS), payload)
        })
        .collect();
    for p in 0..4 {
        let marker = match format {
            "json" => b"{\"end\": true}".to_vec(),
            _ => vec![0xFF],
        };
        out.push((p, Some(T0 + REPORTS * STEP_MS), marker));
    }
    out
}

/// The final record of each (test, window start).
fn finals(path: &Path) -> BTreeMap<(String, String), Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["final"] == true)
        .map(|r| {
            (
                (
                    r["test"].as_str().unwrap().to_string(),
                    r["window_start"].as_str().unwrap_or("").to_string(),
                ),
                r,
            )
        })
        .collect()
}

fn run(format: &str, event_time: &str) -> BTreeMap<(String, String), Value> {
    let brokers = brokers();
    let dir = tempfile::tempdir().unwrap();
    let topic = unique(&format!("et-{format}-{event_time}"));
    create_topic(&brokers, &topic);
    produce_at(&brokers, &topic, &messages(format));
    let run = unique("et");
    let cfg = config(dir.path(), &run, &brokers, &topic, format, event_time);
    let mut serve = Serve::start(&cfg, &[]);
    let status = serve.wait(Duration::from_secs(120));
    assert!(status.success(), "serve: {status}");
    finals(&dir.path().join(format!("{run}.jsonl")))
}

fn assert_all_counted(f: &BTreeMap<(String, String), Value>, what: &str) {
    for test in ["all", "global"] {
        let r = f
            .iter()
            .find(|((t, _), _)| t == test)
            .unwrap_or_else(|| panic!("{what}: no final {test} record in {f:?}"))
            .1;
        assert_eq!(r["n"], REPORTS, "{what}: {test} {r}");
        assert_eq!(r["late_reports"], 0, "{what}: {test} {r}");
    }
}

/// Each one-minute window holds exactly the reports whose Kafka timestamp is in it.
fn assert_tumbling_by_kafka_time(f: &BTreeMap<(String, String), Value>, what: &str) {
    let mut expected: BTreeMap<i64, u64> = BTreeMap::new();
    for i in 0..REPORTS {
        let t = T0 + i * STEP_MS;
        *expected.entry(t - t.rem_euclid(60_000)).or_default() += 1;
    }
    let got: BTreeMap<i64, u64> = f
        .iter()
        .filter(|((t, _), _)| t == "minute")
        .map(|((_, start), r)| {
            let start = chrono::DateTime::parse_from_rfc3339(start)
                .unwrap()
                .timestamp_millis();
            (start, r["n"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(got, expected, "{what}: reports per one-minute window");
}

#[test]
fn kafka_timestamps_are_the_event_time_of_untimed_messages() {
    for format in ["json", "binary"] {
        let f = run(format, "auto");
        assert_all_counted(&f, format);
        assert_tumbling_by_kafka_time(&f, format);
    }
}

#[test]
fn reports_without_event_time_fold_into_global_and_cumulative_windows() {
    // "none": no event time at all (a tumbling test is refused by the validator).
    assert_all_counted(&run("json", "none"), "none");
    // "payload" and messages without `ts`: untimed too. A stream with no event time at
    // all is one global window, so the tumbling test gives one result with null bounds
    // (as for a Parquet file without a ts column); nothing is lost or counted late.
    let f = run("binary", "payload");
    assert_all_counted(&f, "payload");
    let minute: Vec<&Value> = f
        .iter()
        .filter(|((t, _), _)| t == "minute")
        .map(|(_, r)| r)
        .collect();
    assert_eq!(minute.len(), 1, "{minute:?}");
    assert_eq!(minute[0]["window_start"], Value::Null);
    assert_eq!(minute[0]["n"], REPORTS);
}
