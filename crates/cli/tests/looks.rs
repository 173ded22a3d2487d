//! The window key `looks`: `batch` evaluates a test at every multiple of `looks` in event
//! time and emits a provisional record per look (with `look_end`) before the window's
//! final one, so a monitor can be backtested on history; a sequential test's rejection at
//! any look stands at its final record; and `serve` replaying the same Parquet publishes
//! the same look records.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ldpstream_config::MechanismConfig;
use ldpstream_engine::mechanism::Mechanism;
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::Value;

use crate::common::{write_timed_reports, Serve};

/// 2026-01-01T00:00:00Z.
const T0: i64 = 1_767_225_600_000;
/// 400 reports of category 0 in the first 10 s (25 ms apart), then 5000 uniform ones in
/// the next 50 s (10 ms apart): strong early evidence against uniform that the later
/// reports dilute.
const SKEWED: i64 = 400;
const UNIFORM: i64 = 5000;

fn ts_of(i: i64) -> i64 {
    if i < SKEWED {
        T0 + i * 25
    } else {
        T0 + 10_000 + (i - SKEWED) * 10
    }
}

fn write_data(dir: &Path) -> PathBuf {
    let Mechanism::Grr(grr) = Mechanism::from_config(&MechanismConfig::Grr {
        epsilon: 1.0,
        domain: 10,
    })
    .unwrap() else {
        unreachable!()
    };
    let mut rng = StdRng::seed_from_u64(7);
    let (mut reports, mut ts) = (Vec::new(), Vec::new());
    for i in 0..SKEWED + UNIFORM {
        let x = if i < SKEWED { 0 } else { (i % 10) as u32 };
        reports.push(grr.randomize_with(x, &mut rng).unwrap());
        ts.push(ts_of(i));
    }
    let path = dir.join("reports.parquet");
    write_timed_reports(&path, reports, ts, None);
    path
}

/// The batch config, or with `serve = Some((snapshot_interval, allowed_lateness, rate))`
/// the serve config replaying the same file.
fn write_config(dir: &Path, data: &Path, serve: Option<(&str, &str, &str)>) -> PathBuf {
    let path = dir.join(if serve.is_some() {
        "serve.toml"
    } else {
        "batch.toml"
    });
    let (serve_table, lateness, rate) = match serve {
        Some((interval, lateness, rate)) => (
            format!(
                "[serve]\nsnapshot_interval = \"{interval}\"\nsink = [{{ kind = \"jsonl\", path = \"{}\" }}]\n",
                dir.join("serve.jsonl").display()
            ),
            lateness,
            rate,
        ),
        None => (String::new(), "1h", ""),
    };
    std::fs::write(
        &path,
        format!(
            r#"{serve_table}
[[stream]]
name = "s"
source = {{ kind = "parquet", paths = ["{data}"]{rate} }}
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 10 }}
allowed_lateness = "{lateness}"
[[stream.test]]
name = "minute"
kind = "gof"
null = "uniform"
window = {{ kind = "tumbling", size = "1m", looks = "15s" }}
[[stream.test]]
name = "seq"
kind = "gof"
null = "uniform"
sequential = true
window = {{ kind = "cumulative", looks = "5s" }}
"#,
            data = data.display()
        ),
    )
    .unwrap();
    path
}

fn batch(config: &Path) -> Vec<Value> {
    batch_with_summary(config).0
}

/// The records and the summary `batch` prints on stderr.
fn batch_with_summary(config: &Path) -> (Vec<Value>, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_ldpstream"))
        .args([
            "batch",
            "--config",
            config.to_str().unwrap(),
            "--output",
            "-",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let records = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (records, String::from_utf8_lossy(&o.stderr).into_owned())
}

fn of_test<'a>(records: &'a [Value], test: &str) -> Vec<&'a Value> {
    records.iter().filter(|r| r["test"] == test).collect()
}

fn ms(rfc3339: &Value) -> i64 {
    chrono::DateTime::parse_from_rfc3339(rfc3339.as_str().unwrap())
        .unwrap()
        .timestamp_millis()
}

/// Reports with event time before `t`.
fn reports_before(t: i64) -> u64 {
    (0..SKEWED + UNIFORM).filter(|&i| ts_of(i) < t).count() as u64
}

