//! The JS client in a real browser: headless Chromium loads a page that runs the README's
//! browser snippet (verbatim) with the client's browser bundle (`npm run build:browser`,
//! one file) over 20,000 true categories of a known distribution and posts the stamped
//! JSON messages to a small collector (clients/js/test/browser/collector.mjs), which
//! writes them to Parquet itself. `batch` reads that file as it is: the GOF test against
//! the true distribution does not reject, and every estimate lies within 4 standard
//! errors of it.
//!
//! The second test runs the longitudinal client on the browser's memo stores (localStorage,
//! IndexedDB) in two browser processes on one profile: the memo and the period rule survive the
//! restart (clients/js/test/browser/memo_page.mjs serves its page).
//!
//! Ignored by plain `cargo test`: they need the built bundle, node and chromium;
//! scripts/js_client_test.sh runs it.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use arrow_array::StringArray;
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

/// Chromium on `profile`, headless, at `url`, until the memo page posted its outcomes
/// (`lines` receives them), then shut down with SIGTERM as a user quitting the browser
/// would: the next run on the profile is a browser restart.
fn chromium_run(url: &str, profile: &Path, lines: &std::sync::mpsc::Receiver<String>) -> Value {
    let mut browser = Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu"])
        .args([
            "--no-first-run",
            "--disable-background-networking",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium (Debian package) on PATH");
    let line = lines.recv_timeout(std::time::Duration::from_secs(120));
    if let (Ok(text), true) = (&line, url.contains("store=localstorage")) {
        let run: Value = serde_json::from_str(text).unwrap();
        if let Some(memo) = run["memo"].as_str() {
            assert!(
                local_storage_holds(profile, memo),
                "Chromium did not write the memo to {} within 60 s",
                profile.display()
            );
        }
    }
    // Not --dump-dom with a virtual-time budget: virtual time runs ahead of the Web Locks
    // request the store makes, and the page would be dumped before it reported.
    let term = Command::new("kill")
        .args(["-TERM", &browser.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    browser.wait().unwrap();
    serde_json::from_str(&line.expect("the memo page posted no outcome within 120 s")).unwrap()
}

/// Waits (up to 60 s) until the profile's localStorage database holds `text`. Chromium
/// writes localStorage to disk in batches some time after `setItem` returns, and a browser
/// stopped before that forgets the write: the restarted run then began afresh ("the period
/// was forgotten") in one run of the suite. The value is stored as Latin-1 or UTF-16.
/// (IndexedDB needs no wait: a transaction is on disk when it completes.)
fn local_storage_holds(profile: &Path, text: &str) -> bool {
    let dir = profile
        .join("Default")
        .join("Local Storage")
        .join("leveldb");
    let latin1 = text.as_bytes().to_vec();
    let utf16: Vec<u8> = text.encode_utf16().flat_map(u16::to_le_bytes).collect();
    let holds = |bytes: &[u8], needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        let files = std::fs::read_dir(&dir).into_iter().flatten().flatten();
        // A file being compacted away may vanish between the listing and the read.
        if files
            .filter_map(|f| std::fs::read(f.path()).ok())
            .any(|b| holds(&b, &latin1) || holds(&b, &utf16))
        {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    false
}

/// Issue 47: the JS client's browser memo stores (localStorage, IndexedDB) survive a
/// browser restart.
/// Run 1 reports in a period and is refused a second report in it; run 2, a new browser
/// process on the same profile, is still refused in that period, and the next period's
/// report comes from the same memo.
#[test]
#[ignore = "needs the built JS client, node and chromium: scripts/js_client_test.sh runs it"]
fn browser_client_memo_store_survives_a_browser_restart() {
    let dir = tempfile::tempdir().unwrap();
    let root = &Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    assert!(
        root.join("clients/js/dist/browser/index.js").exists(),
        "no browser bundle: run `npm run build:browser` in clients/js (scripts/js_client_test.sh does)"
    );
    let mut page = Command::new("node")
        .arg(root.join("clients/js/test/browser/memo_page.mjs"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("node on PATH");
    let mut out = BufReader::new(page.stdout.take().unwrap()).lines();
    let first = out.next().unwrap().unwrap();
    let port = first
        .trim()
        .strip_prefix("listening ")
        .expect("the page server's port")
        .to_string();
    let (send, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in out.map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    const T0: i64 = 1_767_225_600_000; // 2026-01-01, the start of a day
    const DAY: i64 = 86_400_000;
    for store in ["localstorage", "indexeddb"] {
        let profile = dir.path().join(format!("profile-{store}"));
        let url = |ts: [i64; 2]| {
            format!(
                "http://127.0.0.1:{port}/?ts={}&ts={}&store={store}",
                ts[0], ts[1]
            )
        };
        let one = chromium_run(&url([T0, T0 + 5]), &profile, &lines);
        let two = chromium_run(&url([T0 + 7, T0 + DAY]), &profile, &lines);
        let is_report = |v: &Value| {
            v.as_str()
                .is_some_and(|s| s.len() == 4 && s.bytes().all(|c| c.is_ascii_hexdigit()))
        };
        assert!(is_report(&one["outcomes"][0]), "{store}: {one}");
        assert_eq!(one["outcomes"][1], "same_period", "{store}: {one}");
        assert_eq!(
            two["outcomes"][0], "same_period",
            "{store}: the period was forgotten: {two}"
        );
        assert!(is_report(&two["outcomes"][1]), "{store}: {two}");
        let memo =
            |run: &Value| -> Value { serde_json::from_str(run["memo"].as_str().unwrap()).unwrap() };
        let (m1, m2) = (memo(&one), memo(&two));
        assert_eq!(
            m1["values"], m2["values"],
            "{store}: the memo was drawn again after the restart"
        );
        assert_eq!(
            (m1["reports"].as_u64(), m2["reports"].as_u64()),
            (Some(1), Some(2))
        );
        assert_eq!(m2["last_period"], (T0 + DAY) / DAY);
    }
    page.kill().unwrap();
    page.wait().unwrap();
}
