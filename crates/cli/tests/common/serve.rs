//! Helpers shared by the modules of tests/serve/.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use super::bin;

pub fn promtool_check(text: &str) {
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

pub const SIMULATOR: &str = r#"
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

pub fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A Parquet file of reports at one event time, with group columns `a` and `b` (`a`
/// nullable), one row per report.
pub fn write_grouped_reports(path: &Path, rows: &[(Option<&str>, &str, u32)]) {
    use arrow_array::RecordBatch;
    use arrow_array::{ArrayRef, StringArray, TimestampMillisecondArray, UInt32Array};
    use arrow_schema::{Field, Schema};
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
pub fn label_sets(text: &str, name: &str) -> Vec<std::collections::BTreeMap<String, String>> {
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
pub const KEEPALIVE: &str = r#"
[[stream]]
name = "keepalive"
mechanism = { kind = "grr", epsilon = 1.0, domain = 4 }
source = { kind = "simulator", rate = 100.0, p = "uniform", seed = 1 }
"#;

/// Runs `serve` over a config whose sources are all bounded Parquet files, to the end.
pub fn serve_to_the_end(config: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(bin())
        .args(["serve", "--config", config.to_str().unwrap()])
        .args(["--listen", "127.0.0.1:0"])
        .args(extra)
        .output()
        .unwrap()
}

pub fn simulate(out: &Path, args: &[&str]) {
    let o = Command::new(bin())
        .arg("simulate")
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
