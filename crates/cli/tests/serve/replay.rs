//! `serve` replaying Parquet gives the records of `batch` over the same file.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{bin, Serve};

#[test]
fn serve_replays_parquet_like_batch() {
    replay_matches_batch("grr", &[], "{ kind = \"grr\", epsilon = 1.0, domain = 6 }");
}

/// Issue 30: an `oue` stream (bit-count sketches, the bit-flip fold) replayed by `serve`
/// ends with the records `batch` gives.
#[test]
fn serve_replays_oue_parquet_like_batch() {
    replay_matches_batch("oue", &[], "{ kind = \"oue\", epsilon = 1.0, domain = 6 }");
}

/// Issue 30: a `subset` stream (List(UInt32) reports, the list fold) replayed by `serve`
/// ends with the records `batch` gives.
#[test]
fn serve_replays_subset_parquet_like_batch() {
    replay_matches_batch(
        "subset",
        &[],
        "{ kind = \"subset\", epsilon = 1.0, domain = 6 }",
    );
}

/// Issue 30: an `olh` stream (pool tables, seed and report columns) replayed by `serve`
/// ends with the records `batch` gives.
#[test]
fn serve_replays_olh_parquet_like_batch() {
    replay_matches_batch(
        "olh",
        &["--pool-size", "128"],
        "{ kind = \"olh\", epsilon = 1.0, domain = 6, pool_size = 128 }",
    );
}

fn replay_matches_batch(kind: &str, flags: &[&str], mechanism: &str) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("r.parquet");
    let o = Command::new(bin())
        .args([
            "simulate",
            "--mechanism",
            kind,
            "--epsilon",
            "1",
            "--domain",
            "6",
            "--p",
            "0.3,0.2,0.2,0.1,0.1,0.1",
            "--n",
            "300000",
            "--seed",
            "9",
            "--out",
        ])
        .arg(&data)
        .args(["--ts-start", "2026-01-01T00:00:00Z", "--rate", "5000"])
        .args(flags)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = dir.path().join("serve.jsonl");
    let config = dir.path().join("replay.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[serve]
snapshot_interval = "100ms"
sink = [{{ kind = "jsonl", path = "{}" }}]
[[stream]]
name = "r"
source = {{ kind = "parquet", paths = ["{}"] }}
mechanism = {mechanism}
max_batch_rows = 7000
[[stream.test]]
name = "t10s"
kind = "gof"
null = "uniform"
window = {{ kind = "sliding", size = "10s", slide = "5s" }}
[[stream.test]]
name = "all"
kind = "gof"
null = "uniform"
window = {{ kind = "cumulative" }}
"#,
            out.display(),
            data.display()
        ),
    )
    .unwrap();
    let mut serve = Serve::start(&config, &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = serve.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "replay did not finish");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success());
    let finals: Vec<Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["final"] == true)
        .collect();
    let batch = Command::new(bin())
        .args([
            "batch",
            "--config",
            config.to_str().unwrap(),
            "--output",
            "-",
        ])
        .output()
        .unwrap();
    assert!(batch.status.success());
    let expected: Vec<Value> = String::from_utf8(batch.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // 300k reports at 5000/s: 60 s of event time, 13 sliding windows plus the cumulative.
    assert_eq!(expected.len(), 14);
    let key = |r: &Value| (r["test"].to_string(), r["window_start"].to_string());
    let mut got = finals.clone();
    got.sort_by_key(key);
    let mut want = expected.clone();
    want.sort_by_key(key);
    assert_eq!(got, want, "serve's final records differ from batch's");
}
