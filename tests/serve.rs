//! `ldpstream serve` as a real child process: the simulator source, the HTTP endpoint and
//! its Prometheus metrics, SIGTERM handling, and the Parquet replay source checked against
//! `batch` over the same file.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::{bin, sample, Serve};

fn promtool_check(text: &str) {
    let Ok(mut child) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        eprintln!(
            "\n!!!!!!!! promtool not found: SKIPPING `promtool check metrics`. \
             Install the Debian package `prometheus` (scripts/test.sh does). !!!!!!!!\n"
        );
        return;
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics failed:\n{}{}\n--- metrics ---\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

const SIMULATOR: &str = r#"
[serve]
snapshot_interval = "300ms"
sink = [{ kind = "jsonl", path = "OUT" }]

[[stream]]
name = "sim"
mechanism = { kind = "grr", epsilon = 1.0, domain = 4 }
max_batch_delay = "50ms"
source = { kind = "simulator", rate = 20000.0, p = "uniform", switch_at = "5s", switch_p = [0.55, 0.15, 0.15, 0.15], seed = 3 }

[[stream.test]]
name = "gof_2s"
kind = "gof"
null = "uniform"
window = { kind = "tumbling", size = "2s" }

[[stream.test]]
name = "gof_cumulative"
kind = "gof"
null = "uniform"
window = { kind = "cumulative" }
"#;

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

#[test]
fn serve_replays_parquet_like_batch() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("r.parquet");
    let o = Command::new(bin())
        .args([
            "simulate",
            "--mechanism",
            "grr",
            "--epsilon",
            "1",
            "--domain",
            "6",
            "--p",
            "0.3,0.2,0.2,0.1,0.1,0.1",
            "--n",
            "300000",
            "--seed",
            "9",
            "--out",
        ])
        .arg(&data)
        .args(["--ts-start", "2026-01-01T00:00:00Z", "--rate", "5000"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = dir.path().join("serve.jsonl");
    let config = dir.path().join("replay.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[serve]
snapshot_interval = "100ms"
sink = [{{ kind = "jsonl", path = "{}" }}]
[[stream]]
name = "r"
source = {{ kind = "parquet", paths = ["{}"] }}
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 6 }}
max_batch_rows = 7000
[[stream.test]]
name = "t10s"
kind = "gof"
null = "uniform"
window = {{ kind = "sliding", size = "10s", slide = "5s" }}
[[stream.test]]
name = "all"
kind = "gof"
null = "uniform"
window = {{ kind = "cumulative" }}
"#,
            out.display(),
            data.display()
        ),
    )
    .unwrap();
    let mut serve = Serve::start(&config, &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = serve.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "replay did not finish");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success());
    let finals: Vec<Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["final"] == true)
        .collect();
    let batch = Command::new(bin())
        .args([
            "batch",
            "--config",
            config.to_str().unwrap(),
            "--output",
            "-",
        ])
        .output()
        .unwrap();
    assert!(batch.status.success());
    let expected: Vec<Value> = String::from_utf8(batch.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // 300k reports at 5000/s: 60 s of event time, 13 sliding windows plus the cumulative.
    assert_eq!(expected.len(), 14);
    let key = |r: &Value| (r["test"].to_string(), r["window_start"].to_string());
    let mut got = finals.clone();
    got.sort_by_key(key);
    let mut want = expected.clone();
    want.sort_by_key(key);
    assert_eq!(got, want, "serve's final records differ from batch's");
}

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The last final record per (test, window start, group): after a crash, windows closed
/// between the last checkpoint and the kill are emitted again (sinks are at-least-once),
/// identically.
fn last_finals(records: &[Value]) -> std::collections::BTreeMap<String, Value> {
    records
        .iter()
        .filter(|r| r["final"] == true)
        .map(|r| {
            (
                format!("{}|{}|{}", r["test"], r["window_start"], r["group"]),
                r.clone(),
            )
        })
        .collect()
}