#[test]
fn batch_emits_a_record_per_look_then_the_final_one() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    let (records, summary) = batch_with_summary(&write_config(dir.path(), &data, None));
    // The summary counts windows, not looks (issue 31: "1 of 121000 groups").
    let finals = records.iter().filter(|r| r["final"] == true).count();
    let looks = records.len() - finals;
    assert!(
        summary.contains(&format!("{finals} final results ("))
            && summary.contains(&format!("and {looks} look records")),
        "{summary}"
    );
    // One one-minute window: one final result, however many looks it had.
    assert!(
        summary.lines().any(
            |l| l.contains("/minute: ") && l.contains(" of 1 final results (windows × groups)")
        ),
        "{summary}"
    );

    // One one-minute window, looked at after 15, 30 and 45 s; its end is the final record.
    let minute = of_test(&records, "minute");
    let finals: Vec<bool> = minute.iter().map(|r| r["final"] == true).collect();
    assert_eq!(finals, [false, false, false, true], "{minute:?}");
    for (k, r) in minute.iter().take(3).enumerate() {
        let end = T0 + 15_000 * (k as i64 + 1);
        assert_eq!(ms(&r["look_end"]), end, "{r}");
        assert_eq!(r["n"], reports_before(end), "{r}");
        assert_eq!(ms(&r["window_start"]), T0);
        assert_eq!(ms(&r["window_end"]), T0 + 60_000);
    }
    assert_eq!(minute[3]["look_end"], Value::Null);
    assert_eq!(minute[3]["n"], SKEWED + UNIFORM);

    // The cumulative window: looks every 5 s up to its last pane, then the final record.
    let seq = of_test(&records, "seq");
    assert_eq!(seq.len(), 12, "{seq:?}");
    for (k, r) in seq.iter().take(11).enumerate() {
        let end = T0 + 5_000 * (k as i64 + 1);
        assert_eq!(ms(&r["look_end"]), end, "{r}");
        assert_eq!(ms(&r["window_end"]), end, "{r}");
        assert_eq!(r["n"], reports_before(end), "{r}");
        assert_eq!(r["final"], false);
    }
    let last = seq[11];
    assert_eq!(last["final"], true);
    assert_eq!(last["n"], SKEWED + UNIFORM);
}

#[test]
fn a_sequential_rejection_at_any_look_stands_at_the_final_record() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    let records = batch(&write_config(dir.path(), &data, None));
    let seq = of_test(&records, "seq");
    let e = |r: &Value| r["e_value"].as_f64().unwrap();
    let best = seq.iter().map(|r| e(r)).fold(0.0, f64::max);
    let last = seq.last().unwrap();
    // The early skew is strong evidence that the later reports dilute: the final sketch
    // alone would not reject, yet the monitor rejected at a look, and that stands.
    assert!(best >= 20.0, "the looks never crossed 1/α: {seq:?}");
    assert!(e(last) < 20.0, "the final sketch alone rejects: {last}");
    assert_eq!(last["reject"], true, "{last}");
    let anytime = last["anytime_p_value"].as_f64().unwrap();
    assert!(
        (anytime - 1.0 / best).abs() <= 1e-12 * anytime,
        "{anytime} vs 1/{best}"
    );
    // Once a look rejected, every later look of the window rejects too.
    let first = seq.iter().position(|r| e(r) >= 20.0).unwrap();
    assert!(seq[first..].iter().all(|r| r["reject"] == true), "{seq:?}");
}

fn looks_of(records: impl IntoIterator<Item = Value>) -> BTreeMap<(String, String), Value> {
    records
        .into_iter()
        .filter(|r| !r["look_end"].is_null())
        .map(|r| ((r["test"].to_string(), r["look_end"].to_string()), r))
        .collect()
}

/// `serve` replaying the file under `settings` publishes exactly batch's look records.
/// `latch` compares the sequential latch too (only without processing-time snapshots,
/// which are looks of their own).
fn serve_matches_batch(settings: (&str, &str, &str), latch: bool) {
    let dir = tempfile::tempdir().unwrap();
    let data = write_data(dir.path());
    let batch_looks = looks_of(batch(&write_config(dir.path(), &data, None)));
    assert_eq!(batch_looks.len(), 3 + 11);

    let mut serve = Serve::start(&write_config(dir.path(), &data, Some(settings)), &[]);
    assert!(serve.wait(Duration::from_secs(120)).success());
    let text = std::fs::read_to_string(dir.path().join("serve.jsonl")).unwrap();
    let serve_looks = looks_of(
        text.lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()),
    );
    assert_eq!(
        serve_looks.keys().collect::<Vec<_>>(),
        batch_looks.keys().collect::<Vec<_>>(),
        "{settings:?}"
    );
    let mut fields = vec![
        "n",
        "statistic",
        "p_value",
        "e_value",
        "window_start",
        "window_end",
        "final",
    ];
    if latch {
        fields.extend(["anytime_p_value", "reject"]);
    }
    for (key, b) in &batch_looks {
        let s = &serve_looks[key];
        for field in &fields {
            assert_eq!(
                s[field], b[field],
                "{settings:?} {key:?} {field}: serve {s} batch {b}"
            );
        }
    }
}

#[test]
fn serve_replaying_the_file_publishes_the_same_looks_as_batch() {
    // Every look taken at the end of input, in one round.
    serve_matches_batch(("1h", "1h", ""), true);
    // A throttled replay with no lateness: the watermark passes the looks one round at a
    // time, between processing-time snapshots every 50 ms.
    serve_matches_batch(("50ms", "0s", ", rate = 10000.0"), false);
}
