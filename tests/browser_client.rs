//! The JS client in a real browser: headless Chromium loads a page that runs the README's
//! browser snippet (verbatim) over 20,000 true categories of a known distribution and
//! posts the stamped JSON messages to a small collector
//! (clients/js/test/browser/collector.mjs). The test writes what was collected to Parquet
//! and runs `batch`: the GOF test against the true distribution does not reject, and every
//! estimate lies within 4 standard errors of it.
//!
//! Ignored by plain `cargo test`: it needs the built client, node and chromium;
//! scripts/js_client_test.sh runs it.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use arrow::array::{ArrayRef, UInt32Array};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use serde_json::Value;

const N: usize = 20_000;
const P: [f64; 4] = [0.4, 0.3, 0.2, 0.1];

/// Exact quotas of P, interleaved.
fn answers() -> Vec<u32> {
    (0..N)
        .map(|i| {
            let u = (i * 7919) % N; // 7919 is prime, coprime to N: a permutation
            let mut acc = 0.0;
            P.iter()
                .position(|&p| {
                    acc += p * N as f64;
                    (u as f64) < acc.round()
                })
                .unwrap() as u32
        })
        .collect()
}

fn chromium_dump(url: &str, profile: &Path) -> String {
    let out = Command::new("timeout")
        .args([
            "120",
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
        ])
        .args([
            "--no-first-run",
            "--disable-background-networking",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--virtual-time-budget=30000", "--dump-dom", url])
        .output()
        .expect("chromium (Debian package) on PATH");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn write_reports(collected: &Path, parquet: &Path) -> usize {
    let reports: Vec<u32> = std::fs::read_to_string(collected)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let m: Value = serde_json::from_str(l).unwrap();
            assert!(m["fingerprint"].is_string() && m["ts"].is_i64(), "{l}");
            m["report"].as_u64().unwrap() as u32
        })
        .collect();
    let schema = Arc::new(Schema::new(vec![Field::new(
        "report",
        DataType::UInt32,
        false,
    )]));
    let column: ArrayRef = Arc::new(UInt32Array::from(reports.clone()));
    let batch = RecordBatch::try_new(schema.clone(), vec![column]).unwrap();
    let mut w =
        ArrowWriter::try_new(std::fs::File::create(parquet).unwrap(), schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    reports.len()
}

#[test]
#[ignore = "needs the built JS client, node and chromium: scripts/js_client_test.sh runs it"]
fn browser_client_reports_estimate_the_true_distribution() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let answers_file = dir.path().join("answers.txt");
    let answers: Vec<String> = answers().iter().map(u32::to_string).collect();
    std::fs::write(&answers_file, answers.join(",")).unwrap();
    let collected = dir.path().join("collected.jsonl");
    let mut collector = Command::new("node")
        .arg(root.join("clients/js/test/browser/collector.mjs"))
        .args([&answers_file, &collected])
        .stdout(Stdio::piped())
        .spawn()
        .expect("node on PATH");
    let mut line = String::new();
    BufReader::new(collector.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .strip_prefix("listening ")
        .expect("the collector's port");
    let dom = chromium_dump(
        &format!("http://127.0.0.1:{port}/"),
        &dir.path().join("profile"),
    );
    collector.kill().unwrap();
    collector.wait().unwrap();
    assert!(
        dom.contains(&format!("data-done=\"{N}\"")),
        "the page did not finish: {dom}"
    );

    let parquet = dir.path().join("reports.parquet");
    assert_eq!(write_reports(&collected, &parquet), N);
    let cfg = dir.path().join("browser.toml");
    let p: Vec<String> = P.iter().map(f64::to_string).collect();
    std::fs::write(
        &cfg,
        format!(
            "[[stream]]\nname = \"browser\"\nsource = {{ kind = \"parquet\", paths = [\"{}\"] }}\nmechanism = {{ kind = \"grr\", epsilon = 1.0, domain = 4 }}\n[[stream.test]]\nname = \"truth\"\nkind = \"gof\"\nnull = [{}]\nalpha = 0.001\n",
            parquet.display(),
            p.join(", ")
        ),
    )
    .unwrap();
    let out = dir.path().join("out.jsonl");
    let o = Command::new(env!("CARGO_BIN_EXE_ldpstream"))
        .args([
            "batch",
            "--config",
            cfg.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_str(
        std::fs::read_to_string(&out)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
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