/// kill -9 at three seeded points of a throttled replay, restart from the checkpoint, and
/// let it finish: the final windows must equal `batch` over the same file exactly.
#[test]
fn serve_restores_its_checkpoint_after_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("k.parquet");
    let o = Command::new(bin())
        .args([
            "simulate",
            "--mechanism",
            "grr",
            "--epsilon",
            "1",
            "--domain",
            "8",
            "--p",
            "uniform",
            "--n",
            "600000",
            "--seed",
            "5",
            "--groups",
            "a=250000,b=350000",
            "--out",
        ])
        .arg(&data)
        .args(["--ts-start", "2026-01-01T00:00:00Z", "--rate", "2000"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let config_for = |run: &str| {
        let config = dir.path().join(format!("{run}.toml"));
        std::fs::write(
            &config,
            format!(
                r#"
[serve]
snapshot_interval = "100ms"
checkpoint_interval = "150ms"
{checkpoint_dir}
sink = [{{ kind = "jsonl", path = "{dir}/{run}.jsonl" }}]
[[stream]]
name = "k"
source = {{ kind = "parquet", paths = ["{data}"], rate = 250000.0 }}
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 8 }}
columns = {{ group_by = ["group"] }}
max_batch_rows = 5000
[[stream.test]]
name = "t30s"
kind = "gof"
null = "uniform"
window = {{ kind = "tumbling", size = "30s" }}
[[stream.test]]
name = "all"
kind = "gof"
null = "uniform"
window = {{ kind = "cumulative" }}
"#,
                dir = dir.path().display(),
                data = data.display(),
                // kill3 keeps its state where serve puts it by default: beside the config.
                checkpoint_dir = match run {
                    "kill3" => String::new(),
                    _ => format!("checkpoint_dir = \"{}/{run}-ck\"", dir.path().display()),
                },
            ),
        )
        .unwrap();
        config
    };
    let batch = Command::new(bin())
        .args(["batch", "--config", config_for("batch").to_str().unwrap()])
        .args(["--output", "-"])
        .output()
        .unwrap();
    assert!(batch.status.success());
    let expected: Vec<Value> = String::from_utf8(batch.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Group a covers event times [0, 125 s), b [125 s, 300 s): 5 + 6 tumbling windows and
    // one cumulative window per group.
    assert_eq!(expected.len(), 13);
    let expected = last_finals(&expected);

    let mut seed: u64 = 0x5eed;
    let mut restored_runs = 0;
    for run in ["kill1", "kill2", "kill3"] {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        // The replay takes ~2.4 s; kill somewhere in its first 2 s.
        let kill_after = Duration::from_millis(300 + (seed >> 33) % 1700);
        let config = config_for(run);
        let mut first = Serve::start(&config, &[]);
        std::thread::sleep(kill_after);
        assert!(
            first.child.try_wait().unwrap().is_none(),
            "{run}: the replay finished before the kill at {kill_after:?}"
        );
        let _ = first.child.kill(); // SIGKILL
        let _ = first.child.wait();
        let state_dir = match run {
            "kill3" => format!("{run}.state"),
            _ => format!("{run}-ck"),
        };
        let checkpointed = dir.path().join(state_dir).join("checkpoint.ldpc").exists();
        restored_runs += usize::from(checkpointed);
        let mut second = Serve::start(&config, &[]);
        let status = second.wait(Duration::from_secs(60));
        if run == "kill3" {
            let log = second.stderr.lock().unwrap().clone();
            assert!(
                log.contains("state: ") && log.contains("kill3.state (the default beside"),
                "{log}"
            );
        }
        assert!(status.success(), "{run}: restart exited with {status:?}");
        let got = last_finals(&jsonl(&dir.path().join(format!("{run}.jsonl"))));
        assert_eq!(
            got, expected,
            "{run} (killed after {kill_after:?}, checkpoint written: {checkpointed})"
        );
    }
    assert!(
        restored_runs >= 2,
        "most kills should land after a checkpoint"
    );
}

