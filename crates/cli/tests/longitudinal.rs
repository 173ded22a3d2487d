//! The longitudinal kinds (lgrr, losue, lsue) through the binary: `audit` of one report
//! (bounded by ε1) and of one device's many reports of a value (bounded by ε∞), `plan`'s
//! rows and lifetime spend, `simulate --devices` refusing what it cannot simulate, and
//! device reports through `serve` and `merge` giving the records of `batch`.

use std::process::{Command, Output};

fn ldpstream(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ldpstream"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn lower_bound(out: &str) -> f64 {
    out.lines()
        .find(|l| l.starts_with("empirical ε lower bound:"))
        .and_then(|l| l.split_whitespace().nth(4))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no bound in {out}"))
}

fn mechanism(kind: &str) -> Vec<&str> {
    vec![
        "--mechanism",
        kind,
        "--epsilon-perm",
        "2",
        "--epsilon-1",
        "0.5",
        "--domain",
        "3",
    ]
}

/// Issue 47: one report of a longitudinal client is its composed kind at ε1, so the audit
/// of one report approaches ε1 = 0.5 from below (not ε∞ = 2).
#[test]
fn audit_of_one_report_stays_below_epsilon_1() {
    for kind in ["lgrr", "losue", "lsue"] {
        let mut args = vec!["audit"];
        args.extend(mechanism(kind));
        args.extend(["--samples", "200000", "--seed", "3"]);
        let out = stdout(&ldpstream(&args));
        assert!(out.contains("claimed privacy:           ε = 0.5"), "{out}");
        let bound = lower_bound(&out);
        assert!(bound > 0.3 && bound <= 0.5, "{kind}: {out}");
        assert!(!out.contains("VIOLATION"), "{kind}: {out}");
    }
}

/// Issue 47 (notes pitfall 11): 1,000 reports of one value by one device come from one
/// memo, so their statistic's loss stays below ε∞ = 2, far under 1,000·ε1.
#[test]
fn audit_of_a_thousand_reports_of_one_value_stays_below_epsilon_perm() {
    for kind in ["lgrr", "losue", "lsue"] {
        let mut args = vec!["audit"];
        args.extend(mechanism(kind));
        args.extend([
            "--device-reports",
            "1000",
            "--samples",
            "3000",
            "--seed",
            "5",
        ]);
        let out = stdout(&ldpstream(&args));
        assert!(out.contains("ε∞ = 2 (epsilon_perm"), "{out}");
        let bound = lower_bound(&out);
        assert!(bound > 1.0 && bound < 2.0, "{kind}: {out}");
        assert!(!out.contains("VIOLATION"), "{kind}: {out}");
    }
}

/// Pairs from clients/js/scripts/sample_longitudinal.mjs (the JS `LongitudinalClient`, the
/// real CSPRNG): `devices` devices per input, each reporting its value `reports` times.
fn js_longitudinal_pairs(
    dir: &std::path::Path,
    kind: &str,
    devices: &str,
    reports: &str,
    mode: &str,
) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let json = format!(r#"{{"kind":"{kind}","epsilon_perm":2,"epsilon_1":0.5,"domain":3}}"#);
    let sampled = Command::new("node")
        .arg(root.join("clients/js/scripts/sample_longitudinal.mjs"))
        .args([json.as_str(), devices, reports, mode])
        .output()
        .expect("node on PATH");
    assert!(
        sampled.status.success(),
        "{}",
        String::from_utf8_lossy(&sampled.stderr)
    );
    let pairs = dir.join(format!("{kind}-{reports}-{mode}.csv"));
    std::fs::write(&pairs, &sampled.stdout).unwrap();
    pairs.to_str().unwrap().to_string()
}

fn audit_pairs(kind: &str, pairs: &str, reports: &str) -> Output {
    let mut args = vec!["audit"];
    args.extend(mechanism(kind));
    args.extend(["--reports", pairs]);
    if reports != "1" {
        args.extend(["--device-reports", reports]);
    } else {
        // One report is the composed kind at ε1 exactly, and the JS client's CSPRNG has
        // no seed: at the default 95% such a tight claim fails up to 5% of runs.
        args.extend(["--confidence", "0.999"]);
    }
    ldpstream(&args)
}

