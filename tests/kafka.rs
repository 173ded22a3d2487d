//! `serve` against a real Kafka-protocol broker (Tansu, started by scripts/test.sh through
//! deploy/kafka/start-local.sh, address in LDPSTREAM_KAFKA_BROKERS): JSON and binary
//! messages on 4-partition topics, final windows compared with `batch` over the same
//! reports, and kill -9 at three seeded points with a restart from the checkpoint.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{ArrayRef, StringArray, TimestampMillisecondArray, UInt32Array};
use arrow::datatypes::{Field, Schema};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::Value;

const T0: i64 = 1_767_225_600_000;

fn brokers() -> Option<String> {
    match std::env::var("LDPSTREAM_KAFKA_BROKERS") {
        Ok(b) if !b.is_empty() => Some(b),
        _ => {
            eprintln!(
                "\n!!!!!!!! LDPSTREAM_KAFKA_BROKERS is not set: SKIPPING the Kafka integration \
                 tests. Run ./scripts/test.sh (it starts a local broker), or \
                 deploy/kafka/start-local.sh and export the address it prints. !!!!!!!!\n"
            );
            None
        }
    }
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_ldpstream")
}

fn create_topic(brokers: &str, name: &str) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let results = rt
        .block_on(admin.create_topics(
            &[NewTopic::new(name, 4, TopicReplication::Fixed(1))],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        ))
        .unwrap();
    for r in results {
        r.unwrap_or_else(|(t, e)| panic!("creating topic {t}: {e}"));
    }
}

fn produce(brokers: &str, topic: &str, messages: &[(i32, Vec<u8>)]) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("linger.ms", "5")
        .set("batch.num.messages", "100000")
        .set("queue.buffering.max.messages", "1000000")
        .create()
        .unwrap();
    for (partition, payload) in messages {
        loop {
            let record = BaseRecord::<(), [u8]>::to(topic)
                .partition(*partition)
                .payload(payload.as_slice());
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    producer.poll(Duration::from_millis(10));
                }
                Err((e, _)) => panic!("produce: {e}"),
            }
        }
    }
    producer.flush(Duration::from_secs(120)).unwrap();
}

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{}-{nanos}", std::process::id())
}

fn write_parquet(path: &Path, reports: Vec<u32>, ts: Vec<i64>, groups: Option<Vec<String>>) {
    let mut columns: Vec<(&str, ArrayRef)> = vec![
        ("report", Arc::new(UInt32Array::from(reports))),
        (
            "ts",
            Arc::new(TimestampMillisecondArray::from(ts).with_timezone("UTC")),
        ),
    ];
    if let Some(g) = groups {
        columns.push(("g", Arc::new(StringArray::from(g))));
    }
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .map(|(n, a)| Field::new(*n, a.data_type().clone(), false))
            .collect::<Vec<_>>(),
    ));
    let batch = RecordBatch::try_new(
        schema.clone(),
        columns.into_iter().map(|(_, a)| a).collect(),
    )
    .unwrap();
    let mut w = ArrowWriter::try_new(std::fs::File::create(path).unwrap(), schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

struct Serve {
    child: Child,
    addr: String,
}

impl Serve {
    fn start(config: &Path) -> Serve {
        let mut child = Command::new(bin())
            .args([
                "serve",
                "--config",
                config.to_str().unwrap(),
                "--listen",
                "127.0.0.1:0",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let mut addr = None;
        while stderr.read_line(&mut line).unwrap() > 0 {
            if let Some(a) = line
                .trim()
                .strip_prefix("ldpstream serve: listening on http://")
            {
                addr = Some(a.to_string());
                break;
            }
            line.clear();
        }
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = stderr.read_to_string(&mut rest);
            if !rest.trim().is_empty() {
                eprintln!("serve stderr: {rest}");
            }
        });
        Serve {
            child,
            addr: addr.expect("serve prints its address"),
        }
    }

    /// `ldpstream_reports_total` of the stream, or 0 when the endpoint is not answering.
    fn reports_total(&self) -> f64 {
        let Ok(mut s) = TcpStream::connect(&self.addr) else {
            return 0.0;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let _ = write!(
            s,
            "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        );
        let mut text = String::new();
        let _ = s.read_to_string(&mut text);
        text.lines()
            .find(|l| l.starts_with("ldpstream_reports_total{"))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    }

    fn wait(&mut self, within: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "serve did not finish");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

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
    let Some(brokers) = brokers() else { return };
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
        let g = if (x >> 20) % 3 == 0 { "a" } else { "b" };
        let p = (i % 4) as i32;
        messages.push((
            p,
            format!(r#"{{"report":{r},"ts":{t},"g":"{g}"}}"#).into_bytes(),
        ));
        reports.push(r);
        ts.push(t);
        groups.push(g.to_string());
    }
    // Bad messages are counted and skipped, never folded.
    messages.push((0, b"{not json".to_vec()));
    messages.push((1, br#"{"report":-3,"ts":1}"#.to_vec()));
    for p in 0..4 {
        messages.push((p, br#"{"end":true}"#.to_vec()));
    }
    produce(&brokers, &topic, &messages);
    let parquet = dir.path().join("json.parquet");
    write_parquet(&parquet, reports, ts, Some(groups));
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
    let expected = batch_finals(dir.path(), "json");
    // 500 s of event time: 9 one-minute windows and the cumulative one, per group.
    assert_eq!(expected.len(), 20);
    let mut serve = Serve::start(&cfg);
    let status = serve.wait(Duration::from_secs(120));
    assert!(status.success());
    let got = last_finals(&jsonl(&dir.path().join("json.jsonl")));
    assert_eq!(got, expected);
}

#[test]
fn kafka_kill_9_three_times_matches_batch() {
    let Some(brokers) = brokers() else { return };
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
            ldpstream_connectors::decode::encode_binary_u32(Some(t), r, &[]),
        ));
        reports.push(r);
        ts.push(t);
    }
    for p in 0..4 {
        messages.push((p, ldpstream_connectors::decode::BINARY_END_MARKER.to_vec()));
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
    write_parquet(&parquet, reports, ts, None);

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
        let mut first = Serve::start(&cfg);
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
        let mut second = Serve::start(&cfg);
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
