//! `batch` over event-time windows: tumbling, sliding and cumulative results from a
//! Parquet file with a `ts` column, checked against counts known by construction.

use std::process::{Command, Output};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_array::{ArrayRef, UInt32Array};
use arrow_schema::{Field, Schema};
use parquet::arrow::ArrowWriter;
use serde_json::Value;

use crate::common::write_timed_reports;

fn ldpstream(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ldpstream"))
        .args(args)
        .output()
        .expect("the ldpstream binary runs")
}

/// 2026-01-01T00:00:00Z in milliseconds.
const T0: i64 = 1_767_225_600_000;

#[test]
fn batch_cuts_tumbling_sliding_and_cumulative_windows() {
    let dir = tempfile::tempdir().unwrap();
    // Minute m (0..5) holds 100·(m+1) reports, written out of time order across two files
    // so that the result cannot depend on read order.
    let (mut a, mut b) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
    for m in (0..5i64).rev() {
        for i in 0..100 * (m + 1) {
            let target = if i % 2 == 0 { &mut a } else { &mut b };
            target.0.push((i % 4) as u32);
            target.1.push(T0 + m * 60_000 + (i * 37) % 60_000);
        }
    }
    write_timed_reports(&dir.path().join("a.parquet"), a.0, a.1, None);
    write_timed_reports(&dir.path().join("b.parquet"), b.0, b.1, None);
    let config = dir.path().join("c.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[[stream]]
name = "s"
source = {{ kind = "parquet", paths = ["{}/*.parquet"] }}
mechanism = {{ kind = "raw", domain = 4 }}
[[stream.test]]
name = "tumbling"
kind = "gof"
null = "uniform"
window = {{ kind = "tumbling", size = "2m" }}
[[stream.test]]
name = "sliding"
kind = "gof"
null = "uniform"
window = {{ kind = "sliding", size = "2m", slide = "1m" }}
[[stream.test]]
name = "cumulative"
kind = "gof"
null = "uniform"
window = {{ kind = "cumulative" }}
"#,
            dir.path().display()
        ),
    )
    .unwrap();
    let o = ldpstream(&[
        "batch",
        "--config",
        config.to_str().unwrap(),
        "--output",
        "-",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let recs: Vec<Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |test: &str| -> Vec<(String, String, u64)> {
        recs.iter()
            .filter(|r| r["test"] == test)
            .map(|r| {
                assert_eq!(r["final"], true);
                assert_eq!(r["late_reports"], 0);
                (
                    r["window_start"].as_str().unwrap().to_string(),
                    r["window_end"].as_str().unwrap().to_string(),
                    r["n"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let t = |m: u32| format!("2026-01-01T00:{m:02}:00Z");
    // Minutes hold 100, 200, 300, 400, 500 reports.
    assert_eq!(
        of("tumbling"),
        vec![(t(0), t(2), 300), (t(2), t(4), 700), (t(4), t(6), 500)]
    );
    assert_eq!(
        of("sliding"),
        vec![
            ("2025-12-31T23:59:00Z".to_string(), t(1), 100),
            (t(0), t(2), 300),
            (t(1), t(3), 500),
            (t(2), t(4), 700),
            (t(3), t(5), 900),
            (t(4), t(6), 500)
        ]
    );
    assert_eq!(of("cumulative"), vec![(t(0), t(5), 1500)]);
}

#[test]
fn a_file_without_event_time_is_one_global_window() {
    let dir = tempfile::tempdir().unwrap();
    let columns: Vec<(&str, ArrayRef)> = vec![(
        "report",
        Arc::new(UInt32Array::from(vec![0u32, 1, 2, 3, 0, 1])),
    )];
    let schema = Arc::new(Schema::new(vec![Field::new(
        "report",
        arrow_schema::DataType::UInt32,
        false,
    )]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        columns.into_iter().map(|(_, a)| a).collect(),
    )
    .unwrap();
    let path = dir.path().join("x.parquet");
    let mut w = ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let config = dir.path().join("c.toml");
    std::fs::write(
        &config,
        format!(
            "[[stream]]\nname = \"s\"\nsource = {{ kind = \"parquet\", paths = [\"{}\"] }}\nmechanism = {{ kind = \"raw\", domain = 4 }}\n[[stream.test]]\nname = \"t\"\nkind = \"gof\"\nnull = \"uniform\"\nwindow = {{ kind = \"tumbling\", size = \"1h\" }}\n",
            path.display()
        ),
    )
    .unwrap();
    let o = ldpstream(&[
        "batch",
        "--config",
        config.to_str().unwrap(),
        "--output",
        "-",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let recs: Vec<Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["window_start"], Value::Null);
    assert_eq!(recs[0]["n"], 6);
}
