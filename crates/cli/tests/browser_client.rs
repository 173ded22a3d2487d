//! The JS client in a real browser: headless Chromium loads a page that runs the README's
//! browser snippet (verbatim) with the client's browser bundle (`npm run build:browser`,
//! one file) over 20,000 true categories of a known distribution and posts the stamped
//! JSON messages to a small collector (clients/js/test/browser/collector.mjs), which
//! writes them to Parquet itself. `batch` reads that file as it is: the GOF test against
//! the true distribution does not reject, and every estimate lies within 4 standard
//! errors of it.
//!
//! Ignored by plain `cargo test`: it needs the built bundle, node and chromium;
//! scripts/js_client_test.sh runs it.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use arrow::array::StringArray;
use ldpstream_config::MechanismConfig;
use ldpstream_engine::mechanism::Mechanism;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
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

/// The fingerprints the collector wrote beside the reports: one per message.
fn fingerprints(parquet: &Path) -> Vec<String> {
    let file = std::fs::File::open(parquet).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.unwrap();
        let column = batch.column_by_name("fingerprint").unwrap();
        let strings = column.as_any().downcast_ref::<StringArray>().unwrap();
        out.extend(strings.iter().map(|f| f.unwrap().to_string()));
    }
    out
}

#[test]
#[ignore = "needs the built JS client, node and chromium: scripts/js_client_test.sh runs it"]
fn browser_client_reports_estimate_the_true_distribution() {
    let dir = tempfile::tempdir().unwrap();
    let root = &Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let answers_file = dir.path().join("answers.txt");
    let answers: Vec<String> = answers().iter().map(u32::to_string).collect();
    std::fs::write(&answers_file, answers.join(",")).unwrap();
    assert!(
        root.join("clients/js/dist/browser/index.js").exists(),
        "no browser bundle: run `npm run build:browser` in clients/js (scripts/js_client_test.sh does)"
    );
    let parquet = dir.path().join("reports.parquet");
    let mut collector = Command::new("node")
        .arg(root.join("clients/js/test/browser/collector.mjs"))
        .args([&answers_file, &parquet])
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

    // Every message was stamped with the stream's fingerprint.
    let config: MechanismConfig =
        serde_json::from_str(r#"{"kind":"grr","epsilon":1.0,"domain":4}"#).unwrap();
    let expected = format!(
        "{:08x}",
        Mechanism::from_config(&config)
            .unwrap()
            .fingerprint()
            .unwrap()
    );
    let stamps = fingerprints(&parquet);
    assert_eq!(stamps.len(), N);
    assert!(stamps.iter().all(|f| *f == expected), "not all {expected}");
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
