//! Private (curator-model) streams in `serve`: the budget gauge, no exact count released, a ledger that survives a renamed stream, and one ledger file that a copied config, a moved checkpoint or `batch` cannot evade.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::serve::{
    jsonl, label_sets, promtool_check, serve_to_the_end, simulate, write_grouped_reports, KEEPALIVE,
};
use crate::common::{sample, Serve};

/// A curator-model stream in `serve`: each closed one-second window spends ε = 0.5 of the
/// stream's 1.5, windows are disjoint (parallel composition), so the gauge
/// `ldpstream_privacy_budget_remaining` shows 1.0, as do the released records.
#[test]
fn serve_exports_the_privacy_budget_left() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("private.jsonl");
    let config = dir.path().join("private.toml");
    std::fs::write(
        &config,
        format!(
            r#"
ledger = "{}"
[serve]
snapshot_interval = "200ms"
sink = [{{ kind = "jsonl", path = "{}" }}]
[[stream]]
name = "raw"
mechanism = {{ kind = "raw", domain = 20 }}
budget_epsilon = 1.5
allowed_lateness = "0s"
source = {{ kind = "simulator", rate = 20000.0, p = "uniform", seed = 3 }}
[[stream.test]]
name = "collisions"
kind = "uniformity"
epsilon = 0.5
mc_samples = 99
window = {{ kind = "tumbling", size = "1s" }}
"#,
            dir.path().join("ledger.json").display(),
            out.display()
        ),
    )
    .unwrap();
    let mut serve = Serve::start(&config, &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let released = loop {
        let records: Vec<Value> = std::fs::read_to_string(&out)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        if let Some(r) = records
            .iter()
            .find(|r| r["final"] == true && r["epsilon_spent"] == 0.5)
        {
            break r.clone();
        }
        assert!(Instant::now() < deadline, "no private release within 30 s");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(released["method"], "PrivateCollisions");
    assert!((released["budget_remaining"].as_f64().unwrap() - 1.0).abs() < 1e-12);
    assert_eq!(released["estimate"].as_array().unwrap().len(), 0);
    let (_, metrics) = serve.get("/metrics");
    let left = sample(
        &metrics,
        "ldpstream_privacy_budget_remaining",
        "stream=\"raw\"",
    )
    .expect("the budget gauge is exported");
    assert!((left - 1.0).abs() < 1e-12, "budget left {left}");
    promtool_check(&metrics);
    assert!(serve.terminate(Duration::from_secs(30)).success());
}

/// Issue 19, item 3: a curator-model (private) test published each group's exact `n`
/// (a group `rare_user` showed `n: 1`). No exact per-group count of a private stream may
/// appear in the records, `/api/v1/results`, `/metrics` or the log.
#[test]
fn serve_never_releases_a_private_groups_exact_count() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("private.parquet");
    let counts = [("rare_user", 1u32), ("regular", 613), ("power", 1234)];
    let rows: Vec<(Option<&str>, &str, u32)> = counts
        .iter()
        .flat_map(|&(g, n)| (0..n).map(move |i| (Some("web"), g, i % 4)))
        .collect();
    write_grouped_reports(&data, &rows);
    let out = dir.path().join("out.jsonl");
    let config = dir.path().join("private.toml");
    std::fs::write(
        &config,
        format!(
            r#"
ledger = "{}"
[serve]
snapshot_interval = "100ms"
sink = [{{ kind = "jsonl", path = "{}" }}]
[[stream]]
name = "p"
source = {{ kind = "parquet", paths = ["{}"] }}
mechanism = {{ kind = "raw", domain = 4 }}
budget_epsilon = 10.0
columns = {{ group_by = ["a", "b"] }}
[[stream.test]]
name = "uniform"
kind = "uniformity"
epsilon = 0.5
mc_samples = 99
{KEEPALIVE}"#,
            dir.path().join("ledger.json").display(),
            out.display(),
            data.display()
        ),
    )
    .unwrap();
    let serve = Serve::start(&config, &["--duration", "120s"]);
    let api: Vec<Value> =
        crate::common::eventually("3 private results", Duration::from_secs(60), || {
            let (_, body) = serve.get("/api/v1/results");
            let results: Vec<Value> = serde_json::from_str(&body).ok()?;
            let mine: Vec<Value> = results.into_iter().filter(|r| r["stream"] == "p").collect();
            (mine.len() >= 3).then_some(mine)
        });
    let records: Vec<Value> =
        crate::common::eventually("3 sink records", Duration::from_secs(30), || {
            let mine: Vec<Value> = jsonl(&out)
                .into_iter()
                .filter(|r| r["stream"] == "p")
                .collect();
            (mine.len() >= 3).then_some(mine)
        });
    let (_, metrics) = serve.get("/metrics");
    let log = serve.stderr.lock().unwrap().clone();

    let mut exact: Vec<f64> = counts.iter().map(|c| f64::from(c.1)).collect();
    // The stream's total is as private as a group's count: an ungrouped window's n is one.
    exact.push(f64::from(counts.iter().map(|c| c.1).sum::<u32>()));
    fn numbers(v: &Value, out: &mut Vec<f64>) {
        match v {
            Value::Number(n) => out.extend(n.as_f64()),
            Value::Array(a) => a.iter().for_each(|x| numbers(x, out)),
            Value::Object(o) => o.values().for_each(|x| numbers(x, out)),
            _ => {}
        }
    }
    for (what, list) in [("/api/v1/results", &api), ("the jsonl sink", &records)] {
        for r in list.iter() {
            assert_eq!(r["epsilon_spent"], 0.5, "{what}: a release spent: {r}");
            for field in ["n", "n1", "n2"] {
                assert!(r[field].is_null(), "{what}: {field} released: {r}");
            }
            let mut found = Vec::new();
            numbers(r, &mut found);
            // 1 is also a p-value or a flag; the other counts cannot be anything else.
            assert!(
                !found.iter().any(|x| exact[1..].contains(x)),
                "{what}: an exact count in {r}"
            );
        }
    }
    assert!(
        label_sets(&metrics, "ldpstream_window_reports")
            .iter()
            .all(|l| l["stream"] != "p"),
        "a private window's count in /metrics:\n{metrics}"
    );
    for family in [
        "ldpstream_reports_total",
        "ldpstream_reports_late_total",
        "ldpstream_reports_rejected_total",
    ] {
        assert!(
            label_sets(&metrics, family)
                .iter()
                .all(|l| l["stream"] != "p"),
            "{family} of a private stream in /metrics:\n{metrics}"
        );
    }
    for line in metrics.lines().filter(|l| l.contains("stream=\"p\"")) {
        let value: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(!exact[1..].contains(&value), "/metrics: {line}");
    }
    let tokens: Vec<&str> = log.split(|c: char| !c.is_ascii_digit()).collect();
    for n in ["613", "1234", "1848"] {
        assert!(!tokens.contains(&n), "the log holds {n}:\n{log}");
    }
}

