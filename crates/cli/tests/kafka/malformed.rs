//! Malformed messages in a real topic: truncated, invalid UTF-8, wrong field types, out of
//! the domain, a 10 MB message, NaN noise vectors, between the good messages of a JSON
//! (GenRR) and a binary (Gaussian) stream. Each is counted by reason and dead-lettered
//! with its original bytes, and the final records equal a clean run's but for the
//! rejection counts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::common::kafka::{brokers, consume_all, create_topic, produce, produce_with, unique};
use crate::common::{eventually, sample, Serve};

const T0: i64 = 1_767_225_600_000;
const N: usize = 20_000;

fn config(dir: &Path, run: &str, brokers: &str, topics: &Topics) -> PathBuf {
    let path = dir.join(format!("{run}.toml"));
    let text = format!(
        r#"
[serve]
snapshot_interval = "200ms"
checkpoint_dir = "{dir}/{run}-ck"
sink = [{{ kind = "jsonl", path = "{dir}/{run}.jsonl" }}]
[[stream]]
name = "cat"
source = {{ kind = "kafka", brokers = "{brokers}", topics = ["{cat}"], group_id = "{run}-cat", format = "json", end_marker = true, dead_letter_topic = "{cat_dead}" }}
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 8 }}
allowed_lateness = "1h"
[[stream.test]]
name = "win"
kind = "gof"
null = "uniform"
window = {{ kind = "tumbling", size = "1m" }}
[[stream.test]]
name = "all"
kind = "gof"
null = "uniform"
window = {{ kind = "cumulative" }}
[[stream]]
name = "noise"
source = {{ kind = "kafka", brokers = "{brokers}", topics = ["{noise}"], group_id = "{run}-noise", format = "binary", end_marker = true, dead_letter_topic = "{noise_dead}" }}
mechanism = {{ kind = "gauss", rho = 0.5, domain = 3 }}
# The consumer reads the four partitions unevenly: with the default lateness of 0 s, the
# reports of a partition that lags behind another are late, and the two runs' n differ.
allowed_lateness = "1h"
[[stream.test]]
name = "all"
kind = "gof"
null = "uniform"
window = {{ kind = "cumulative" }}
"#,
        dir = dir.display(),
        cat = topics.cat,
        cat_dead = topics.cat_dead,
        noise = topics.noise,
        noise_dead = topics.noise_dead,
    );
    std::fs::write(&path, text).unwrap();
    path
}

struct Topics {
    cat: String,
    cat_dead: String,
    noise: String,
    noise_dead: String,
}

impl Topics {
    fn new(brokers: &str, run: &str) -> Topics {
        let t = Topics {
            cat: unique(&format!("{run}-cat")),
            cat_dead: unique(&format!("{run}-cat-dead")),
            noise: unique(&format!("{run}-noise")),
            noise_dead: unique(&format!("{run}-noise-dead")),
        };
        for name in [&t.cat, &t.cat_dead, &t.noise, &t.noise_dead] {
            create_topic(brokers, name);
        }
        t
    }
}

/// A binary Gaussian report (d = 3) at `ts`.
fn noise_message(ts: i64, v: [f32; 3]) -> Vec<u8> {
    let mut b = vec![1u8];
    b.extend_from_slice(&ts.to_le_bytes());
    for x in v {
        b.extend_from_slice(&x.to_le_bytes());
    }
    b
}

/// The good messages of both streams, on partitions 0..4.
/// Messages as (partition, payload).
type Messages = Vec<(i32, Vec<u8>)>;

