//! Curator-model (private) tests through `batch`: the privacy ledger is spent, kept and never reopened.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::common::cli::{ldpstream, records, stderr};

/// Curator-model tests through `batch`: the first run spends the raw stream's budget, and
/// a second run over the same data is refused; the ledger file carries the spends over.
#[test]
fn private_tests_spend_the_ledger_until_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("raw.parquet");
    let o = ldpstream(&[
        "simulate",
        "--mechanism",
        "raw",
        "--domain",
        "20",
        "--n",
        "5000",
        "--seed",
        "5",
        "--out",
        file.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[[stream]]
name = "raw"
source = {{ kind = "parquet", paths = ["{}"] }}
mechanism = {{ kind = "raw", domain = 20 }}
budget_epsilon = 1.5
[[stream.test]]
name = "collisions"
kind = "uniformity"
epsilon = 0.5
[[stream.test]]
name = "wrapped"
kind = "identity"
method = "SubsampleAndAggregate"
null = "uniform"
epsilon = 0.5
delta = 0.25
block_size = 1000
"#,
            file.display()
        ),
    )
    .unwrap();
    let ledger = dir.path().join("ledger.json");
    let out = dir.path().join("o.jsonl");
    let run = || {
        ldpstream(&[
            "batch",
            "--config",
            cfg.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
            "--ledger",
            ledger.to_str().unwrap(),
            "--insecure-seed",
            "1",
        ])
    };
    let o = run();
    assert!(o.status.success(), "{}", stderr(&o));
    let recs = records(&out);
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0]["method"], "PrivateCollisions");
    assert_eq!(recs[0]["epsilon_spent"], 0.5);
    assert_eq!(
        recs[0]["estimate"].as_array().unwrap().len(),
        0,
        "raw estimates are never released"
    );
    assert!(recs[0]["p_value"].as_f64().is_some());
    assert_eq!(recs[1]["method"], "SubsampleAndAggregate");
    assert_eq!(recs[1]["blocks"], 8);
    assert_eq!(recs[1]["block_size"], 1000);
    assert!(recs[1]["block"].as_u64().unwrap() < 8);
    assert!((recs[1]["budget_remaining"].as_f64().unwrap() - 0.5).abs() < 1e-12);
    // Second run: 1.0 of 1.5 is spent, so the first 0.5 fits and the second is refused.
    let o = run();
    assert!(o.status.success(), "{}", stderr(&o));
    let recs = records(&out);
    assert_eq!(recs[0]["refused"], Value::Null);
    assert_eq!(recs[1]["refused"], "privacy budget exhausted");
    assert_eq!(recs[1]["reject"], false);
    assert_eq!(recs[1]["statistic"], Value::Null);
    let book: Value = serde_json::from_str(&std::fs::read_to_string(&ledger).unwrap()).unwrap();
    assert_eq!(
        book["streams"]["raw"]["spends"].as_array().unwrap().len(),
        3
    );
    // A raw stream with private tests needs a budget.
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("budget_epsilon = 1.5\n", "");
    std::fs::write(&cfg, text).unwrap();
    let o = run();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("budget_epsilon = (missing)"),
        "{}",
        stderr(&o)
    );
}