/// Issue 19, item 4, in `serve`: the ledger keeps the budget it was created with, and a renamed stream over the same file does not get a fresh one, unless
/// `--reset-ledger` names it.
#[test]
fn serve_keeps_a_ledger_budget_and_refuses_a_renamed_stream() {
    let dir = tempfile::tempdir().unwrap();
    let data = raw_reports(dir.path(), 20, 5000, 5);
    let ck = dir.path().join("ck");
    let config = dir.path().join("c.toml");
    let text = format!(
        r#"
ledger = "{}"
[serve]
snapshot_interval = "100ms"
checkpoint_dir = "{}"
sink = [{{ kind = "jsonl", path = "{}" }}]
[[stream]]
name = "raw"
source = {{ kind = "parquet", paths = ["{}"] }}
mechanism = {{ kind = "raw", domain = 20 }}
budget_epsilon = 1.0
[[stream.test]]
name = "collisions"
kind = "uniformity"
epsilon = 0.5
mc_samples = 99
"#,
        dir.path().join("ledger.json").display(),
        ck.display(),
        dir.path().join("o.jsonl").display(),
        data.display()
    );
    std::fs::write(&config, &text).unwrap();
    let o = serve_to_the_end(&config, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    std::fs::write(
        &config,
        text.replace("budget_epsilon = 1.0", "budget_epsilon = 3.0"),
    )
    .unwrap();
    let o = serve_to_the_end(&config, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "budget_epsilon = 3 but its privacy ledger was created with budget_epsilon = 1"
        ) && err.contains("--reset-ledger raw"),
        "{err}"
    );

    // The ledger file keeps the ledger of a stream a run's config lacks, so removing the
    // stream first and adding a renamed one later does not reopen the budget.
    let without = text
        .replace("name = \"raw\"", "name = \"plain\"")
        .replace("budget_epsilon = 1.0\n", "")
        .replace(
            "name = \"collisions\"\nkind = \"uniformity\"\nepsilon = 0.5",
            "name = \"pearson\"\nkind = \"gof\"\nnull = \"uniform\"",
        );
    std::fs::write(&config, &without).unwrap();
    let o = serve_to_the_end(&config, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let renamed = text.replace("name = \"raw\"", "name = \"raw2\"");
    std::fs::write(&config, &renamed).unwrap();
    let o = serve_to_the_end(&config, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("stream \"raw2\"") && err.contains("same input") && err.contains("\"raw\""),
        "{err}"
    );
    let o = serve_to_the_end(&config, &["--reset-ledger", "nope"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--reset-ledger \"nope\""), "{err}");

    let o = serve_to_the_end(&config, &["--reset-ledger", "raw2"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("--reset-ledger: starting a fresh privacy ledger") && err.contains("raw2"),
        "{err}"
    );
}

/// The probe's `ledger_scope` config: budget 1.0, each release 0.6, over `data`, spending
/// from `ledger`, with records to `out` (and the state beside the config file).
fn ledger_scope_config(ledger: &Path, out: &Path, data: &Path) -> String {
    format!(
        r#"
ledger = "{}"
[serve]
snapshot_interval = "100ms"
sink = [{{ kind = "jsonl", path = "{}" }}]
[[stream]]
name = "r"
source = {{ kind = "parquet", paths = ["{}"] }}
mechanism = {{ kind = "raw", domain = 10 }}
budget_epsilon = 1.0
[[stream.test]]
name = "u"
kind = "uniformity"
epsilon = 0.6
mc_samples = 99
"#,
        ledger.display(),
        out.display(),
        data.display()
    )
}

/// The spends of stream `r` in the ledger file.
fn spends(ledger: &Path) -> usize {
    let book: Value = serde_json::from_str(&std::fs::read_to_string(ledger).unwrap()).unwrap();
    book["streams"]["r"]["spends"].as_array().unwrap().len()
}

/// Whether any record of `out` released a private result (spent and not refused).
fn released(out: &Path) -> bool {
    jsonl(out)
        .iter()
        .any(|r| r["refused"].is_null() && r["epsilon_spent"].as_f64().is_some_and(|e| e > 0.0))
}

/// Issue 34, item 2 (`ledger_scope`): serve kept its ledger in a state directory named
/// after the config file, so a copy of `serve.toml` as `serve2.toml` spent the budget
/// again, and so did following the advice to move the checkpoint directory aside. With
/// one ledger file per deployment, shared with `batch` (run from another directory), the
/// budget is spent once in all.
#[test]
fn a_copied_config_or_a_moved_checkpoint_does_not_spend_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = raw_reports(dir.path(), 10, 2000, 3);
    let ledger = dir.path().join("ledger.json");
    let run = |name: &str, out: &str| {
        let config = dir.path().join(name);
        let out = dir.path().join(out);
        std::fs::write(&config, ledger_scope_config(&ledger, &out, &data)).unwrap();
        let o = serve_to_the_end(&config, &[]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        out
    };
    assert!(
        released(&run("serve.toml", "1.jsonl")),
        "the first run spends"
    );
    let spent = spends(&ledger);
    assert!(spent >= 1);
    assert!(dir.path().join("serve.state").is_dir());
    assert!(!dir.path().join("serve.state/ledgers.json").exists());

    let copied = run("serve2.toml", "2.jsonl");
    assert!(!released(&copied), "{:?}", jsonl(&copied));
    assert!(jsonl(&copied)
        .iter()
        .any(|r| r["refused"] == "privacy budget exhausted"));

    std::fs::rename(
        dir.path().join("serve.state"),
        dir.path().join("serve.state.aside"),
    )
    .unwrap();
    let moved = run("serve.toml", "3.jsonl");
    assert!(!released(&moved), "{:?}", jsonl(&moved));

    let elsewhere = tempfile::tempdir().unwrap();
    let out = dir.path().join("4.jsonl");
    let o = std::process::Command::new(crate::common::bin())
        .current_dir(elsewhere.path())
        .args(["batch", "--config"])
        .arg(dir.path().join("serve.toml"))
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!released(&out), "{:?}", jsonl(&out));
    assert_eq!(
        spends(&ledger),
        spent,
        "no run after the first spent anything"
    );
    assert!(std::fs::read_dir(elsewhere.path())
        .unwrap()
        .next()
        .is_none());
}

/// An older serve kept its ledgers in the checkpoint directory (`ledgers.json` and the
/// checkpoint): they are moved into the ledger file at start, never dropped, and the
/// directory holds no ledger afterwards. Without a ledger file named, serve refuses to
/// start rather than lose them.
#[test]
fn ledgers_of_an_old_state_directory_move_into_the_ledger_file() {
    let dir = tempfile::tempdir().unwrap();
    let data = raw_reports(dir.path(), 10, 2000, 3);
    let state = dir.path().join("serve.state");
    std::fs::create_dir(&state).unwrap();
    std::fs::write(
        state.join("ledgers.json"),
        r#"{"version":2,"streams":{"r":{"version":1,"budget":1.0,"spends":[{"start":null,"end":null,"epsilon":0.6,"label":"r/u"}]}}}"#,
    )
    .unwrap();
    let ledger = dir.path().join("ledger.json");
    let out = dir.path().join("o.jsonl");
    let config = dir.path().join("serve.toml");
    let text = ledger_scope_config(&ledger, &out, &data);
    let without_ledger = text
        .replace(&format!("ledger = \"{}\"\n", ledger.display()), "")
        .replace("budget_epsilon = 1.0\n", "")
        .replace(
            "name = \"u\"\nkind = \"uniformity\"\nepsilon = 0.6",
            "name = \"g\"\nkind = \"gof\"\nnull = \"uniform\"",
        )
        .replace(
            "\"raw\", domain = 10",
            "\"grr\", epsilon = 1.0, domain = 10",
        );
    std::fs::write(&config, &without_ledger).unwrap();
    let o = serve_to_the_end(&config, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("holds the privacy ledgers of stream(s) \"r\"") && err.contains("ledger = "),
        "{err}"
    );
    assert!(state.join("ledgers.json").exists());

    std::fs::write(&config, &text).unwrap();
    let o = serve_to_the_end(&config, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        !released(&out),
        "the imported 0.6 leaves no room: {:?}",
        jsonl(&out)
    );
    assert!(!state.join("ledgers.json").exists());
    let book: Value = serde_json::from_str(&std::fs::read_to_string(&ledger).unwrap()).unwrap();
    assert_eq!(book["streams"]["r"]["spends"][0]["epsilon"], 0.6);
    assert!(book["imported"][0]
        .as_str()
        .unwrap()
        .contains("serve.state"));
}

/// A ledger inside the checkpoint directory would go with it when it is moved aside.
#[test]
fn a_ledger_inside_the_checkpoint_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = raw_reports(dir.path(), 10, 100, 3);
    let config = dir.path().join("serve.toml");
    let ledger = dir.path().join("serve.state").join("ledger.json");
    std::fs::write(
        &config,
        ledger_scope_config(&ledger, &dir.path().join("o.jsonl"), &data),
    )
    .unwrap();
    let o = serve_to_the_end(&config, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("is inside the checkpoint directory"), "{err}");
}