/// `audit --reports` on the JS client's own longitudinal reports (`LongitudinalClient` over
/// its in-memory store): one report per device stays below ε1 = 0.5, and the statistic of
/// 1,000 reports of one value by one device below ε∞ = 2 while above ε1 (more than one
/// report's worth). A store that forgets its memos makes a client without memo, which the
/// second audit refuses. The Python client's: python/tests/test_longitudinal_audit.py.
#[test]
#[ignore = "needs the built JS client: scripts/js_client_test.sh runs it"]
fn js_longitudinal_client_samples_pass_the_audit() {
    let dir = tempfile::tempdir().unwrap();
    for kind in ["lgrr", "losue", "lsue"] {
        for (devices, reports, low, high) in [("50000", "1", 0.25, 0.5), ("200", "1000", 0.5, 2.0)]
        {
            let pairs = js_longitudinal_pairs(dir.path(), kind, devices, reports, "kept");
            let out = stdout(&audit_pairs(kind, &pairs, reports));
            let bound = lower_bound(&out);
            assert!(
                bound > low && bound < high,
                "{kind}, {reports} reports: {out}"
            );
            assert!(!out.contains("VIOLATION"), "{kind}: {out}");
            println!("JS {kind}, {reports} report(s) per device: lower bound {bound}");
        }
    }
    let pairs = js_longitudinal_pairs(dir.path(), "lgrr", "200", "1000", "forgetful");
    let o = audit_pairs("lgrr", &pairs, "1000");
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("VIOLATION") && lower_bound(&out) > 2.0,
        "{out}"
    );
}

