//! `serve` against a real Kafka-protocol broker (Tansu, started by scripts/test.sh through
//! deploy/kafka/start-local.sh, address in LDPSTREAM_KAFKA_BROKERS): JSON and binary
//! messages on 4-partition topics, final windows compared with `batch` over the same
//! reports, and kill -9 at three seeded points with a restart from the checkpoint.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use serde_json::Value;

use crate::common::kafka::{brokers, consume_all, create_topic, produce, unique};
use crate::common::{bin, eventually, write_timed_reports, Serve};

const T0: i64 = 1_767_225_600_000;

fn last_finals(records: &[Value]) -> std::collections::BTreeMap<String, Value> {
    records
        .iter()
        .filter(|r| r["final"] == true)
        .map(|r| {
            (
                format!("{}|{}|{}", r["test"], r["window_start"], r["group"]),
                r.clone(),
            )
        })
        .collect()
}

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn config(
    dir: &Path,
    run: &str,
    brokers: &str,
    topic: &str,
    format: &str,
    group_by: &str,
    window: &str,
    parquet: &Path,
) -> PathBuf {
    let path = dir.join(format!("{run}.toml"));
    std::fs::write(
        &path,
        format!(
            r#"
[serve]
snapshot_interval = "200ms"
checkpoint_interval = "250ms"
checkpoint_dir = "{dir}/{run}-ck"
sink = [{{ kind = "jsonl", path = "{dir}/{run}.jsonl" }}]
[[stream]]
name = "k"
source = {{ kind = "kafka", brokers = "{brokers}", topics = ["{topic}"], group_id = "{run}", format = "{format}", end_marker = true }}
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 8 }}
columns = {{ group_by = [{group_by}] }}
# Partitions are read interleaved; a generous lateness keeps every report in its window.
allowed_lateness = "1h"
[[stream.test]]
name = "win"
kind = "gof"
null = "uniform"
window = {window}
[[stream.test]]
name = "all"
kind = "gof"
null = "uniform"
window = {{ kind = "cumulative" }}
"#,
            dir = dir.display()
        ),
    )
    .unwrap();
    // The same config for `batch`, reading the Parquet copy of the reports.
    let batch = dir.join(format!("{run}-batch.toml"));
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text
        .lines()
        .map(|l| {
            if l.starts_with("source = ") {
                format!(
                    "source = {{ kind = \"parquet\", paths = [\"{}\"] }}",
                    parquet.display()
                )
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&batch, text).unwrap();
    path
}

fn batch_finals(dir: &Path, run: &str) -> std::collections::BTreeMap<String, Value> {
    let cfg = dir.join(format!("{run}-batch.toml"));
    let o = Command::new(bin())
        .args(["batch", "--config", cfg.to_str().unwrap(), "--output", "-"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let recs: Vec<Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    last_finals(&recs)
}

#[test]
fn kafka_json_serve_matches_batch() {
    let brokers = brokers();
    let dir = tempfile::tempdir().unwrap();
    let topic = unique("json");
    create_topic(&brokers, &topic);
    let n = 100_000usize;
    let (mut reports, mut ts, mut groups, mut messages) = (vec![], vec![], vec![], vec![]);
    let mut x: u64 = 42;
    for i in 0..n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let r = ((x >> 33) % 8) as u32;
        let t = T0 + 5 * i as i64;
        let g = if (x >> 20).is_multiple_of(3) {
            "a"
        } else {
            "b"
        };
        let p = (i % 4) as i32;
        messages.push((
            p,
            format!(r#"{{"report":{r},"ts":{t},"g":"{g}"}}"#).into_bytes(),
        ));
        reports.push(r);
        ts.push(t);
        groups.push(g.to_string());
    }
    // A report out of the domain decodes, and the fold rejects it and counts it in the
    // record (so batch, reading the same report from Parquet, records it too).
    let outside = format!(r#"{{"report":12,"ts":{},"g":"a"}}"#, T0 + 7);
    messages.push((2, outside.clone().into_bytes()));
    reports.push(12);
    ts.push(T0 + 7);
    groups.push("a".to_string());
    // Bad messages are counted and skipped, never folded.
    messages.push((0, b"{not json".to_vec()));
    messages.push((1, br#"{"report":-3,"ts":1}"#.to_vec()));
    for p in 0..4 {
        messages.push((p, br#"{"end":true}"#.to_vec()));
    }
    produce(&brokers, &topic, &messages);
    let parquet = dir.path().join("json.parquet");
    write_timed_reports(&parquet, reports, ts, Some(groups));
    let cfg = config(
        dir.path(),
        "json",
        &brokers,
        &topic,
        "json",
        "\"g\"",
        "{ kind = \"tumbling\", size = \"1m\" }",
        &parquet,
    );
    // Undecodable messages also go to a dead-letter topic.
    let dead = unique("dead");
    create_topic(&brokers, &dead);
    let text = std::fs::read_to_string(&cfg).unwrap().replace(
        "end_marker = true }",
        &format!("end_marker = true, dead_letter_topic = \"{dead}\" }}"),
    );
    std::fs::write(&cfg, text).unwrap();
    let expected = batch_finals(dir.path(), "json");
    // 500 s of event time: 9 one-minute windows and the cumulative one, per group.
    assert_eq!(expected.len(), 20);
    let mut serve = Serve::start(&cfg, &[]);
    let status = serve.wait(Duration::from_secs(120));
    assert!(status.success());
    let got = last_finals(&jsonl(&dir.path().join("json.jsonl")));
    assert_eq!(got, expected);

    let rejected: u64 = got
        .values()
        .filter_map(|r| r["rejected_reports"]["out_of_domain"].as_u64())
        .sum();
    assert!(
        rejected >= 1,
        "the out-of-domain report is counted in a record"
    );
    let letters = consume_all(&brokers, &dead, 3, Duration::from_secs(60));
    let mut payloads: Vec<&[u8]> = letters.iter().map(|l| l.payload.as_slice()).collect();
    payloads.sort();
    assert_eq!(
        payloads,
        [
            br#"{"report":-3,"ts":1}"#.as_slice(),
            outside.as_bytes(),
            b"{not json".as_slice()
        ]
    );
    for l in &letters {
        let reason = &l.headers["ldpstream-reason"];
        if l.payload == outside.as_bytes() {
            assert_eq!(reason, "out_of_domain");
        } else {
            assert!(reason.starts_with("JSON"), "{reason}");
        }
        let source = &l.headers["ldpstream-source"];
        assert!(source.starts_with(&format!("{topic}/")), "{source}");
        assert_eq!(l.key.as_deref(), Some(source.as_str()));
    }
}

#[test]
fn kafka_kill_9_three_times_matches_batch() {
    let brokers = brokers();
    let dir = tempfile::tempdir().unwrap();
    let topic = unique("kill");
    create_topic(&brokers, &topic);
    let n = 2_000_000usize;
    let (mut reports, mut ts, mut messages) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n + 4),
    );
    let mut x: u64 = 7;
    for i in 0..n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        // Slightly non-uniform, so the statistics are not all tiny.
        let r = (((x >> 33) % 9) as u32).min(7);
        let t = T0 + i as i64;
        let p = ((x >> 50) % 4) as i32;
        messages.push((
            p,
            ldpstream_connectors::messages::encode_binary_u32(Some(t), r, &[]),
        ));
        reports.push(r);
        ts.push(t);
    }
    for p in 0..4 {
        messages.push((
            p,
            ldpstream_connectors::messages::BINARY_END_MARKER.to_vec(),
        ));
    }
    let started = Instant::now();
    produce(&brokers, &topic, &messages);
    eprintln!(
        "produced {} messages in {:?}",
        messages.len(),
        started.elapsed()
    );
    drop(messages);
    let parquet = dir.path().join("kill.parquet");
    write_timed_reports(&parquet, reports, ts, None);

    let mut seed: u64 = 0x0dd5eed;
    let mut expected = None;
    for run in ["kill1", "kill2", "kill3"] {
        let cfg = config(
            dir.path(),
            run,
            &brokers,
            &topic,
            "binary",
            "",
            "{ kind = \"tumbling\", size = \"5m\" }",
            &parquet,
        );
        let expected = expected.get_or_insert_with(|| {
            let e = batch_finals(dir.path(), run);
            // 2000 s of event time: 7 five-minute windows and the cumulative one.
            assert_eq!(e.len(), 8);
            e
        });
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let fraction = 0.1 + ((seed >> 33) % 800) as f64 / 1000.0;
        let target = fraction * n as f64;
        let mut first = Serve::start(&cfg, &[]);
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            assert!(
                first.child.try_wait().unwrap().is_none(),
                "{run}: serve finished before the kill point"
            );
            if first.reports_total() >= target {
                break;
            }
            assert!(Instant::now() < deadline, "{run}: no progress");
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = first.child.kill(); // SIGKILL
        let _ = first.child.wait();
        let checkpointed = dir
            .path()
            .join(format!("{run}-ck/checkpoint.ldpc"))
            .exists();
        let mut second = Serve::start(&cfg, &[]);
        let status = second.wait(Duration::from_secs(180));
        assert!(status.success(), "{run}: restart exited with {status:?}");
        let got = last_finals(&jsonl(&dir.path().join(format!("{run}.jsonl"))));
        assert_eq!(
            &got,
            expected,
            "{run}: killed at {:.0}% (checkpoint written: {checkpointed})",
            fraction * 100.0
        );
        eprintln!(
            "{run}: killed at {:.0}% of the input, checkpoint written: {checkpointed}, final windows match batch",
            fraction * 100.0
        );
    }
}

/// An unbounded stream in a consumer group: every report is read, progress is committed to
/// the group, the lag gauge appears per partition, and on SIGTERM the Kafka and Parquet
/// sinks hold exactly the records the JSON-lines sink got.
#[test]
fn kafka_group_progress_lag_and_result_sinks() {
    use arrow_array::Array;
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::{Offset, TopicPartitionList};

    let brokers = brokers();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let topic = unique("group");
    let results = unique("results");
    let group = unique("grp");
    create_topic(&brokers, &topic);
    create_topic(&brokers, &results);
    let n = 20_000usize;
    let mut x: u64 = 99;
    let messages: Vec<(i32, Vec<u8>)> = (0..n)
        .map(|i| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = ((x >> 33) % 8) as u32;
            let t = T0 + 10 * i as i64;
            (
                (i % 4) as i32,
                ldpstream_connectors::messages::encode_binary_u32(Some(t), r, &[]),
            )
        })
        .collect();
    produce(&brokers, &topic, &messages);
    let cfg = d.join("group.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[serve]
snapshot_interval = "300ms"
sink = [
  {{ kind = "jsonl", path = "{d}/out.jsonl" }},
  {{ kind = "kafka", brokers = "{brokers}", topic = "{results}" }},
  {{ kind = "parquet", dir = "{d}/pq", roll_interval = "1h" }},
]
[[stream]]
name = "k"
source = {{ kind = "kafka", brokers = "{brokers}", topics = ["{topic}"], group_id = "{group}", format = "binary", options = {{ "statistics.interval.ms" = "500" }} }}
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 8 }}
allowed_lateness = "1h"
[[stream.test]]
name = "win"
kind = "gof"
null = "uniform"
window = {{ kind = "tumbling", size = "1m" }}
"#,
            d = d.display()
        ),
    )
    .unwrap();
    let mut serve = Serve::start(&cfg, &[]);
    eventually("every report read", Duration::from_secs(90), || {
        (serve.reports_total() >= n as f64).then_some(())
    });
    assert_eq!(serve.reports_total(), n as f64);
    assert_eq!(serve.get("/readyz").0, 200);
    // One lag series per partition of the topic. Tansu's high watermark is not exact (it
    // can run ahead of the last message), so the values are only checked to be gauges >= 0.
    eventually(
        "a lag series per partition",
        Duration::from_secs(30),
        || {
            let (_, text) = serve.get("/metrics");
            let lags: Vec<f64> = (0..4)
                .filter_map(|p| {
                    text.lines()
                        .find(|l| {
                            l.starts_with("ldpstream_kafka_consumer_lag{")
                                && l.contains(&format!("partition=\"{p}\""))
                                && l.contains(&format!("topic=\"{topic}\""))
                        })
                        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
                })
                .collect();
            (lags.len() == 4 && lags.iter().all(|&v| v >= 0.0)).then_some(())
        },
    );
    // Progress reaches the group: its committed offsets add up to every message.
    let probe: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("group.id", &group)
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..4 {
        tpl.add_partition(&topic, p);
    }
    eventually(
        "progress commits to the group",
        Duration::from_secs(30),
        || {
            let committed = probe
                .committed_offsets(tpl.clone(), Duration::from_secs(5))
                .ok()?;
            let sum: i64 = committed
                .elements()
                .iter()
                .map(|e| match e.offset() {
                    Offset::Offset(o) => o,
                    _ => 0,
                })
                .sum();
            (sum == n as i64).then_some(())
        },
    );
    let status = serve.terminate(Duration::from_secs(60));
    assert!(
        status.success(),
        "serve exited with {status:?} after SIGTERM"
    );

    let lines: Vec<String> = std::fs::read_to_string(d.join("out.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert!(!lines.is_empty());
    // The Kafka sink: the same records, one message each, keyed by result identity.
    let mut published: Vec<String> = Vec::new();
    for m in consume_all(&brokers, &results, lines.len(), Duration::from_secs(60)) {
        let payload = String::from_utf8(m.payload).unwrap();
        let record: Value = serde_json::from_str(&payload).unwrap();
        assert_eq!(
            m.key.unwrap(),
            serde_json::json!(["k", "win", null, record["window_start"]]).to_string(),
            "{payload}"
        );
        published.push(payload);
    }
    let mut expected = lines.clone();
    expected.sort();
    published.sort();
    assert_eq!(
        published, expected,
        "the results topic differs from the JSON lines"
    );

    // The Parquet sink: completed files only, the same records in the same order.
    let mut files: Vec<PathBuf> = std::fs::read_dir(d.join("pq"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty());
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("results-") && name.ends_with(".parquet"),
            "unexpected file {name}"
        );
    }
    let mut p_values = Vec::new();
    let mut ns = Vec::new();
    for f in &files {
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(f).unwrap(),
        )
        .unwrap()
        .build()
        .unwrap();
        for batch in reader {
            let batch = batch.unwrap();
            let p = batch.column_by_name("p_value").unwrap();
            let p = p
                .as_any()
                .downcast_ref::<arrow_array::Float64Array>()
                .unwrap();
            let c = batch.column_by_name("n").unwrap();
            let c = c
                .as_any()
                .downcast_ref::<arrow_array::UInt64Array>()
                .unwrap();
            for i in 0..batch.num_rows() {
                p_values.push((!p.is_null(i)).then(|| p.value(i)));
                ns.push(c.value(i));
            }
        }
    }
    let want: Vec<(Option<f64>, u64)> = lines
        .iter()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["p_value"].as_f64(), v["n"].as_u64().unwrap())
        })
        .collect();
    let got: Vec<(Option<f64>, u64)> = p_values.into_iter().zip(ns).collect();
    assert_eq!(got, want, "the Parquet files differ from the JSON lines");
}