/// Issue 43 (ledger_symlink): the check resolved only the ledger's directory, so a ledger
/// named by a symlink outside the checkpoint directory, pointing at a file inside it, passed.
#[test]
fn a_symlink_to_a_ledger_inside_the_checkpoint_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = raw_reports(dir.path(), 10, 100, 3);
    let config = dir.path().join("serve.toml");
    let state = dir.path().join("serve.state");
    std::fs::create_dir(&state).unwrap();
    std::fs::write(state.join("ledger.json"), b"").unwrap();
    let ledger = dir.path().join("ledger.json");
    std::os::unix::fs::symlink(state.join("ledger.json"), &ledger).unwrap();
    std::fs::write(
        &config,
        ledger_scope_config(&ledger, &dir.path().join("o.jsonl"), &data),
    )
    .unwrap();
    let o = serve_to_the_end(&config, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("is inside the checkpoint directory"), "{err}");
}

/// `raw.parquet` in `dir`: `n` raw (curator-model) reports over `domain` categories.
fn raw_reports(dir: &Path, domain: u32, n: u32, seed: u32) -> PathBuf {
    let data = dir.join("raw.parquet");
    let (domain, n, seed) = (domain.to_string(), n.to_string(), seed.to_string());
    let args = [
        "--mechanism",
        "raw",
        "--domain",
        &domain,
        "--n",
        &n,
        "--seed",
        &seed,
    ];
    simulate(&data, &args);
    data
}