/// A Parquet stream without `checkpoint_dir` checkpoints into `<config>.state`; where that
/// cannot be written `serve` stops at start naming it, and `durable_state = false` keeps
/// the state in memory, saying so.
#[test]
fn the_default_state_directory_is_beside_the_config_or_refused_or_opted_out() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("d.parquet");
    common::simulate(
        &[
            "--mechanism",
            "grr",
            "--epsilon",
            "1",
            "--domain",
            "4",
            "--p",
            "uniform",
            "--n",
            "2000",
            "--seed",
            "1",
        ],
        &data,
    );
    let write = |name: &str, serve: &str| {
        let config = dir.path().join(format!("{name}.toml"));
        std::fs::write(
            &config,
            format!(
                r#"
[serve]
{serve}
sink = [{{ kind = "jsonl", path = "{out}" }}]
[[stream]]
name = "p"
source = {{ kind = "parquet", paths = ["{data}"] }}
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 4 }}
[[stream.test]]
name = "all"
kind = "gof"
null = "uniform"
window = {{ kind = "cumulative" }}
"#,
                out = dir.path().join(format!("{name}.jsonl")).display(),
                data = data.display()
            ),
        )
        .unwrap();
        config
    };
    let run = |config: &Path| {
        Command::new(bin())
            .args(["serve", "--config", config.to_str().unwrap()])
            .args(["--listen", "127.0.0.1:0", "--duration", "60s"])
            .output()
            .unwrap()
    };

    let durable = write("durable", "");
    let o = run(&durable);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let state = dir.path().join("durable.state");
    assert!(
        err.contains(&format!("state: {}", state.display())),
        "{err}"
    );
    assert!(state.join("checkpoint.ldpc").is_file(), "{err}");
    let check = Command::new(bin())
        .args(["check", "--config", durable.to_str().unwrap()])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(
        said.contains(&format!("serve keeps its state in: {}", state.display())),
        "{said}"
    );

    // A file where the directory should be: refused at start (exit 2), naming the path
    // and both ways out, and no result is written.
    let blocked = write("blocked", "");
    std::fs::write(dir.path().join("blocked.state"), b"not a directory").unwrap();
    let o = run(&blocked);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "state directory {}",
            dir.path().join("blocked.state").display()
        )) && err.contains("serve.checkpoint_dir")
            && err.contains("serve.durable_state = false"),
        "{err}"
    );
    assert!(!dir.path().join("blocked.jsonl").exists());

    let memory = write("memory", "durable_state = false");
    let o = run(&memory);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("state: memory only (serve.durable_state = false)"),
        "{err}"
    );
    assert!(!dir.path().join("memory.state").exists());
}

/// `SIMULATOR` writing into `dir`, with its state in `ck`: the config file's path.
fn simulator_checkpointing_into(dir: &Path, ck: &Path) -> PathBuf {
    let config = dir.join("c.toml");
    std::fs::write(
        &config,
        SIMULATOR
            .replace("OUT", dir.join("o.jsonl").to_str().unwrap())
            .replace(
                "[serve]\n",
                &format!("[serve]\ncheckpoint_dir = \"{}\"\n", ck.display()),
            ),
    )
    .unwrap();
    config
}