/// Two instances in one group: A reads everything, then B joins. A gives up half of the
/// partitions and keeps reading the rest from where it was (it does not read its own
/// partitions again); B gets the other half and, having no checkpoint, reads them from the
/// beginning. Each instance exports lag only for the partitions it holds.
#[test]
fn kafka_second_instance_takes_half_the_partitions() {
    let brokers = brokers();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let topic = unique("split");
    let group = unique("split-grp");
    create_topic(&brokers, &topic);
    let n = 8_000usize;
    let messages: Vec<(i32, Vec<u8>)> = (0..n)
        .map(|i| {
            (
                (i % 4) as i32,
                ldpstream_connectors::messages::encode_binary_u32(
                    Some(T0 + i as i64),
                    (i % 8) as u32,
                    &[],
                ),
            )
        })
        .collect();
    produce(&brokers, &topic, &messages);
    let config = |name: &str| {
        let path = d.join(format!("{name}.toml"));
        std::fs::write(
            &path,
            format!(
                r#"
[serve]
snapshot_interval = "300ms"
checkpoint_dir = "{d}/{name}-ck"
checkpoint_interval = "300ms"
sink = [{{ kind = "jsonl", path = "{d}/{name}.jsonl" }}]
[[stream]]
name = "k"
source = {{ kind = "kafka", brokers = "{brokers}", topics = ["{topic}"], group_id = "{group}", format = "binary", options = {{ "statistics.interval.ms" = "300" }} }}
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 8 }}
allowed_lateness = "1h"
[[stream.test]]
name = "all"
kind = "gof"
null = "uniform"
window = {{ kind = "cumulative" }}
"#,
                d = d.display()
            ),
        )
        .unwrap();
        path
    };
    let lag_partitions = |s: &Serve| -> Vec<u32> {
        let (_, text) = s.get("/metrics");
        let mut ps: Vec<u32> = text
            .lines()
            .filter(|l| l.starts_with("ldpstream_kafka_consumer_lag{"))
            .filter_map(|l| {
                let rest = l.split("partition=\"").nth(1)?;
                rest.split('"').next()?.parse().ok()
            })
            .collect();
        ps.sort();
        ps
    };
    let mut a = Serve::start(&config("a"), &[]);
    eventually("A reads everything", Duration::from_secs(60), || {
        (a.reports_total() >= n as f64).then_some(())
    });
    eventually(
        "A's lag on all 4 partitions",
        Duration::from_secs(30),
        || (lag_partitions(&a) == [0, 1, 2, 3]).then_some(()),
    );
    let mut b = Serve::start(&config("b"), &[]);
    // B's share: two partitions of n/4 reports each, read from the beginning.
    eventually("B reads its half", Duration::from_secs(60), || {
        (b.reports_total() >= (n / 2) as f64).then_some(())
    });
    let (pa, pb) = eventually("lag series split 2 + 2", Duration::from_secs(30), || {
        let (pa, pb) = (lag_partitions(&a), lag_partitions(&b));
        (pa.len() == 2 && pb.len() == 2).then_some((pa, pb))
    });
    let mut all: Vec<u32> = pa.iter().chain(&pb).copied().collect();
    all.sort();
    assert_eq!(all, [0, 1, 2, 3], "A has {pa:?}, B has {pb:?}");
    // Give a wrongly restarted partition time to show up as extra reports.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(a.reports_total(), n as f64, "A read some partitions twice");
    assert_eq!(b.reports_total(), (n / 2) as f64);
    assert!(a.terminate(Duration::from_secs(60)).success());
    assert!(b.terminate(Duration::from_secs(60)).success());
}