#[test]
fn device_reports_are_refused_for_a_client_without_memo() {
    let o = ldpstream(&[
        "audit",
        "--mechanism",
        "grr",
        "--epsilon",
        "1",
        "--domain",
        "3",
        "--device-reports",
        "10",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("lgrr, losue and lsue, not grr"), "{err}");
}

/// `plan --epsilon-perm --horizon 365d`: the rows are grr/oue/bitflip at ε1, and a year of
/// daily reports with 3 distinct values spends 3·ε∞ = 6 on the values against 365·ε.
#[test]
fn plan_prints_the_rows_at_epsilon_1_and_the_lifetime_spend() {
    let out = stdout(&ldpstream(&[
        "plan",
        "--domain",
        "8",
        "--epsilon",
        "1",
        "--epsilon-perm",
        "2",
        "--horizon",
        "365d",
        "--values",
        "3",
    ]));
    for row in [
        "L-GRR (lgrr)",
        "L-OSUE (losue)",
        "L-SUE (lsue)",
        "T = 365 reports",
        "min(c·ε∞, T·ε1) = 6",
        "T·ε  = 365",
        "T·ε1 = 365",
    ] {
        assert!(out.contains(row), "{row:?} missing from {out}");
    }
    // lgrr's row is grr's at ε1 = 1, d = 8: n·Var(p̂_j) as p_j → 0 is
    // (e^ε + d − 2)/(e^ε − 1)² (docs/STATISTICS.md §1.9).
    let e = std::f64::consts::E;
    let expected = (e + 6.0) / ((e - 1.0) * (e - 1.0));
    let line = out.lines().find(|l| l.starts_with("L-GRR")).unwrap();
    let printed: f64 = line
        .split_whitespace()
        .find_map(|w| w.contains('e').then(|| w.parse().ok()).flatten())
        .unwrap();
    assert!(
        (printed / expected - 1.0).abs() < 1e-5,
        "{printed} vs {expected}: {line}"
    );
}

#[test]
fn plan_refuses_a_horizon_that_is_not_whole_periods_or_without_epsilon_perm() {
    for (args, needle) in [
        (
            vec!["--epsilon-perm", "2", "--horizon", "36h"],
            "a whole number of periods",
        ),
        (vec!["--horizon", "365d"], "give --epsilon-perm too"),
        (vec!["--epsilon-perm", "0.5"], "epsilon_1"),
    ] {
        let mut all = vec!["plan", "--domain", "8", "--epsilon", "1"];
        all.extend(args);
        let o = ldpstream(&all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{all:?}: {err}");
        assert!(err.contains(needle), "{all:?}: {err}");
    }
}

#[test]
fn simulate_refuses_n_for_devices_with_memo_and_devices_for_others() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.parquet");
    let out = out.to_str().unwrap();
    let mut lgrr = vec!["simulate"];
    lgrr.extend(mechanism("lgrr"));
    lgrr.extend(["--p", "uniform", "--n", "10", "--out", out]);
    let o = ldpstream(&lgrr);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("give --devices"), "{err}");
    let o = ldpstream(&[
        "simulate",
        "--mechanism",
        "grr",
        "--epsilon",
        "1",
        "--domain",
        "3",
        "--p",
        "uniform",
        "--devices",
        "10",
        "--out",
        out,
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("it is for lgrr, losue and lsue"), "{err}");
}

fn records(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Records in a fixed order: by test, then window.
fn sorted(mut r: Vec<serde_json::Value>) -> Vec<serde_json::Value> {
    r.sort_by_key(|r| (r["test"].to_string(), r["window_start"].to_string()));
    r
}

/// Issue 47: device reports (a memo per device and value, 3 daily periods, 10% of devices
/// changing value per period) of lgrr and losue in three shares give the same records
/// through `serve` replaying the Parquet files, through `batch --emit-sketches` per share
/// then `merge`, and through one `batch`: windows of one period and of a divisor of it.
#[test]
fn serve_and_merge_of_device_reports_give_the_records_of_batch() {
    for kind in ["lgrr", "losue"] {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        for share in 0..3 {
            let seed = share.to_string();
            let out = data.join(format!("part-{share}.parquet"));
            let mut args = vec!["simulate"];
            args.extend(mechanism(kind));
            args.extend(["--period", "1d", "--p", "0.4,0.3,0.3", "--devices", "4000"]);
            args.extend(["--periods", "3", "--change", "0.1", "--seed", &seed]);
            args.extend(["--ts-start", "2026-01-01T00:00:00Z", "--out"]);
            args.push(out.to_str().unwrap());
            stdout(&ldpstream(&args));
        }
        let sink = dir.path().join("serve.jsonl");
        let config = dir.path().join("devices.toml");
        std::fs::write(
            &config,
            format!(
                r#"
[serve]
snapshot_interval = "100ms"
sink = [{{ kind = "jsonl", path = "{}" }}]
[[stream]]
name = "devices"
source = {{ kind = "parquet", paths = ["{}/*.parquet"] }}
mechanism = {{ kind = "{kind}", epsilon_perm = 2.0, epsilon_1 = 0.5, domain = 3, period = "1d" }}
max_batch_rows = 5000
# serve reads the shares one after the other, each spanning the 3 days: without lateness
# the second share's first days would be behind the watermark (batch has none).
allowed_lateness = "3d"
[[stream.test]]
name = "day"
kind = "gof"
null = [0.4, 0.3, 0.3]
window = {{ kind = "tumbling", size = "1d" }}
[[stream.test]]
name = "quarter_day"
kind = "gof"
null = "uniform"
window = {{ kind = "tumbling", size = "6h" }}
"#,
                sink.display(),
                data.display()
            ),
        )
        .unwrap();
        let cfg = config.to_str().unwrap();
        let batch = sorted(records(&stdout(&ldpstream(&[
            "batch", "--config", cfg, "--output", "-",
        ]))));
        // 3 days: 3 daily windows and 12 quarter days, each with its reports.
        assert_eq!(batch.len(), 15, "{kind}: {batch:?}");
        assert!(
            batch.iter().all(|r| r["n"].as_u64().unwrap() > 0),
            "{kind}: {batch:?}"
        );
        let daily = batch.iter().filter(|r| r["test"] == "day");
        assert!(daily.map(|r| r["n"].as_u64().unwrap()).all(|n| n == 12_000));

        let sketches = dir.path().join("sketches");
        for share in 0..3 {
            let input = data.join(format!("part-{share}.parquet"));
            let o = ldpstream(&[
                "batch",
                "--config",
                cfg,
                "--input",
                input.to_str().unwrap(),
                "--emit-sketches",
                sketches.to_str().unwrap(),
            ]);
            stdout(&o);
        }
        let glob = format!("{}/*.ldpp", sketches.display());
        let merged = sorted(records(&stdout(&ldpstream(&[
            "merge", "--config", cfg, "--input", &glob,
        ]))));
        assert_eq!(merged, batch, "{kind}: merge differs from batch");

        let o = crate::common::serve::serve_to_the_end(&config, &[]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let finals: Vec<_> = crate::common::serve::jsonl(&sink)
            .into_iter()
            .filter(|r| r["final"] == true)
            .collect();
        assert_eq!(sorted(finals), batch, "{kind}: serve differs from batch");
    }
}