fn good() -> (Messages, Messages) {
    let (mut cat, mut noise) = (Vec::new(), Vec::new());
    let mut x: u64 = 7;
    for i in 0..N {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let t = T0 + 10 * i as i64;
        let p = (i % 4) as i32;
        let r = (x >> 33) % 8;
        cat.push((p, format!(r#"{{"report":{r},"ts":{t}}}"#).into_bytes()));
        let u = |k: u32| ((x >> (8 * k)) & 0xFF) as f32 / 64.0 - 2.0;
        noise.push((p, noise_message(t, [u(1), u(2), u(3)])));
    }
    (cat, noise)
}

fn end_markers(json: bool) -> Vec<(i32, Vec<u8>)> {
    (0..4)
        .map(|p| {
            let m = if json {
                br#"{"end":true}"#.to_vec()
            } else {
                vec![0xFF]
            };
            (p, m)
        })
        .collect()
}

fn finals(path: &Path) -> BTreeMap<String, Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["final"] == true)
        .map(|r| {
            (
                format!("{}|{}|{}", r["stream"], r["test"], r["window_start"]),
                r,
            )
        })
        .collect()
}

/// Runs serve over the topics. The end markers are produced only once the metrics show
/// `expect_rejected` (stream, reason, count), so that the counters can be read while the
/// service is up.
fn run(
    dir: &Path,
    name: &str,
    brokers: &str,
    topics: &Topics,
    expect_rejected: &[(&str, &str, f64)],
) -> BTreeMap<String, Value> {
    let cfg = config(dir, name, brokers, topics);
    let mut serve = Serve::start(&cfg, &[]);
    eventually("every report read", Duration::from_secs(120), || {
        let m = serve.get("/metrics").1;
        let read = |stream: &str| {
            sample(
                &m,
                "ldpstream_reports_total",
                &format!("stream=\"{stream}\""),
            )
            .unwrap_or(0.0)
        };
        let counted = expect_rejected.iter().all(|(stream, reason, n)| {
            sample(
                &m,
                "ldpstream_reports_rejected_total",
                &format!("reason=\"{reason}\",stream=\"{stream}\""),
            ) == Some(*n)
        });
        (read("cat") >= N as f64 && read("noise") >= N as f64 && counted).then_some(())
    });
    produce(brokers, &topics.cat, &end_markers(true));
    produce(brokers, &topics.noise, &end_markers(false));
    let status = serve.wait(Duration::from_secs(120));
    assert!(status.success(), "{name}: serve exited with {status:?}");
    finals(&dir.join(format!("{name}.jsonl")))
}

#[test]
fn malformed_messages_are_counted_dead_lettered_and_leave_the_results_alone() {
    let brokers = brokers();
    let dir = tempfile::tempdir().unwrap();
    let (cat, noise) = good();

    let clean_topics = Topics::new(&brokers, "clean");
    produce(&brokers, &clean_topics.cat, &cat);
    produce(&brokers, &clean_topics.noise, &noise);
    let clean = run(dir.path(), "clean", &brokers, &clean_topics, &[]);
    // 200 s of event time: four one-minute windows and the cumulative one of `cat`, and
    // the cumulative one of `noise`.
    assert_eq!(clean.len(), 6, "{:?}", clean.keys());

    // The bad JSON messages; the out-of-domain one decodes, and the fold rejects it.
    let big = {
        let mut m = br#"{"report":3,"ts":1,"pad":""#.to_vec();
        m.resize(10 << 20, b'x');
        m
    };
    let bad_cat: Vec<(Vec<u8>, &str)> = vec![
        (br#"{"report":3,"ts":"#.to_vec(), "JSON"),
        (
            b"{\"report\":3,\"ts\":1,\"x\":\"\xff\xfe\"}".to_vec(),
            "JSON",
        ),
        (br#"{"report":"three","ts":1}"#.to_vec(), "JSON"),
        (br#"{"report":3,"ts":"noon"}"#.to_vec(), "JSON"),
        (
            format!(r#"{{"report":99,"ts":{}}}"#, T0 + 5).into_bytes(),
            "out_of_domain",
        ),
        (big, "JSON"),
    ];
    let nan = noise_message(T0 + 5, [0.0, f32::NAN, 1.0]);
    let truncated = nan[..11].to_vec();
    let bad_noise: Vec<(Vec<u8>, &str)> = vec![
        (nan, "non_finite"),
        (
            noise_message(T0 + 5, [f32::INFINITY, 0.0, 0.0]),
            "non_finite",
        ),
        (truncated, "binary"),
        (vec![7u8; 20], "binary"),
    ];

    let dirty_topics = Topics::new(&brokers, "dirty");
    // Each bad message lands between good ones, on every partition in turn.
    let interleave = |good: &[(i32, Vec<u8>)], bad: &[(Vec<u8>, &str)]| {
        let mut out = good.to_vec();
        for (k, (m, _)) in bad.iter().enumerate() {
            let at = (k + 1) * good.len() / (bad.len() + 1);
            out.insert(at, ((k % 4) as i32, m.clone()));
        }
        out
    };
    let big_enough = [("message.max.bytes", "20000000")];
    produce_with(
        &brokers,
        &big_enough,
        &dirty_topics.cat,
        &interleave(&cat, &bad_cat)
            .into_iter()
            .map(|(p, m)| (p, None, m))
            .collect::<Vec<_>>(),
    );
    produce(
        &brokers,
        &dirty_topics.noise,
        &interleave(&noise, &bad_noise),
    );
    let dirty = run(
        dir.path(),
        "dirty",
        &brokers,
        &dirty_topics,
        &[
            ("cat", "bad_message", 5.0),
            ("cat", "out_of_domain", 1.0),
            ("noise", "bad_message", 2.0),
            ("noise", "non_finite", 2.0),
        ],
    );

    // The good messages' results are the clean run's; only the rejection counts differ,
    // by exactly the rejected reports, in the windows they fall in.
    let strip = |m: &BTreeMap<String, Value>| -> BTreeMap<String, Value> {
        m.iter()
            .map(|(k, r)| {
                let mut r = r.clone();
                r.as_object_mut().unwrap().remove("rejected_reports");
                (k.clone(), r)
            })
            .collect()
    };
    assert_eq!(strip(&dirty), strip(&clean));
    let rejected = |stream: &str, test: &str, reason: &str| -> u64 {
        dirty
            .values()
            .filter(|r| r["stream"] == stream && r["test"] == test)
            .map(|r| r["rejected_reports"][reason].as_u64().unwrap_or(0))
            .sum()
    };
    assert_eq!(rejected("cat", "all", "out_of_domain"), 1);
    assert_eq!(rejected("cat", "win", "out_of_domain"), 1);
    assert_eq!(rejected("noise", "all", "non_finite"), 2);
    for r in clean.values() {
        let total: u64 = r["rejected_reports"]
            .as_object()
            .map_or(0, |o| o.values().filter_map(Value::as_u64).sum());
        assert_eq!(total, 0, "the clean run rejects nothing: {r}");
    }

    // Every bad message is on its dead-letter topic, byte for byte, with its reason.
    for (topic, bad) in [
        (&dirty_topics.cat_dead, &bad_cat),
        (&dirty_topics.noise_dead, &bad_noise),
    ] {
        let letters = consume_all(&brokers, topic, bad.len(), Duration::from_secs(60));
        for (m, reason) in bad.iter() {
            let l = letters
                .iter()
                .find(|l| &l.payload == m)
                .unwrap_or_else(|| panic!("{} bytes not dead-lettered on {topic}", m.len()));
            let got = &l.headers["ldpstream-reason"];
            assert!(got.starts_with(reason), "{got} is not {reason}");
            let source = &l.headers["ldpstream-source"];
            assert!(source.contains("dirty-"), "{source}");
        }
    }
}