/// The columns of a `simulate` Parquet file: event times, OLH seeds if any, and each
/// report as its list of u32 (one item for OLH's bucket, k for a subset).
fn read_simulated(path: &Path) -> (Vec<i64>, Vec<u32>, Vec<Vec<u32>>) {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{TimestampMillisecondType, UInt32Type};
    use arrow_array::Array;
    let file = std::fs::File::open(path).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let (mut ts, mut seeds, mut reports) = (vec![], vec![], vec![]);
    for batch in reader {
        let batch = batch.unwrap();
        let t = batch.column_by_name("ts").unwrap();
        ts.extend(t.as_primitive::<TimestampMillisecondType>().values().iter());
        if let Some(s) = batch.column_by_name("seed") {
            seeds.extend(s.as_primitive::<UInt32Type>().values().iter());
        }
        let r = batch.column_by_name("report").unwrap();
        match r.as_list_opt::<i32>() {
            Some(list) => reports.extend((0..list.len()).map(|i| {
                let items = list.value(i);
                items.as_primitive::<UInt32Type>().values().to_vec()
            })),
            None => reports.extend(
                r.as_primitive::<UInt32Type>()
                    .values()
                    .iter()
                    .map(|&y| vec![y]),
            ),
        }
    }
    (ts, seeds, reports)
}

