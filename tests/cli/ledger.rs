//! Curator-model (private) tests through `batch`: the privacy ledger is spent, kept and never reopened.

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
    assert_eq!(book["version"], 2);
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
