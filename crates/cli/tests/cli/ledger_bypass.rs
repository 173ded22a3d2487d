//! Issue 43: ways around the privacy ledger through `batch`, each closed. The overflow
//! group gave budget back once `max_groups` grew, two spellings of the ledger path took two
//! locks, and a release whose records could not be written spent anyway.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::cli::{ldpstream, records, stderr};

fn simulate(args: &[&str], out: &Path) {
    let mut all = vec!["simulate"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--out", out.to_str().unwrap()]);
    let o = ldpstream(&all);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// A raw stream over `data` with budget 1.0 and one uniformity test of `epsilon`.
fn config(path: &Path, ledger: &Path, data: &Path, epsilon: f64, extra: &str) {
    std::fs::write(
        path,
        format!(
            "ledger = \"{}\"\n[[stream]]\nname = \"r\"\n\
             source = {{ kind = \"parquet\", paths = [\"{}\"] }}\n\
             mechanism = {{ kind = \"raw\", domain = 8 }}\nbudget_epsilon = 1.0\n{extra}\n\
             [[stream.test]]\nname = \"u\"\nkind = \"uniformity\"\nepsilon = {epsilon}\n",
            ledger.display(),
            data.display()
        ),
    )
    .unwrap();
}

fn spends(ledger: &Path) -> Vec<Value> {
    let book: Value = serde_json::from_str(&std::fs::read_to_string(ledger).unwrap()).unwrap();
    book["streams"]["r"]["spends"].as_array().unwrap().clone()
}

fn batch(cfg: &Path, out: &Path) -> std::process::Output {
    ldpstream(&[
        "batch",
        "--config",
        cfg.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
        "--insecure-seed",
        "1",
    ])
}

/// `ledger_other`: with `max_groups = 2`, group c's reports were charged to
/// `{"group": "__other__"}`; with `max_groups = 10` they were charged to `{"group": "c"}`
/// from zero, and released at 0.6 + 0.6 > 1.0. The overflow group now releases nothing,
/// so c's reports are charged once, and every spend names a real group.
#[test]
fn the_overflow_group_gives_no_budget_back_when_max_groups_grows() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("g.parquet");
    simulate(
        &[
            "--mechanism",
            "raw",
            "--domain",
            "8",
            "--groups",
            "a=3000,b=3000,c=3000",
            "--seed",
            "1",
        ],
        &data,
    );
    let ledger = dir.path().join("ledger.json");
    let out = dir.path().join("o.jsonl");
    let mut released: Vec<(String, f64)> = Vec::new();
    for max_groups in [2, 10] {
        let cfg = dir.path().join(format!("job{max_groups}.toml"));
        let extra = format!("columns = {{ group_by = [\"group\"] }}\nmax_groups = {max_groups}");
        config(&cfg, &ledger, &data, 0.6, &extra);
        let o = batch(&cfg, &out);
        assert!(o.status.success(), "{}", stderr(&o));
        for r in records(&out) {
            let group = r["group"]["group"].as_str().unwrap().to_string();
            if group == "__other__" {
                assert_eq!(r["refused"], "overflow group: not released", "{r}");
                assert!(
                    r["statistic"].is_null() && r["epsilon_spent"].is_null(),
                    "{r}"
                );
            } else if let Some(e) = r["epsilon_spent"].as_f64() {
                released.push((group, e));
            }
        }
    }
    for g in ["a", "b", "c"] {
        let total: f64 = released
            .iter()
            .filter(|(h, _)| h == g)
            .map(|(_, e)| e)
            .sum();
        assert!(
            total <= 1.0 + 1e-12,
            "group {g}: {total} released: {released:?}"
        );
    }
    let charged: Vec<String> = spends(&ledger)
        .iter()
        .map(|s| s["group"]["group"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(charged, ["a", "b", "c"]);
}

/// `ledger_symlink`: configs naming the ledger file and a symlink to it each locked
/// `<name>.lock`, so concurrent runs through both overspent (5 of 10 trials) and lost
/// spends. One run spends 0.4 of 1.0; then three runs through each name start together:
/// one more release fits, never two, and the file records every release.
#[test]
fn the_file_and_a_symlink_to_it_are_one_ledger_under_concurrent_runs() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("raw.parquet");
    simulate(
        &[
            "--mechanism",
            "raw",
            "--domain",
            "8",
            "--n",
            "2000",
            "--seed",
            "1",
        ],
        &data,
    );
    for d in ["var", "etc"] {
        std::fs::create_dir(dir.path().join(d)).unwrap();
    }
    let real = dir.path().join("var/ledger.json");
    let link = dir.path().join("etc/ledger.json");
    let (real_cfg, link_cfg) = (dir.path().join("real.toml"), dir.path().join("link.toml"));
    config(&real_cfg, &real, &data, 0.4, "");
    config(&link_cfg, &link, &data, 0.4, "");
    let o = batch(&real_cfg, &dir.path().join("first.jsonl"));
    assert!(o.status.success(), "{}", stderr(&o));
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let children: Vec<(std::process::Child, PathBuf)> = (0..6)
        .map(|i| {
            let cfg = if i % 2 == 0 { &real_cfg } else { &link_cfg };
            let out = dir.path().join(format!("o{i}.jsonl"));
            let child = Command::new(env!("CARGO_BIN_EXE_ldpstream"))
                .args(["batch", "--config", cfg.to_str().unwrap()])
                .args(["--output", out.to_str().unwrap()])
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            (child, out)
        })
        .collect();
    let mut released = 1;
    for (mut child, out) in children {
        assert!(child.wait().unwrap().success());
        released += records(&out)
            .iter()
            .filter(|r| r["refused"].is_null())
            .count();
    }
    assert_eq!(released, 2, "budget 1.0 covers two releases of 0.4");
    assert_eq!(spends(&real).len(), released);
    assert!(link.is_symlink(), "the saves kept the link");
}

/// `ledger_utf8`, part 3: `batch` saved the spend, then failed to write its records (here
/// to a directory that does not exist): the budget was spent on nothing anyone saw. The
/// records are now staged first, so the run fails before it spends.
#[test]
fn a_release_whose_records_cannot_be_written_spends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("raw.parquet");
    simulate(
        &[
            "--mechanism",
            "raw",
            "--domain",
            "8",
            "--n",
            "2000",
            "--seed",
            "1",
        ],
        &data,
    );
    let ledger = dir.path().join("ledger.json");
    let cfg = dir.path().join("job.toml");
    config(&cfg, &ledger, &data, 0.4, "");
    let o = batch(&cfg, &dir.path().join("first.jsonl"));
    assert!(o.status.success(), "{}", stderr(&o));
    let before = std::fs::read(&ledger).unwrap();
    for bad in ["no/such/dir/o.jsonl", "no/such/dir/o.parquet"] {
        let o = batch(&cfg, &dir.path().join(bad));
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(stderr(&o).contains("no/such/dir"), "{}", stderr(&o));
        assert_eq!(std::fs::read(&ledger).unwrap(), before, "{bad}: no spend");
    }
    let o = batch(&cfg, &dir.path().join("second.jsonl"));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(spends(&ledger).len(), 2);
}
