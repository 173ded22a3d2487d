//! `serve`'s Prometheus metrics, status page and history, and group labels that must stay apart.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::serve::{
    jsonl, label_sets, promtool_check, write_grouped_reports, KEEPALIVE, SIMULATOR,
};
use crate::common::{sample, Serve};

#[test]
fn serve_simulator_metrics_show_the_switch() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results.jsonl");
    let config = dir.path().join("sim.toml");
    std::fs::write(&config, SIMULATOR.replace("OUT", out.to_str().unwrap())).unwrap();
    let started = Instant::now();
    let mut serve = Serve::start(&config, &[]);
    assert_eq!(serve.get("/healthz").0, 200);

    // Before the switch (the simulator starts uniform): wait for a snapshot of the
    // tumbling window with a few thousand reports. Its χ²_3 statistic is tiny under the
    // null; 40 has probability 1e-8.
    let mut before = None;
    while started.elapsed() < Duration::from_millis(3500) {
        let (_, m) = serve.get("/metrics");
        if let Some(n) = sample(&m, "ldpstream_window_reports", "test=\"gof_2s\"") {
            if n >= 2000.0 {
                before = sample(&m, "ldpstream_test_statistic", "test=\"gof_2s\"");
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let before = before.expect("a tumbling-window result before the switch");
    assert!(before < 40.0, "uniform reports gave statistic {before}");
    assert_eq!(serve.get("/readyz").0, 200);

    // After the switch at 5 s, a fresh 2 s window holds only skewed reports: with ~20k
    // of them the statistic is in the thousands.
    let mut after = None;
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let (_, m) = serve.get("/metrics");
        let stat = sample(&m, "ldpstream_test_statistic", "test=\"gof_2s\"").unwrap_or(0.0);
        let reject = sample(&m, "ldpstream_test_reject", "test=\"gof_2s\"").unwrap_or(0.0);
        if started.elapsed() > Duration::from_secs(8) && stat > 500.0 && reject == 1.0 {
            after = Some(m);
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let metrics = after.expect("the tumbling window rejects after the switch");
    for name in [
        "ldpstream_reports_total",
        "ldpstream_test_p_value",
        "ldpstream_window_reports",
        "ldpstream_estimate",
        "ldpstream_snapshot_duration_seconds_bucket",
        "ldpstream_reports_late_total",
    ] {
        assert!(
            metrics.lines().any(|l| l.starts_with(name)),
            "{name} missing:\n{metrics}"
        );
    }
    assert!(sample(&metrics, "ldpstream_reports_total", "stream=\"sim\"").unwrap() > 50_000.0);
    // Known label sets are exported at 0 from the start, so the dashboard's rejected panel
    // shows 0 rather than "no data".
    assert_eq!(
        sample(
            &metrics,
            "ldpstream_reports_rejected_total",
            "reason=\"padding_bits_set\""
        ),
        Some(0.0),
        "{metrics}"
    );
    promtool_check(&metrics);

    let (status, body) = serve.get("/api/v1/results");
    assert_eq!(status, 200);
    let results: Vec<Value> = serde_json::from_str(&body).unwrap();
    assert_eq!(results.len(), 2, "{body}");
    assert!(results
        .iter()
        .any(|r| r["test"] == "gof_2s" && r["reject"] == true));

    let status = serve.terminate(Duration::from_secs(30));
    assert!(
        status.success(),
        "serve exited with {status:?} after SIGTERM"
    );
    // The sink holds final results of closed 2 s windows and provisional ones; a closed
    // window's final result is written once, and provisional n never exceeds the final n.
    let records: Vec<Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let finals: Vec<&Value> = records
        .iter()
        .filter(|r| r["test"] == "gof_2s" && r["final"] == true)
        .collect();
    assert!(finals.len() >= 3, "{} final windows", finals.len());
    let mut starts: Vec<&str> = finals
        .iter()
        .map(|r| r["window_start"].as_str().unwrap())
        .collect();
    let total = starts.len();
    starts.dedup();
    assert_eq!(starts.len(), total, "a window had two final results");
    for f in &finals {
        for p in records.iter().filter(|r| {
            r["test"] == "gof_2s" && r["final"] == false && r["window_start"] == f["window_start"]
        }) {
            assert!(p["n"].as_u64() <= f["n"].as_u64());
        }
    }
}

/// `/` is the self-contained status page, and `/api/v1/history` and `/api/v1/streams`
/// give it every configured test's recent p-values and every stream's counters and nulls.
#[test]
fn serve_status_page_and_its_history() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("results.jsonl");
    let config = dir.path().join("sim.toml");
    std::fs::write(&config, SIMULATOR.replace("OUT", out.to_str().unwrap())).unwrap();
    let mut serve = Serve::start(&config, &[]);

    let (status, head, page) = serve.get_with_head("/");
    assert_eq!(status, 200);
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/html; charset=utf-8"),
        "{head}"
    );
    assert!(page.contains("<title>ldpstream status</title>"));
    assert!(page.contains("api/v1/results") && page.contains("api/v1/history"));
    // Self-contained: no script, style, image or font from anywhere else.
    for external in [
        "src=\"http",
        "href=\"http",
        "url(http",
        "@import",
        "src=\"//",
    ] {
        assert!(!page.contains(external), "the page loads {external}…");
    }

    // Each snapshot tick (300 ms) adds a point to each test's series.
    let history: Value =
        crate::common::eventually("3 history points per test", Duration::from_secs(20), || {
            let (status, body) = serve.get("/api/v1/history");
            assert_eq!(status, 200);
            let h: Value = serde_json::from_str(&body).expect("history is JSON");
            let enough = ["gof_2s", "gof_cumulative"].iter().all(|t| {
                h["series"].as_array().unwrap().iter().any(|s| {
                    s["test"] == *t && s["points"].as_array().is_some_and(|p| p.len() >= 3)
                })
            });
            enough.then_some(h)
        });
    assert_eq!(history["horizon_seconds"], 3600);
    assert_eq!(history["max_points_per_series"], 720);
    assert_eq!(history["series_dropped"], 0);
    for s in history["series"].as_array().unwrap() {
        assert_eq!(s["stream"], "sim");
        // As in the records: null for an ungrouped stream.
        assert!(s["group"].is_null(), "{s}");
        let points = s["points"].as_array().unwrap();
        let mut last_t = 0;
        for p in points {
            let t = p["t"].as_i64().unwrap();
            assert!(t >= last_t, "points out of order: {points:?}");
            last_t = t;
            let pv = p["p_value"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&pv), "p-value {pv}");
            assert!(p["reject"].is_boolean() && p["final"].is_boolean());
            assert!(p["e_value"].is_null(), "no test here has an e-value");
        }
    }

    let streams: Value =
        crate::common::eventually("a report rate", Duration::from_secs(10), || {
            let s: Value = serde_json::from_str(&serve.get("/api/v1/streams").1).unwrap();
            s[0]["reports_per_second"].as_f64().map(|_| s)
        });
    let sim = &streams[0];
    assert_eq!(sim["name"], "sim");
    assert_eq!(sim["domain"], 4);
    let tests: Vec<_> = sim["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tests, ["gof_2s", "gof_cumulative"]);
    assert_eq!(
        sim["tests"][0]["null"],
        serde_json::json!([0.25, 0.25, 0.25, 0.25])
    );
    assert!(sim["reports"].as_u64().unwrap() > 0);
    assert_eq!(sim["rejected"], 0);
    assert_eq!(sim["late"], 0);
    // 20,000 reports/s configured; the meter spans snapshot ticks, not wall-clock speed
    // of this machine, so only its order of magnitude is checked.
    let rate = sim["reports_per_second"].as_f64().unwrap();
    assert!(rate > 1000.0 && rate < 200_000.0, "rate {rate}");
    assert!(serve.terminate(Duration::from_secs(30)).success());
}

/// Issue 19, item 7: groups were keyed by an unescaped `k=v,k2=v2` string, so
/// (null, "w") and ("", "w"), and ("x,b=y", "z") and ("x", "y,b=z"), overwrote each
/// other in `/api/v1/results` and `/metrics`. All four must appear in both.
#[test]
fn serve_keeps_groups_apart_whose_joined_labels_collide() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("groups.parquet");
    let groups: [(Option<&str>, &str); 4] = [
        (None, "w"),
        (Some(""), "w"),
        (Some("x,b=y"), "z"),
        (Some("x"), "y,b=z"),
    ];
    let rows: Vec<(Option<&str>, &str, u32)> = groups
        .iter()
        .flat_map(|&(a, b)| (0..40).map(move |i| (a, b, i % 4)))
        .collect();
    write_grouped_reports(&data, &rows);
    let out = dir.path().join("out.jsonl");
    let config = dir.path().join("groups.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[serve]
snapshot_interval = "100ms"
sink = [{{ kind = "jsonl", path = "{}" }}]
[[stream]]
name = "g"
source = {{ kind = "parquet", paths = ["{}"] }}
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 4 }}
columns = {{ group_by = ["a", "b"] }}
[[stream.test]]
name = "t"
kind = "gof"
null = "uniform"
{KEEPALIVE}"#,
            out.display(),
            data.display()
        ),
    )
    .unwrap();
    let serve = Serve::start(&config, &["--duration", "120s"]);
    let results: Vec<Value> =
        crate::common::eventually("4 final results", Duration::from_secs(60), || {
            let (_, body) = serve.get("/api/v1/results");
            let results: Vec<Value> = serde_json::from_str(&body).ok()?;
            let mine: Vec<Value> = results
                .into_iter()
                .filter(|r| r["stream"] == "g" && r["final"] == true)
                .collect();
            (mine.len() >= 4).then_some(mine)
        });
    let mut got: Vec<Value> = results.iter().map(|r| r["group"].clone()).collect();
    let mut want: Vec<Value> = groups
        .iter()
        .map(|(a, b)| serde_json::json!({"a": a, "b": b}))
        .collect();
    got.sort_by_key(Value::to_string);
    want.sort_by_key(Value::to_string);
    assert_eq!(got, want, "/api/v1/results");
    assert!(results.iter().all(|r| r["n"] == 40), "{results:?}");

    let (_, metrics) = serve.get("/metrics");
    for name in ["ldpstream_test_reject", "ldpstream_window_reports"] {
        let mut got: Vec<(String, String)> = label_sets(&metrics, name)
            .into_iter()
            .filter(|l| l["stream"] == "g")
            // An empty label value and an absent label are the same to Prometheus.
            .map(|l| {
                let get = |k: &str| l.get(k).cloned().unwrap_or_default();
                (get("group_a"), get("group_b"))
            })
            .collect();
        got.sort();
        // Null is the empty (absent) label value; "" is "~".
        let want: Vec<(String, String)> = [("", "w"), ("x", "y,b=z"), ("x,b=y", "z"), ("~", "w")]
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(got, want, "{name} in:\n{metrics}");
    }
    promtool_check(&metrics);
    // The sinks had all four all along.
    let finals = jsonl(&out)
        .into_iter()
        .filter(|r| r["stream"] == "g" && r["final"] == true)
        .count();
    assert_eq!(finals, 4);
}