/// Issue 19, item 4: raising `budget_epsilon` reopened an exhausted ledger, and renaming
/// the stream started a fresh one over the same file. Both are refused (exit 2) unless
/// `--reset-ledger` names the stream, and the reset is logged.
#[test]
fn a_spent_ledger_is_not_reopened_by_a_new_budget_or_name() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("raw.parquet");
    let o = ldpstream(&[
        "simulate",
        "--mechanism",
        "raw",
        "--domain",
        "20",
        "--n",
        "5000",
        "--seed",
        "5",
        "--out",
        file.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let cfg = dir.path().join("c.toml");
    let text = format!(
        r#"
[[stream]]
name = "raw"
source = {{ kind = "parquet", paths = ["{}"] }}
mechanism = {{ kind = "raw", domain = 20 }}
budget_epsilon = 1.0
[[stream.test]]
name = "collisions"
kind = "uniformity"
epsilon = 1.0
"#,
        file.display()
    );
    let ledger = dir.path().join("ledger.json");
    let out = dir.path().join("o.jsonl");
    let run = |text: &str, extra: &[&str]| {
        std::fs::write(&cfg, text).unwrap();
        let mut args = vec![
            "batch",
            "--config",
            cfg.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
            "--ledger",
            ledger.to_str().unwrap(),
            "--insecure-seed",
            "1",
        ];
        args.extend_from_slice(extra);
        ldpstream(&args)
    };
    let o = run(&text, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(records(&out)[0]["epsilon_spent"], 1.0);
    let book: Value = serde_json::from_str(&std::fs::read_to_string(&ledger).unwrap()).unwrap();
    assert_eq!(book["version"], 3);
    assert_eq!(book["streams"]["raw"]["budget"], 1.0);
    assert!(book["streams"]["raw"]["inputs"][0]
        .as_str()
        .unwrap()
        .contains("raw.parquet"));

    let raised = text.replace("budget_epsilon = 1.0", "budget_epsilon = 3.0");
    let o = run(&raised, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "stream \"raw\": budget_epsilon = 3 but its privacy ledger was created with budget_epsilon = 1"
        ) && stderr(&o).contains("--reset-ledger raw"),
        "{}",
        stderr(&o)
    );
    let renamed = text.replace("name = \"raw\"", "name = \"raw2\"");
    let o = run(&renamed, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("stream \"raw2\"") && stderr(&o).contains("same input"),
        "{}",
        stderr(&o)
    );
    // A misspelt reset resets nothing and says so.
    let o = run(&renamed, &["--reset-ledger", "raw3"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--reset-ledger \"raw3\""),
        "{}",
        stderr(&o)
    );
    // The explicit reset runs, spends afresh, and is logged.
    let o = run(&raised, &["--reset-ledger", "raw"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--reset-ledger: starting a fresh privacy ledger"),
        "{}",
        stderr(&o)
    );
    assert_eq!(records(&out)[0]["refused"], Value::Null);
    assert!((records(&out)[0]["budget_remaining"].as_f64().unwrap() - 2.0).abs() < 1e-12);
}

/// The probe's `ledger_scope` data and config (budget 1.0, each release 0.6), with the
/// config's `ledger` line given; returns the config's path.
fn ledger_scope(dir: &Path, ledger_line: &str) -> PathBuf {
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let file = data.join("raw.parquet");
    let o = ldpstream(&[
        "simulate",
        "--mechanism",
        "raw",
        "--domain",
        "10",
        "--n",
        "2000",
        "--seed",
        "3",
        "--out",
        file.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let cfg = dir.join("priv.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"{ledger_line}
[[stream]]
name = "r"
source = {{ kind = "parquet", paths = ["{}"] }}
mechanism = {{ kind = "raw", domain = 10 }}
budget_epsilon = 1.0
[[stream.test]]
name = "u"
kind = "uniformity"
epsilon = 0.6
"#,
            file.display()
        ),
    )
    .unwrap();
    cfg
}

/// `batch --config cfg` run in `cwd`, records to `out`, with `extra` arguments.
fn batch_in(cwd: &Path, cfg: &Path, out: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ldpstream"))
        .current_dir(cwd)
        .args(["batch", "--config", cfg.to_str().unwrap()])
        .args(["--output", out.to_str().unwrap()])
        .args(extra)
        .output()
        .unwrap()
}

/// Issue 34, item 2 (`ledger_scope`): the ledger defaulted to ./ldpstream-ledger.json, so
/// the same batch run from another directory spent the budget again. The config's `ledger`
/// is one absolute file: the run from the other directory is refused.
#[test]
fn batch_from_another_directory_spends_from_the_same_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.json");
    let cfg = ledger_scope(dir.path(), &format!("ledger = \"{}\"", ledger.display()));
    let out = dir.path().join("o.jsonl");
    let (w1, w2) = (dir.path().join("w1"), dir.path().join("w2"));
    std::fs::create_dir(&w1).unwrap();
    std::fs::create_dir(&w2).unwrap();
    let mut refused = Vec::new();
    for cwd in [&w1, &w1, &w2] {
        let o = batch_in(cwd, &cfg, &out, &[]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(stderr(&o).contains(&format!("privacy ledger: {} (ledger)", ledger.display())));
        refused.push(records(&out)[0]["refused"].clone());
    }
    assert_eq!(
        refused,
        [
            Value::Null,
            Value::from("privacy budget exhausted"),
            Value::from("privacy budget exhausted")
        ]
    );
    let book: Value = serde_json::from_str(&std::fs::read_to_string(&ledger).unwrap()).unwrap();
    assert_eq!(book["streams"]["r"]["spends"].as_array().unwrap().len(), 1);
    for cwd in [&w1, &w2] {
        assert!(
            std::fs::read_dir(cwd).unwrap().next().is_none(),
            "no ledger in the cwd"
        );
    }
    // Another spelling of the same file (a symlinked directory) under a new stream name
    // is the same input: refused.
    std::os::unix::fs::symlink(dir.path().join("data"), dir.path().join("link")).unwrap();
    let renamed = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("name = \"r\"", "name = \"r2\"");
    std::fs::write(&cfg, renamed).unwrap();
    let link = dir.path().join("link/raw.parquet");
    let o = batch_in(&w2, &cfg, &out, &["--input", link.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("same input"), "{}", stderr(&o));
}

/// Issue 34, item 2: no silent default. A budgeted stream with no ledger named is refused
/// by `check`, `batch` and `serve` (exit 2, naming the key), and no ledger file appears
/// in the working directory; a relative `--ledger` is refused too.
#[test]
fn a_budget_without_a_named_ledger_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = ledger_scope(dir.path(), "");
    let out = dir.path().join("o.jsonl");
    let cwd = dir.path().join("cwd");
    std::fs::create_dir(&cwd).unwrap();
    let c = cfg.to_str().unwrap();
    let runs = [
        batch_in(&cwd, &cfg, &out, &[]),
        ldpstream(&["check", "--config", c]),
        ldpstream(&["serve", "--config", c, "--listen", "127.0.0.1:0"]),
    ];
    for o in &runs {
        assert_eq!(o.status.code(), Some(2), "{}", stderr(o));
        assert!(
            stderr(o).contains("ledger = \"/var/lib/ldpstream/ledger.json\"")
                && stderr(o).contains("stream(s) \"r\" have budget_epsilon"),
            "{}",
            stderr(o)
        );
    }
    assert!(std::fs::read_dir(&cwd).unwrap().next().is_none());
    assert!(!out.exists());
    let o = batch_in(&cwd, &cfg, &out, &["--ledger", "l.json"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--ledger l.json: must be an absolute path"));
    let ok = ledger_scope(dir.path(), "ledger = \"/srv/ldp/ledger.json\"");
    let o = ldpstream(&["check", "--config", ok.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("ledger file /srv/ldp/ledger.json (ledger)"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

/// Issue 34 (nit): the ledger file had no checksum. A spend edited down, or a truncated
/// file, is refused naming the file (never read as an empty ledger), and nothing is
/// released.
#[test]
fn a_tampered_or_truncated_ledger_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.json");
    let cfg = ledger_scope(dir.path(), &format!("ledger = \"{}\"", ledger.display()));
    let out = dir.path().join("o.jsonl");
    let o = batch_in(dir.path(), &cfg, &out, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&ledger).unwrap();
    assert!(text.contains("\"epsilon\": 0.6"), "{text}");
    for damaged in [
        text.replace("\"epsilon\": 0.6", "\"epsilon\": 0.0"),
        text[..text.len() / 2].to_string(),
        String::new(),
    ] {
        std::fs::write(&ledger, &damaged).unwrap();
        std::fs::remove_file(&out).unwrap_or_default();
        let o = batch_in(dir.path(), &cfg, &out, &[]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!("privacy ledger {}", ledger.display()))
                && (stderr(&o).contains("checksum mismatch") || stderr(&o).contains("truncated")),
            "{}",
            stderr(&o)
        );
        assert!(!out.exists(), "nothing is released");
    }
}

/// Concurrent jobs on one ledger: each spends from the file as re-read under its lock, so
/// of four batch runs started together over a budget that covers one release, exactly
/// one releases and the ledger keeps exactly one spend.
#[test]
fn concurrent_batch_runs_spend_the_budget_once() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.json");
    let cfg = ledger_scope(dir.path(), &format!("ledger = \"{}\"", ledger.display()));
    let children: Vec<(std::process::Child, PathBuf)> = (0..4)
        .map(|i| {
            let out = dir.path().join(format!("o{i}.jsonl"));
            let child = Command::new(env!("CARGO_BIN_EXE_ldpstream"))
                .args(["batch", "--config", cfg.to_str().unwrap()])
                .args(["--output", out.to_str().unwrap()])
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            (child, out)
        })
        .collect();
    let mut released = 0;
    for (mut child, out) in children {
        assert!(child.wait().unwrap().success());
        released += records(&out)
            .iter()
            .filter(|r| r["refused"].is_null())
            .count();
    }
    assert_eq!(released, 1);
    let book: Value = serde_json::from_str(&std::fs::read_to_string(&ledger).unwrap()).unwrap();
    assert_eq!(book["streams"]["r"]["spends"].as_array().unwrap().len(), 1);
}