/// Two instances on one state directory would overwrite each other's checkpoints: the
/// second is refused (exit 2) naming the directory and the holder, and once the first dies
/// (even by kill -9) the lock is gone with it.
#[test]
fn a_second_serve_on_the_same_state_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let config = simulator_checkpointing_into(dir.path(), &ck);
    let second = || {
        Command::new(bin())
            .args(["serve", "--config", config.to_str().unwrap()])
            .args(["--listen", "127.0.0.1:0", "--duration", "1s"])
            .output()
            .unwrap()
    };
    let mut first = Serve::start(&config, &[]);
    let o = second();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "state directory {} is in use by another serve (pid {})",
            ck.display(),
            first.child.id()
        )),
        "{err}"
    );
    let _ = first.child.kill(); // SIGKILL: no clean shutdown releases anything
    let _ = first.child.wait();
    let o = second();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn a_corrupt_checkpoint_stops_serve_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    std::fs::create_dir_all(&ck).unwrap();
    std::fs::write(ck.join("checkpoint.ldpc"), b"LDPC\x07garbage-garbage").unwrap();
    let config = simulator_checkpointing_into(dir.path(), &ck);
    let o = Command::new(bin())
        .args([
            "serve",
            "--config",
            config.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("checkpoint.ldpc") && err.contains("unsupported checkpoint format version 7"),
        "{err}"
    );
}

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
        common::eventually("3 history points per test", Duration::from_secs(20), || {
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

    let streams: Value = common::eventually("a report rate", Duration::from_secs(10), || {
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

/// A Parquet file of reports at one event time, with group columns `a` and `b` (`a`
/// nullable), one row per report.
fn write_grouped_reports(path: &Path, rows: &[(Option<&str>, &str, u32)]) {
    use arrow::array::{ArrayRef, StringArray, TimestampMillisecondArray, UInt32Array};
    use arrow::datatypes::{Field, Schema};
    use arrow::record_batch::RecordBatch;
    use std::sync::Arc;
    let columns: Vec<(&str, ArrayRef, bool)> = vec![
        (
            "report",
            Arc::new(UInt32Array::from_iter_values(rows.iter().map(|r| r.2))),
            false,
        ),
        (
            "ts",
            Arc::new(
                TimestampMillisecondArray::from(vec![1_767_225_600_000; rows.len()])
                    .with_timezone("UTC"),
            ),
            false,
        ),
        (
            "a",
            Arc::new(StringArray::from_iter(rows.iter().map(|r| r.0))),
            true,
        ),
        (
            "b",
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
            false,
        ),
    ];
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .map(|(n, a, null)| Field::new(*n, a.data_type().clone(), *null))
            .collect::<Vec<_>>(),
    ));
    let batch =
        RecordBatch::try_new(schema.clone(), columns.into_iter().map(|c| c.1).collect()).unwrap();
    let mut w =
        parquet::arrow::ArrowWriter::try_new(std::fs::File::create(path).unwrap(), schema, None)
            .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

/// The label sets of every sample of metric `name` (label values unescaped).
fn label_sets(text: &str, name: &str) -> Vec<std::collections::BTreeMap<String, String>> {
    let prefix = format!("{name}{{");
    text.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|rest| {
            let mut labels = std::collections::BTreeMap::new();
            let mut chars = rest.chars().peekable();
            loop {
                let key: String = chars.by_ref().take_while(|&c| c != '=').collect();
                assert_eq!(chars.next(), Some('"'), "{rest}");
                let mut value = String::new();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => match chars.next() {
                            Some('n') => value.push('\n'),
                            Some(other) => value.push(other),
                            None => break,
                        },
                        '"' => break,
                        c => value.push(c),
                    }
                }
                labels.insert(key.trim_start_matches(',').to_string(), value);
                if chars.peek() == Some(&'}') {
                    break;
                }
            }
            labels
        })
        .collect()
}

