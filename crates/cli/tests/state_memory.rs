//! Bounded state, end to end: `ldpstream check` prints the estimate, `batch` and `serve`
//! refuse a config over `max_state_memory`, and `max_groups` folds the groups beyond it
//! into `__other__` without losing a report.

use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

fn ldpstream(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ldpstream"))
        .args(args)
        .output()
        .expect("the ldpstream binary runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs `batch` on `cfg`, which must succeed and warn that the input has more groups than
/// `max_groups`; its records.
fn batch_over_max_groups(cfg: &std::path::Path) -> Vec<Value> {
    let out = cfg.with_extension("jsonl");
    let o = ldpstream(&[
        "batch",
        "--config",
        cfg.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("more groups than max_groups"),
        "{}",
        text(&o)
    );
    std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A grouped GenRR stream at d = 2^20 with 1-minute tumbling windows: 8 MiB per sketch,
/// 10,001 groups by default, 3 panes: about 240 GiB, far over any machine's half.
const HUGE: &str = r#"
[[stream]]
name = "wide"
source = { kind = "parquet", paths = ["in.parquet"] }
mechanism = { kind = "grr", epsilon = 1.0, domain = 1048576 }
columns = { group_by = ["group"] }
[[stream.test]]
name = "gof"
kind = "gof"
null = "uniform"
window = { kind = "tumbling", size = "1m" }
"#;

#[test]
fn check_prints_every_term_and_refuses_what_does_not_fit() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("huge.toml");
    std::fs::write(&cfg, HUGE).unwrap();
    let o = ldpstream(&["check", "--config", cfg.to_str().unwrap()]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    for term in [
        "pane store",
        "window snapshot",
        "batch delta",
        "10001 groups",
    ] {
        assert!(t.contains(term), "{term} missing from:\n{t}");
    }
    assert!(
        t.contains("stream \"wide\"") && t.contains("max_state_memory"),
        "{t}"
    );
    // batch and serve refuse it before reading anything (the input does not even exist).
    for cmd in ["batch", "serve"] {
        let o = ldpstream(&[cmd, "--config", cfg.to_str().unwrap()]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {t}");
        assert!(
            t.contains("over max_state_memory") && t.contains("stream \"wide\""),
            "{cmd}: {t}"
        );
    }
    // With a small cap on groups it fits an explicit limit, and check says so.
    let fits = HUGE.replace(
        "columns = { group_by = [\"group\"] }",
        "columns = { group_by = [\"group\"] }\nmax_groups = 4",
    );
    std::fs::write(&cfg, format!("max_state_memory = \"1 GiB\"\n{fits}")).unwrap();
    let o = ldpstream(&["check", "--config", cfg.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("ok: the estimate fits"), "{}", text(&o));
    // A zero limit is a config error naming the key.
    std::fs::write(&cfg, format!("max_state_memory = 0\n{fits}")).unwrap();
    let o = ldpstream(&["check", "--config", cfg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("max_state_memory = 0 B"), "{}", text(&o));
}

/// Issue 30: an `olh` stream holds a pool_size × g table per sketch whatever d, so a large
/// pool over many groups is refused by `check`, `batch` and `serve` (pane store of 10,001
/// groups × 65,536 × 8 cells × 8 B), and the default pool of a few groups fits.
#[test]
fn olh_pool_tables_count_against_max_state_memory() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("olh.toml");
    let config = |pool: u32, groups: u32| {
        format!(
            "max_state_memory = \"1 GiB\"\n[[stream]]\nname = \"pool\"\n\
             source = {{ kind = \"parquet\", paths = [\"{}/none.parquet\"] }}\n\
             mechanism = {{ kind = \"olh\", epsilon = 2.0, domain = 100, pool_size = {pool} }}\n\
             columns = {{ group_by = [\"group\"] }}\nmax_groups = {groups}\n\
             [[stream.test]]\nname = \"gof\"\nkind = \"gof\"\nnull = \"uniform\"\n",
            dir.path().display()
        )
    };
    std::fs::write(&cfg, config(65_536, 10_000)).unwrap();
    for cmd in ["check", "batch", "serve"] {
        let o = ldpstream(&[cmd, "--config", cfg.to_str().unwrap()]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {t}");
        assert!(
            t.contains("max_state_memory") && t.contains("stream \"pool\""),
            "{cmd}: {t}"
        );
    }
    std::fs::write(&cfg, config(1024, 4)).unwrap();
    let o = ldpstream(&["check", "--config", cfg.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("olh null"), "{}", text(&o));
}

/// Issue 44: `check` builds an OLH stream's pool factor, counts it against the memory
/// limit, and warns when the pool costs the unbiased estimate more than 10% variance
/// against fresh hashes, with a pool_size that does not: d = 256 at ε = 0.5 (g = 3) has
/// γ = 255/2048 = 0.125 at the default 1024 (about 1.14×) and needs 2048; at ε = 2
/// (g = 8, γ = 0.036) the default pool is within 10% and nothing is said.
#[test]
fn check_warns_when_the_olh_pool_costs_more_than_ten_percent_variance() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("olh.toml");
    let config = |epsilon: f64| {
        format!(
            "[[stream]]\nname = \"pool\"\n\
             source = {{ kind = \"parquet\", paths = [\"{}/none.parquet\"] }}\n\
             mechanism = {{ kind = \"olh\", epsilon = {epsilon}, domain = 256 }}\n\
             [[stream.test]]\nname = \"gof\"\nkind = \"gof\"\nnull = \"uniform\"\n",
            dir.path().display()
        )
    };
    std::fs::write(&cfg, config(0.5)).unwrap();
    let o = ldpstream(&["check", "--config", cfg.to_str().unwrap()]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("olh pool factor") && t.contains("γ = (d − 1)/(S(g − 1)) = 0.125"),
        "{t}"
    );
    assert!(
        t.contains("warning: the pool costs") && t.contains("pool_size = 2048 keeps it within 10%"),
        "{t}"
    );
    std::fs::write(&cfg, config(2.0)).unwrap();
    let o = ldpstream(&["check", "--config", cfg.to_str().unwrap()]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("olh pool: γ") && !t.contains("warning: the pool costs"),
        "{t}"
    );
}

#[test]
fn groups_beyond_max_groups_are_tested_as_other_and_no_report_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.parquet");
    let o = ldpstream(&[
        "simulate",
        "--mechanism",
        "grr",
        "--epsilon",
        "1",
        "--domain",
        "4",
        "--p",
        "uniform",
        "--groups",
        "a=100,b=100,c=100,d=100,e=100",
        "--seed",
        "3",
        "--out",
        input.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[[stream]]
name = "s"
source = {{ kind = "parquet", paths = [{input:?}] }}
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 4 }}
columns = {{ group_by = ["group"] }}
max_groups = 2
[[stream.test]]
name = "gof"
kind = "gof"
null = "uniform"
"#
        ),
    )
    .unwrap();
    let records = batch_over_max_groups(&cfg);
    let groups: Vec<(String, u64)> = records
        .iter()
        .map(|r| {
            (
                r["group"]["group"].as_str().unwrap_or_default().to_string(),
                r["n"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        groups,
        vec![
            ("__other__".to_string(), 300),
            ("a".to_string(), 100),
            ("b".to_string(), 100)
        ]
    );
}

/// 20 groups at d = 2^24, the largest domain: the count tables are sparse, so `batch`
/// counts their state by the reports its Parquet footers hold (not 20 dense tables of
/// 128 MiB, let alone `max_groups` of them) and runs within a 1 GiB limit; the records say
/// why they carry no per-category estimate. benches/large_domain_memory.sh measures the
/// peak RSS at 10^6 reports per group (benches/RESULTS.md).
#[test]
fn twenty_groups_at_the_largest_domain_run_within_a_small_limit() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.parquet");
    let groups: Vec<String> = (0..20).map(|g| format!("g{g:02}=500")).collect();
    let o = ldpstream(&[
        "simulate",
        "--mechanism",
        "grr",
        "--epsilon",
        "1",
        "--domain",
        "16777216",
        "--p",
        "uniform",
        "--groups",
        &groups.join(","),
        "--seed",
        "5",
        "--out",
        input.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let config = |path: &std::path::Path| {
        format!(
            r#"
max_state_memory = "1 GiB"
[[stream]]
name = "wide"
source = {{ kind = "parquet", paths = [{path:?}] }}
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 16777216 }}
columns = {{ group_by = ["group"] }}
[[stream.test]]
name = "gof"
kind = "gof"
null = "uniform"
"#
        )
    };
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, config(&input)).unwrap();
    let o = ldpstream(&["check", "--config", cfg.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("10000 reports × 16 B per sparse cell"),
        "{}",
        text(&o)
    );
    let out = dir.path().join("out.jsonl");
    let o = ldpstream(&[
        "batch",
        "--config",
        cfg.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let records: Vec<Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 20);
    for r in &records {
        assert_eq!(r["n"], 500, "{r}");
        // 500 reports over 2^24 categories: the χ² law does not hold and simulating it is
        // out of bounds, so the record says inconclusive and why, never a silent p-value.
        assert_eq!(r["inconclusive"], true, "{r}");
        assert!(
            r["inconclusive_reason"]
                .as_str()
                .is_some_and(|s| s.contains("rarest category")),
            "{r}"
        );
        assert_eq!(r["estimate"], serde_json::json!([]), "{r}");
        assert!(
            r["estimate_omitted"]
                .as_str()
                .is_some_and(|s| s.contains("16777216")),
            "{r}"
        );
    }
    // Without the input's reports (the file is not there; what `serve` sees), the dense
    // bound of 10,001 possible groups cannot fit, and check says so by stream and term.
    let missing = dir.path().join("missing.toml");
    std::fs::write(&missing, config(&dir.path().join("nowhere.parquet"))).unwrap();
    let o = ldpstream(&["check", "--config", missing.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("pane store"), "{}", text(&o));
}

/// 200,000 distinct group values against the default `max_groups` (10,000): `batch` and
/// `serve` keep the 10,000 smallest (first-arriving) groups apart and test the other
/// 190,000 as one `__other__` group, lose no report, and `serve` exports the cap's
/// effect: 10,001 result series, `ldpstream_groups` 10,000 and
/// `ldpstream_overflow_reports_total` 190,000.
#[test]
fn two_hundred_thousand_groups_are_capped_without_losing_a_report() {
    const GROUPS: u32 = 200_000;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.parquet");
    crate::common::write_timed_reports(
        &input,
        (0..GROUPS).map(|i| i % 4).collect(),
        vec![1_700_000_000_000; GROUPS as usize],
        Some((0..GROUPS).map(|i| format!("g{i:06}")).collect()),
    );
    let stream = format!(
        r#"
[[stream]]
name = "s"
source = {{ kind = "parquet", paths = [{input:?}] }}
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 4 }}
columns = {{ group_by = ["g"] }}
[[stream.test]]
name = "gof"
kind = "gof"
null = "uniform"
"#
    );
    let expect = |records: &[Value]| {
        let mut n_of: Vec<(String, u64)> = records
            .iter()
            .map(|r| {
                let g = r["group"]["g"].as_str().unwrap_or_default().to_string();
                (g, r["n"].as_u64().unwrap_or_default())
            })
            .collect();
        n_of.sort();
        assert_eq!(n_of.len(), 10_001);
        assert_eq!(n_of.iter().map(|(_, n)| n).sum::<u64>(), u64::from(GROUPS));
        // "_" sorts before "g".
        assert_eq!(n_of[0], ("__other__".to_string(), 190_000));
        for (i, (g, n)) in n_of[1..].iter().enumerate() {
            assert_eq!((g.as_str(), *n), (format!("g{i:06}").as_str(), 1));
        }
    };

    let cfg = dir.path().join("batch.toml");
    std::fs::write(&cfg, &stream).unwrap();
    let records = batch_over_max_groups(&cfg);
    expect(&records);

    // serve replays the same file; a simulator stream keeps it up once the replay ends.
    let cfg = dir.path().join("serve.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[serve]
snapshot_interval = "200ms"
{stream}
[[stream]]
name = "keepalive"
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 4 }}
source = {{ kind = "simulator", rate = 100.0, p = "uniform", seed = 1 }}
"#
        ),
    )
    .unwrap();
    let serve = crate::common::Serve::start(&cfg, &["--duration", "300s"]);
    let finals: Vec<Value> = crate::common::eventually(
        "the replay's final results",
        Duration::from_secs(240),
        || {
            let (_, body) = serve.get("/api/v1/results");
            let results: Vec<Value> = serde_json::from_str(&body).ok()?;
            let finals: Vec<Value> = results
                .into_iter()
                .filter(|r| r["stream"] == "s" && r["final"] == true)
                .collect();
            (!finals.is_empty()).then_some(finals)
        },
    );
    expect(&finals);
    let (_, metrics) = serve.get("/metrics");
    assert_eq!(
        crate::common::sample(&metrics, "ldpstream_groups", r#"stream="s""#),
        Some(10_000.0),
        "{metrics}"
    );
    assert_eq!(
        crate::common::sample(
            &metrics,
            "ldpstream_overflow_reports_total",
            r#"stream="s""#
        ),
        Some(190_000.0)
    );
    let series = metrics
        .lines()
        .filter(|l| l.starts_with("ldpstream_test_statistic{") && l.contains(r#"stream="s""#))
        .count();
    assert_eq!(series, 10_001);
    let log = serve.stderr.lock().unwrap().clone();
    assert!(log.contains("more groups than max_groups"), "{log}");
}

/// `serve` at the largest domain exported its null as one `ldpstream_null_probability`
/// series per category (16.7 million at d = 2^24) and held it for `/api/v1/streams`: a
/// 20-group replay peaked at 15 GB of RSS. Above 65,536 categories neither carries the
/// null (as records omit their estimates), and `serve` stays far below 1 GiB.
#[test]
fn serve_at_the_largest_domain_exports_no_per_category_null() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        r#"
[serve]
snapshot_interval = "200ms"
[[stream]]
name = "wide"
mechanism = { kind = "grr", epsilon = 1.0, domain = 16777216 }
source = { kind = "simulator", rate = 1000.0, p = "uniform", seed = 1 }
[[stream.test]]
name = "gof"
kind = "gof"
null = "uniform"
"#,
    )
    .unwrap();
    let serve = crate::common::Serve::start(&cfg, &["--duration", "120s"]);
    crate::common::eventually("a result", Duration::from_secs(60), || {
        let (_, body) = serve.get("/api/v1/results");
        let results: Vec<Value> = serde_json::from_str(&body).ok()?;
        (!results.is_empty()).then_some(())
    });
    let (_, body) = serve.get("/api/v1/streams");
    let streams: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(streams[0]["name"], "wide", "{streams}");
    assert_eq!(streams[0]["tests"][0]["name"], "gof", "{streams}");
    assert_eq!(streams[0]["tests"][0]["null"], Value::Null, "{streams}");
    let (_, metrics) = serve.get("/metrics");
    assert!(metrics.contains("ldpstream_test_reject{"), "{metrics}");
    assert!(!metrics.contains("ldpstream_null_probability{"));
    let status = std::fs::read_to_string(format!("/proc/{}/status", serve.child.id())).unwrap();
    let rss_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(rss_kib < 1 << 20, "serve holds {rss_kib} KiB");
}
