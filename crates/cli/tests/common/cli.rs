//! Helpers shared by the modules of tests/cli/.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use arrow_array::ArrayRef;
use arrow_array::RecordBatch;
use arrow_schema::{Field, Schema};
use parquet::arrow::ArrowWriter;
use serde_json::Value;

pub fn ldpstream(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ldpstream"))
        .args(args)
        .output()
        .expect("the ldpstream binary runs")
}

/// `ldpstream batch --config cfg --output out`, which must succeed.
pub fn run_batch(cfg: &Path, out: &Path) -> Output {
    let o = ldpstream(&[
        "batch",
        "--config",
        cfg.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    o
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn write_parquet(path: &Path, columns: Vec<(&str, ArrayRef)>) {
    let fields: Vec<Field> = columns
        .iter()
        .map(|(name, a)| Field::new(*name, a.data_type().clone(), true))
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(
        schema.clone(),
        columns.into_iter().map(|(_, a)| a).collect(),
    )
    .unwrap();
    let mut w = ArrowWriter::try_new(std::fs::File::create(path).unwrap(), schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

pub fn config(dir: &Path, domain: u32, group_by: &str) -> std::path::PathBuf {
    let path = dir.join("c.toml");
    std::fs::write(
        &path,
        format!(
            r#"
[[stream]]
name = "s"
source = {{ kind = "parquet", paths = ["{}/*.parquet"] }}
mechanism = {{ kind = "grr", epsilon = 1.0, domain = {domain} }}
columns = {{ report = "report", group_by = [{group_by}] }}
[[stream.test]]
name = "uniform_gof"
kind = "gof"
null = "uniform"
alpha = 0.05
"#,
            dir.display()
        ),
    )
    .unwrap();
    path
}

pub fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