/// One message of a `simulate` row, in `format`: subset items or an OLH (seed, bucket).
fn oracle_message(format: &str, ts: i64, seed: Option<u32>, items: &[u32]) -> Vec<u8> {
    match (format, seed) {
        ("json", Some(s)) => {
            format!(r#"{{"seed":{s},"report":{},"ts":{ts}}}"#, items[0]).into_bytes()
        }
        ("json", None) => format!(r#"{{"report":{items:?},"ts":{ts}}}"#).into_bytes(),
        (_, Some(s)) => {
            let mut m = vec![1u8];
            m.extend_from_slice(&ts.to_le_bytes());
            m.extend_from_slice(&s.to_le_bytes());
            m.extend_from_slice(&items[0].to_le_bytes());
            m
        }
        (_, None) => {
            ldpstream_connectors::messages::encode_binary_subset(Some(ts), items, &[]).unwrap()
        }
    }
}

/// Issue 30: `subset` and `olh` reports through a real broker, in both message formats,
/// with the randomizers' own reports (from `simulate`): every final record equals
/// `batch`'s over the same reports in Parquet, and the bad reports each oracle can carry
/// (a subset of the wrong size or with an item twice; a seed index outside the pool, a
/// bucket outside [g]) are rejected under their reason, dead-lettered, and never folded.
#[test]
fn kafka_subset_and_olh_serve_match_batch() {
    let brokers = brokers();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (subset_file, olh_file) = (d.join("subset.parquet"), d.join("olh.parquet"));
    let shared = [
        "--epsilon",
        "1",
        "--domain",
        "12",
        "--n",
        "20000",
        "--p",
        "0.2,0.15,0.1,0.1,0.1,0.05,0.05,0.05,0.05,0.05,0.05,0.05",
    ];
    let timing = ["--ts-start", "2026-01-01T00:00:00Z", "--rate", "200"];
    for (kind, file, extra) in [
        ("subset", &subset_file, vec![]),
        (
            "olh",
            &olh_file,
            vec!["--pool-size", "64", "--pool-seed", "5"],
        ),
    ] {
        let mut args = vec!["--mechanism", kind, "--seed", "3"];
        args.extend(shared);
        args.extend(timing);
        args.extend(extra);
        crate::common::simulate(&args, file);
    }
    let dead = unique("oracles-dead");
    create_topic(&brokers, &dead);
    // (stream, mechanism, format, file, bad messages with their reasons)
    let t = T0 + 1;
    let streams = [
        (
            "sj",
            "{ kind = \"subset\", epsilon = 1.0, domain = 12 }",
            "json",
            &subset_file,
        ),
        (
            "sb",
            "{ kind = \"subset\", epsilon = 1.0, domain = 12 }",
            "binary",
            &subset_file,
        ),
        (
            "oj",
            "{ kind = \"olh\", epsilon = 1.0, domain = 12, pool_size = 64, pool_seed = 5 }",
            "json",
            &olh_file,
        ),
        (
            "ob",
            "{ kind = \"olh\", epsilon = 1.0, domain = 12, pool_size = 64, pool_seed = 5 }",
            "binary",
            &olh_file,
        ),
    ];
    let mut serve_streams = String::new();
    let mut batch_streams = String::new();
    let mut expected_letters = vec![];
    for (name, mechanism, format, file) in streams {
        let topic = unique(name);
        create_topic(&brokers, &topic);
        let (ts, seeds, reports) = read_simulated(file);
        let olh = !seeds.is_empty();
        let mut messages: Vec<(i32, Vec<u8>)> = (0..ts.len())
            .map(|i| {
                let seed = olh.then(|| seeds[i]);
                (
                    (i % 4) as i32,
                    oracle_message(format, ts[i], seed, &reports[i]),
                )
            })
            .collect();
        let k = reports[0].len();
        let bad: Vec<(Vec<u8>, &str)> = if olh {
            // g = round(e) + 1 = 4 at ε = 1.
            vec![
                (
                    oracle_message(format, t, Some(64), &[0]),
                    "seed_out_of_pool",
                ),
                (
                    oracle_message(format, t, Some(3), &[4]),
                    "bucket_out_of_range",
                ),
            ]
        } else {
            let mut twice = reports[0].clone();
            twice[1] = twice[0];
            vec![
                (
                    oracle_message(format, t, None, &reports[0][..k - 1]),
                    "subset_wrong_size",
                ),
                (oracle_message(format, t, None, &twice), "subset_duplicate"),
            ]
        };
        for (i, (m, reason)) in bad.into_iter().enumerate() {
            messages.push((i as i32, m.clone()));
            expected_letters.push((m, reason));
        }
        messages.extend((0..4).map(|p| {
            (
                p,
                if format == "json" {
                    br#"{"end":true}"#.to_vec()
                } else {
                    vec![0xFF]
                },
            )
        }));
        produce(&brokers, &topic, &messages);
        let tests = "[[stream.test]]\nname = \"win\"\nkind = \"gof\"\nnull = \"uniform\"\nwindow = { kind = \"tumbling\", size = \"1m\" }\n[[stream.test]]\nname = \"all\"\nkind = \"gof\"\nnull = \"uniform\"\nwindow = { kind = \"cumulative\" }\n";
        serve_streams += &format!(
            "[[stream]]\nname = \"{name}\"\nsource = {{ kind = \"kafka\", brokers = \"{brokers}\", topics = [\"{topic}\"], group_id = \"{topic}\", format = \"{format}\", end_marker = true, dead_letter_topic = \"{dead}\" }}\nmechanism = {mechanism}\nallowed_lateness = \"1h\"\n{tests}"
        );
        batch_streams += &format!(
            "[[stream]]\nname = \"{name}\"\nsource = {{ kind = \"parquet\", paths = [\"{}\"] }}\nmechanism = {mechanism}\nallowed_lateness = \"1h\"\n{tests}",
            file.display()
        );
    }
    let cfg = d.join("oracles.toml");
    let out = d.join("oracles.jsonl");
    std::fs::write(
        &cfg,
        format!(
            "[serve]\nsnapshot_interval = \"200ms\"\ncheckpoint_interval = \"250ms\"\ncheckpoint_dir = \"{}\"\nsink = [{{ kind = \"jsonl\", path = \"{}\" }}]\n{serve_streams}",
            d.join("ck").display(),
            out.display()
        ),
    )
    .unwrap();
    let batch_cfg = d.join("oracles-batch.toml");
    std::fs::write(&batch_cfg, batch_streams).unwrap();
    let mut serve = Serve::start(&cfg, &[]);
    assert!(serve.wait(Duration::from_secs(120)).success());

    let o = Command::new(bin())
        .args([
            "batch",
            "--config",
            batch_cfg.to_str().unwrap(),
            "--output",
            "-",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let key = |r: &Value| format!("{}|{}|{}", r["stream"], r["test"], r["window_start"]);
    let finals = |records: Vec<Value>| -> std::collections::BTreeMap<String, Value> {
        records
            .into_iter()
            .filter(|r| r["final"] == true)
            .map(|mut r| {
                // The bad reports reach serve only; everything else must be equal.
                let rejected = r.as_object_mut().unwrap().remove("rejected_reports");
                (key(&r), serde_json::json!([r, rejected]))
            })
            .collect()
    };
    let want = finals(
        String::from_utf8(o.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
    );
    let got = finals(jsonl(&out));
    // 100 s of event time: two one-minute windows and the cumulative one, per stream.
    assert_eq!(want.len(), 12);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>()
    );
    for (k, w) in &want {
        assert_eq!(
            got[k][0], w[0],
            "{k}: serve's final record differs from batch's"
        );
    }
    for (name, reasons) in [
        ("sj", ["subset_wrong_size", "subset_duplicate"]),
        ("sb", ["subset_wrong_size", "subset_duplicate"]),
        ("oj", ["seed_out_of_pool", "bucket_out_of_range"]),
        ("ob", ["seed_out_of_pool", "bucket_out_of_range"]),
    ] {
        let prefix = format!("\"{name}\"|\"all\"|");
        let (_, all) = got.iter().find(|(k, _)| k.starts_with(&prefix)).unwrap();
        for reason in reasons {
            assert_eq!(all[1][reason], 1, "{name}: {reason} in {}", all[1]);
        }
    }
    let letters = consume_all(
        &brokers,
        &dead,
        expected_letters.len(),
        Duration::from_secs(60),
    );
    let mut got_letters: Vec<(Vec<u8>, String)> = letters
        .iter()
        .map(|l| (l.payload.clone(), l.headers["ldpstream-reason"].clone()))
        .collect();
    got_letters.sort();
    let mut want_letters: Vec<(Vec<u8>, String)> = expected_letters
        .into_iter()
        .map(|(m, r)| (m, r.to_string()))
        .collect();
    want_letters.sort();
    assert_eq!(got_letters, want_letters);
}