/// The parts of a config that keep `serve` running after a bounded replay ends.
const KEEPALIVE: &str = r#"
[[stream]]
name = "keepalive"
mechanism = { kind = "grr", epsilon = 1.0, domain = 4 }
source = { kind = "simulator", rate = 100.0, p = "uniform", seed = 1 }
"#;

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
        common::eventually("4 final results", Duration::from_secs(60), || {
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
            out.display(),
            data.display()
        ),
    )
    .unwrap();
    let serve = Serve::start(&config, &["--duration", "120s"]);
    let api: Vec<Value> = common::eventually("3 private results", Duration::from_secs(60), || {
        let (_, body) = serve.get("/api/v1/results");
        let results: Vec<Value> = serde_json::from_str(&body).ok()?;
        let mine: Vec<Value> = results.into_iter().filter(|r| r["stream"] == "p").collect();
        (mine.len() >= 3).then_some(mine)
    });
    let records: Vec<Value> = common::eventually("3 sink records", Duration::from_secs(30), || {
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

/// Runs `serve` over a config whose sources are all bounded Parquet files, to the end.
fn serve_to_the_end(config: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(bin())
        .args(["serve", "--config", config.to_str().unwrap()])
        .args(["--listen", "127.0.0.1:0"])
        .args(extra)
        .output()
        .unwrap()
}

fn simulate(out: &Path, args: &[&str]) {
    let o = Command::new(bin())
        .arg("simulate")
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Issue 19, item 5: a checkpoint counted under grr with ε = 1 was merged into a config
/// with ε = 3, or with raw over the same d, without a word. The checkpoint now carries
/// each stream's settings, and a change stops `serve` naming it.
#[test]
fn a_checkpoint_is_not_restored_under_another_mechanism() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("r.parquet");
    simulate(
        &data,
        &[
            "--mechanism",
            "grr",
            "--epsilon",
            "1",
            "--domain",
            "6",
            "--n",
            "20000",
            "--seed",
            "9",
            "--ts-start",
            "2026-01-01T00:00:00Z",
            "--rate",
            "5000",
        ],
    );
    let ck = dir.path().join("ck");
    let config = dir.path().join("c.toml");
    let text = format!(
        r#"
[serve]
snapshot_interval = "100ms"
checkpoint_dir = "{}"
sink = [{{ kind = "jsonl", path = "{}" }}]
[[stream]]
name = "r"
source = {{ kind = "parquet", paths = ["{}"] }}
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 6 }}
[[stream.test]]
name = "t1s"
kind = "gof"
null = "uniform"
window = {{ kind = "tumbling", size = "1s" }}
"#,
        ck.display(),
        dir.path().join("o.jsonl").display(),
        data.display()
    );
    std::fs::write(&config, &text).unwrap();
    let o = serve_to_the_end(&config, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(ck.join("checkpoint.ldpc").exists());

    std::fs::write(&config, text.replace("epsilon = 1.0", "epsilon = 3.0")).unwrap();
    let o = serve_to_the_end(&config, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("stream r: mechanism epsilon changed from 1 to 3")
            && err.contains("checkpoint.ldpc aside"),
        "{err}"
    );

    std::fs::write(
        &config,
        text.replace(
            "{ kind = \"grr\", epsilon = 1.0, domain = 6 }",
            "{ kind = \"raw\", domain = 6 }",
        ),
    )
    .unwrap();
    let o = serve_to_the_end(&config, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("mechanism kind changed from grr to raw")
            && err.contains("mechanism epsilon changed from 1 to (none)"),
        "{err}"
    );

    // The unchanged config still restores.
    std::fs::write(&config, &text).unwrap();
    let o = serve_to_the_end(&config, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Issue 19, item 4, in `serve`: the ledger in the checkpoint keeps the budget it was
/// created with, and a renamed stream over the same file does not get a fresh one, unless
/// `--reset-ledger` names it.
#[test]
fn serve_keeps_a_ledger_budget_and_refuses_a_renamed_stream() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("raw.parquet");
    simulate(
        &data,
        &[
            "--mechanism",
            "raw",
            "--domain",
            "20",
            "--n",
            "5000",
            "--seed",
            "5",
        ],
    );
    let ck = dir.path().join("ck");
    let config = dir.path().join("c.toml");
    let text = format!(
        r#"
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

    // A run whose config lacks the private stream keeps its ledger in the checkpoint, so
    // removing the stream first and adding a renamed one later does not reopen the budget.
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
