//! Bad input to the binary: configs, columns, files, crafted Parquet, usage errors and a closed stdout, each an exit code and a message naming the culprit, never a panic.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use arrow_array::builder::{ListBuilder, UInt32Builder};
use arrow_array::{ArrayRef, Int64Array, StringArray, UInt32Array};

use crate::common::cli::{config, ldpstream, records, run_batch, stderr, write_parquet};

#[test]
fn bad_config_exits_2_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), 4, "");
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("epsilon = 1.0", "epsilon = -3.0");
    std::fs::write(&cfg, text).unwrap();
    let o = ldpstream(&["batch", "--config", cfg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("mechanism.epsilon = -3"), "{e}");
    assert!(e.contains("finite number > 0"), "{e}");
}

/// Issue 30: bad `subset` reports in a Parquet `List(UInt32)` column (written as other
/// tools write lists, with nullable items) are counted under their named reasons and never
/// folded: a wrong size, a repeated item, an item out of range, a null row or item.
/// Before the kind was wired, `check` and `batch` refused the config (exit 2).
#[test]
fn bad_subset_reports_are_counted_by_reason() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), 6, "");
    let text = std::fs::read_to_string(&cfg).unwrap().replace(
        "kind = \"grr\", epsilon = 1.0",
        "kind = \"subset\", k = 2, epsilon = 1.0",
    );
    std::fs::write(&cfg, text).unwrap();
    let o = ldpstream(&["check", "--config", cfg.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut list = ListBuilder::new(UInt32Builder::new());
    let mut row = |items: &[Option<u32>]| {
        for x in items {
            list.values().append_option(*x);
        }
        list.append(true);
    };
    for i in 0..200u32 {
        row(&[Some(i % 3), Some(3 + i % 3)]);
    }
    row(&[Some(1)]); // subset_wrong_size
    row(&[Some(0), Some(1), Some(2)]); // subset_wrong_size
    row(&[Some(4), Some(4)]); // subset_duplicate
    row(&[Some(5), Some(6)]); // out_of_domain
    row(&[Some(2), None]); // null
    list.append(false); // null
    write_parquet(
        &dir.path().join("s.parquet"),
        vec![("report", Arc::new(list.finish()) as ArrayRef)],
    );
    let out = dir.path().join("out.jsonl");
    run_batch(&cfg, &out);
    let recs = records(&out);
    let r = &recs[0];
    assert_eq!(r["mechanism"], "subset", "{r}");
    assert_eq!(r["n"], 200, "{r}");
    let rejected = &r["rejected_reports"];
    assert_eq!(rejected["subset_wrong_size"], 2, "{r}");
    assert_eq!(rejected["subset_duplicate"], 1, "{r}");
    assert_eq!(rejected["out_of_domain"], 1, "{r}");
    assert_eq!(rejected["null"], 2, "{r}");
}

#[test]
fn wrong_column_type_exits_1_naming_file_column_and_types() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.parquet");
    write_parquet(
        &file,
        vec![("report", Arc::new(Int64Array::from(vec![1i64, 2, 3])))],
    );
    let o = ldpstream(&[
        "batch",
        "--config",
        config(dir.path(), 4, "").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("bad.parquet") && e.contains("\"report\""), "{e}");
    assert!(e.contains("Int64") && e.contains("UInt32"), "{e}");
}

#[test]
fn missing_column_and_missing_file_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.parquet");
    write_parquet(
        &file,
        vec![("other", Arc::new(StringArray::from(vec!["a"])))],
    );
    let o = ldpstream(&[
        "batch",
        "--config",
        config(dir.path(), 4, "").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("x.parquet") && e.contains("\"report\" not found") && e.contains("other (Utf8)"),
        "{e}"
    );

    let o = ldpstream(&[
        "batch",
        "--config",
        config(dir.path(), 4, "").to_str().unwrap(),
        "--input",
        "/nonexistent/reports.parquet",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("/nonexistent/reports.parquet"),
        "{}",
        stderr(&o)
    );

    let junk = dir.path().join("junk.parquet");
    std::fs::write(&junk, b"not parquet at all").unwrap();
    let o = ldpstream(&[
        "batch",
        "--config",
        config(dir.path(), 4, "").to_str().unwrap(),
        "--input",
        junk.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("junk.parquet") && stderr(&o).contains("not a readable Parquet file"),
        "{}",
        stderr(&o)
    );
}

/// A group value over `max_group_value_bytes` stops the job naming the file, the column,
/// the row and the bound, instead of being copied into every pane (#34 item 7); `check`
/// counts the bound in the state estimate.
#[test]
fn a_group_value_over_the_bound_exits_1_naming_column_row_and_bound() {
    let dir = tempfile::tempdir().unwrap();
    let long = "x".repeat(129);
    write_parquet(
        &dir.path().join("g.parquet"),
        vec![
            ("report", Arc::new(UInt32Array::from(vec![0u32, 1, 2]))),
            (
                "g",
                Arc::new(StringArray::from(vec!["a", "b", long.as_str()])),
            ),
        ],
    );
    let cfg = config(dir.path(), 4, "\"g\"");
    let o = ldpstream(&["batch", "--config", cfg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("g.parquet")
            && e.contains("group column \"g\" has a 129-byte value at row 2")
            && e.contains("max_group_value_bytes = 128"),
        "{e}"
    );
    let o = ldpstream(&["check", "--config", cfg.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("group values") && out.contains("max_group_value_bytes = 128"),
        "{out}"
    );
    let text = std::fs::read_to_string(&cfg).unwrap().replace(
        "[[stream.test]]",
        "max_group_value_bytes = 129\n[[stream.test]]",
    );
    std::fs::write(&cfg, text).unwrap();
    let o = ldpstream(&["batch", "--config", cfg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// A real group named "__other__" is not an overflow: no max_groups warning for it; a
/// real overflow still warns.
#[test]
fn a_real_other_group_does_not_warn_of_overflow() {
    let dir = tempfile::tempdir().unwrap();
    write_parquet(
        &dir.path().join("g.parquet"),
        vec![
            ("report", Arc::new(UInt32Array::from(vec![0u32, 1, 2, 3]))),
            (
                "g",
                Arc::new(StringArray::from(vec!["__other__", "a", "a", "b"])),
            ),
        ],
    );
    let cfg = config(dir.path(), 4, "\"g\"");
    let out = dir.path().join("out.jsonl");
    let o = run_batch(&cfg, &out);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("max_groups"), "{}", stderr(&o));
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("[[stream.test]]", "max_groups = 1\n[[stream.test]]");
    std::fs::write(&cfg, text).unwrap();
    let o = run_batch(&cfg, &out);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("more groups than max_groups"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn usage_errors_exit_2() {
    let o = ldpstream(&[
        "simulate",
        "--mechanism",
        "grr",
        "--epsilon",
        "1",
        "--domain",
        "3",
        "--p",
        "0.5,0.5",
        "--n",
        "10",
        "--out",
        "/tmp/never.parquet",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--p has 2 entries"), "{}", stderr(&o));
    let o = ldpstream(&["frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
}

/// Runs `batch` and `serve`'s replay over a copy of the fixture `tests/data/{fixture}`
/// (as `crafted.parquet`) under `config`; both must exit 1 with an error naming the file
/// and containing `says` (per command), never a panic.
fn crafted_file_is_an_error(
    fixture: &str,
    config: impl Fn(&Path) -> std::path::PathBuf,
    says: [&[&str]; 2],
) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data")
            .join(fixture),
        dir.path().join("crafted.parquet"),
    )
    .unwrap();
    let cfg = config(dir.path());
    let cfg = cfg.to_str().unwrap();
    let serve = [
        "serve",
        "--config",
        cfg,
        "--listen",
        "127.0.0.1:0",
        "--duration",
        "20s",
    ];
    for (args, says) in [
        (&["batch", "--config", cfg][..], says[0]),
        (&serve[..], says[1]),
    ] {
        let o = ldpstream(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.contains("crafted.parquet")
                && says.iter().all(|s| e.contains(s))
                && !e.contains("panicked"),
            "{args:?}: {e}"
        );
    }
}

/// A crafted footer (a column chunk starting at a negative offset) once panicked inside the
/// parquet crate, in `batch` and in `serve`'s Parquet replay alike.
#[test]
fn crafted_parquet_footer_is_an_error_naming_the_file_not_a_panic() {
    let says: &[&str] = &["not inside the file"];
    crafted_file_is_an_error(
        "footer_panic.parquet",
        |dir| config(dir, 16, ""),
        [says, says],
    );
}

/// Found by the `parquet_file` fuzz target: a dictionary key past the end of a
/// FIXED_LEN_BYTE_ARRAY dictionary panics inside parquet 60.1's decoder. The panic is
/// contained: one error naming the file and the row group, no "panicked" line, in `batch`
/// and in `serve`'s replay.
#[test]
fn crafted_dictionary_key_is_an_error_naming_the_file_not_a_panic() {
    let config = |dir: &Path| {
        let cfg = dir.join("c.toml");
        std::fs::write(
            &cfg,
            format!(
                r#"
[[stream]]
name = "s"
source = {{ kind = "parquet", paths = ["{}/*.parquet"] }}
mechanism = {{ kind = "bitflip", epsilon = 1.0, domain = 20 }}
columns = {{ group_by = ["group"] }}
[[stream.test]]
name = "gof"
kind = "gof"
null = "uniform"
"#,
                dir.display()
            ),
        )
        .unwrap();
        cfg
    };
    crafted_file_is_an_error(
        "dictionary_key_panic.parquet",
        config,
        [
            &["row group 0", "could not be decoded"],
            &["the rows after row", "could not be decoded"],
        ],
    );
}

/// `ldpstream batch --config cfg --output out`, whatever its exit status.
fn try_batch(cfg: &Path, out: &Path) -> Output {
    ldpstream(&[
        "batch",
        "--config",
        cfg.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
    ])
}

/// Issue 19 item 10: a file whose every bit-flip report has the wrong FixedSizeBinary
/// width folds nothing. That used to exit 0 with one inconclusive record and nothing on
/// stderr; now the job says so and exits 1, before any record is written.
#[test]
fn batch_exits_1_when_no_report_of_the_input_is_valid() {
    use arrow_array::FixedSizeBinaryArray;
    let dir = tempfile::tempdir().unwrap();
    // d = 16 needs 2-byte reports; these have 3.
    let rows: Vec<[u8; 3]> = (0..500u32).map(|i| [i as u8, 0, 0]).collect();
    let report = FixedSizeBinaryArray::try_from_iter(rows.iter()).unwrap();
    write_parquet(
        &dir.path().join("r.parquet"),
        vec![("report", Arc::new(report) as ArrayRef)],
    );
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[[stream]]
name = "bits"
source = {{ kind = "parquet", paths = ["{}/*.parquet"] }}
mechanism = {{ kind = "bitflip", epsilon = 1.0, domain = 16 }}
[[stream.test]]
name = "u"
kind = "gof"
null = "uniform"
"#,
            dir.path().display()
        ),
    )
    .unwrap();
    let out = dir.path().join("o.jsonl");
    let o = try_batch(&cfg, &out);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("\"bits\"") && err.contains("no report of the input is valid"),
        "{err}"
    );
    assert!(err.contains("bad_size: 500"), "{err}");
    assert!(!out.exists(), "no records for a job that failed");
}

/// Issue 19 item 10: a two-sample test whose `b` label never occurs in its `by` column
/// used to give no record at all and exit 0; now it names the test and the label, exit 1.
#[test]
fn batch_exits_1_when_a_two_sample_label_never_occurs() {
    let dir = tempfile::tempdir().unwrap();
    let n = 2000;
    let report = UInt32Array::from_iter_values((0..n).map(|i| i % 4));
    let group = StringArray::from_iter_values((0..n).map(|i| if i % 2 == 0 { "x" } else { "y" }));
    write_parquet(
        &dir.path().join("r.parquet"),
        vec![
            ("report", Arc::new(report) as ArrayRef),
            ("arm", Arc::new(group) as ArrayRef),
        ],
    );
    let cfg = dir.path().join("c.toml");
    let write_cfg = |b: &str| {
        std::fs::write(
            &cfg,
            format!(
                r#"
[[stream]]
name = "s"
source = {{ kind = "parquet", paths = ["{}/*.parquet"] }}
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 4 }}
columns = {{ group_by = ["arm"] }}
[[stream.test]]
name = "ab"
kind = "two_sample"
by = "arm"
a = "x"
b = "{b}"
"#,
                dir.path().display()
            ),
        )
        .unwrap();
    };
    let out = dir.path().join("o.jsonl");
    write_cfg("y");
    run_batch(&cfg, &out);
    assert_eq!(records(&out).len(), 1);

    std::fs::remove_file(&out).unwrap();
    write_cfg("z");
    let o = try_batch(&cfg, &out);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("test \"ab\"") && err.contains("b = \"z\"") && err.contains("\"arm\""),
        "{err}"
    );
    assert!(!out.exists());
}

/// `ldpstream plan … | head -1`: a reader that closes the pipe early ends the one-shot
/// commands quietly (SIGPIPE, as Unix tools), never with a panic and its backtrace.
#[test]
fn a_closed_stdout_ends_a_one_shot_command_without_a_panic() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_ldpstream"))
        .args(["plan", "--domain", "8", "--epsilon", "1"])
        .args(["--alternative", "paninski:0.2", "--n", "1000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        // 13: SIGPIPE
        o.status.success() || o.status.signal() == Some(13),
        "{:?}: {err}",
        o.status
    );
}
