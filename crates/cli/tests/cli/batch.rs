//! `batch` end to end: records, Parquet output, per-group and per-window results, Monte Carlo calibration, row groups and rejected reports.

use std::path::Path;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_array::{ArrayRef, StringArray, UInt32Array};
use arrow_schema::{Field, Schema};
use parquet::arrow::ArrowWriter;
use serde_json::Value;

use crate::common::cli::{config, ldpstream, records, run_batch, stderr, write_parquet};

/// Known counts [260, 240, 255, 245] plus three out-of-domain reports give the scipy
/// numbers of `stats::local_exp_gof`'s first case:
/// scipy.stats.chisquare([260,240,255,245], f_exp=[250]*4) -> (1.0, 0.8012519569012009).
#[test]
fn batch_writes_the_expected_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut values = Vec::new();
    for (v, c) in [(0u32, 260), (1, 240), (2, 255), (3, 245)] {
        values.extend(std::iter::repeat_n(v, c));
    }
    values.extend([4, 7, 99]);
    // Two files, so the glob, the multi-file fold and the merge are all exercised.
    let (a, b) = values.split_at(400);
    write_parquet(
        &dir.path().join("a.parquet"),
        vec![("report", Arc::new(UInt32Array::from(a.to_vec())))],
    );
    write_parquet(
        &dir.path().join("b.parquet"),
        vec![("report", Arc::new(UInt32Array::from(b.to_vec())))],
    );
    let out = dir.path().join("out.jsonl");
    let o = ldpstream(&[
        "batch",
        "--config",
        config(dir.path(), 4, "").to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let recs = records(&out);
    assert_eq!(recs.len(), 1);
    let r = &recs[0];
    assert_eq!(r["stream"], "s");
    assert_eq!(r["test"], "uniform_gof");
    assert_eq!(r["method"], "LocalExpGOF");
    assert_eq!(r["group"], Value::Null);
    assert_eq!(r["window_start"], Value::Null);
    assert_eq!(r["n"], 1000);
    assert_eq!(r["df"], 3);
    assert!((r["statistic"].as_f64().unwrap() - 1.0).abs() < 1e-9);
    assert!((r["p_value"].as_f64().unwrap() - 0.8012519569012009).abs() < 1e-9);
    assert_eq!(r["reject"], false);
    assert_eq!(r["alpha"], 0.05);
    assert_eq!(r["rejected_reports"]["out_of_domain"], 3);
    assert_eq!(r["estimate"].as_array().unwrap().len(), 4);
    assert_eq!(r["std_error"].as_array().unwrap().len(), 4);
    // GenRR ε = 1, d = 4: p̂_0 = (0.26 - ρ)/γ with ρ = 1/(3+e), γ = (e-1)/(3+e).
    let e = 1f64.exp();
    let expected0 = (0.26 - 1.0 / (3.0 + e)) / ((e - 1.0) / (3.0 + e));
    assert!((r["estimate"][0].as_f64().unwrap() - expected0).abs() < 1e-12);
}

#[test]
fn batch_output_ending_in_parquet_writes_parquet() {
    use arrow_array::{Array, Float64Array, UInt64Array};
    let dir = tempfile::tempdir().unwrap();
    let values: Vec<u32> = (0..1000u32).map(|i| (i * 7) % 4).collect();
    write_parquet(
        &dir.path().join("a.parquet"),
        vec![("report", Arc::new(UInt32Array::from(values)))],
    );
    let cfg = config(dir.path(), 4, "");
    let (json, pq) = (dir.path().join("r.jsonl"), dir.path().join("r.parquet"));
    for out in [&json, &pq] {
        run_batch(&cfg, out);
    }
    let want = &records(&json)[0];
    let file = std::fs::File::open(&pq).unwrap();
    let batch = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(batch.num_rows(), 1);
    let f64_col = |name: &str| {
        batch
            .column_by_name(name)
            .unwrap()
            .as_any()
            .downcast_ref::<Float64Array>()
            .unwrap()
            .value(0)
    };
    assert_eq!(f64_col("p_value"), want["p_value"].as_f64().unwrap());
    assert_eq!(f64_col("statistic"), want["statistic"].as_f64().unwrap());
    let n = batch.column_by_name("n").unwrap();
    let n = n.as_any().downcast_ref::<UInt64Array>().unwrap();
    assert_eq!(n.value(0), want["n"].as_u64().unwrap());
    assert!(batch.column_by_name("window_start").unwrap().is_null(0));
}

#[test]
fn simulate_then_batch_per_group() {
    let dir = tempfile::tempdir().unwrap();
    let simulate = |out: &std::path::Path| {
        let o = ldpstream(&[
            "simulate",
            "--mechanism",
            "grr",
            "--epsilon",
            "1",
            "--domain",
            "5",
            "--p",
            "0.4,0.3,0.1,0.1,0.1",
            "--groups",
            "a=30000,b=50000",
            "--seed",
            "9",
            "--ts-start",
            "2026-01-01T00:00:00Z",
            "--rate",
            "100",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
    };
    let file = dir.path().join("sim.parquet");
    simulate(&file);
    // The same seed writes the same file.
    let again = dir.path().join("again.parquet.bak");
    simulate(&again);
    assert_eq!(
        std::fs::read(&file).unwrap(),
        std::fs::read(&again).unwrap()
    );

    let cfg = config(dir.path(), 5, "\"group\"");
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("null = \"uniform\"", "null = [0.4, 0.3, 0.1, 0.1, 0.1]");
    std::fs::write(&cfg, text).unwrap();
    let out = dir.path().join("out.jsonl");
    run_batch(&cfg, &out);
    let recs = records(&out);
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0]["group"]["group"], "a");
    assert_eq!(recs[0]["n"], 30000);
    assert_eq!(recs[1]["group"]["group"], "b");
    assert_eq!(recs[1]["n"], 50000);
    let truth = [0.4, 0.3, 0.1, 0.1, 0.1];
    for r in &recs {
        for j in 0..5 {
            let est = r["estimate"][j].as_f64().unwrap();
            let se = r["std_error"][j].as_f64().unwrap();
            assert!((est - truth[j]).abs() < 4.0 * se, "{r}");
        }
        // Seeded: the null holds, and this seed does not produce a false rejection.
        assert!(r["p_value"].as_f64().unwrap() > 0.01, "{r}");
    }
}

#[test]
fn monte_carlo_calibration_through_batch() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.parquet");
    let o = ldpstream(&[
        "simulate",
        "--mechanism",
        "grr",
        "--epsilon",
        "1",
        "--domain",
        "4",
        "--n",
        "3000",
        "--seed",
        "4",
        "--out",
        file.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let cfg = config(dir.path(), 4, "");
    let text = std::fs::read_to_string(&cfg).unwrap()
        + "calibration = \"monte_carlo\"\nmc_samples = 499\nseed = 3\n";
    std::fs::write(&cfg, text).unwrap();
    let out = dir.path().join("o.jsonl");
    run_batch(&cfg, &out);
    let r = &records(&out)[0];
    assert_eq!(r["calibration"], "monte_carlo");
    let mc = r["mc_p_value"].as_f64().unwrap();
    let asymptotic = r["p_value"].as_f64().unwrap();
    // An MC p-value is a multiple of 1/(m+1) and, at n = 3000, close to the asymptotic one.
    assert!((mc * 500.0 - (mc * 500.0).round()).abs() < 1e-9, "{r}");
    assert!((mc - asymptotic).abs() < 0.1, "{r}");
}

/// Independence and two-sample tests through `batch` on per-group data: q-values across
/// groups, n1/n2, and an inconclusive group with too few reports.
#[test]
fn independence_and_two_sample_per_group() {
    let dir = tempfile::tempdir().unwrap();
    // 2×2 joint domain; "a" and "b" from the same product law, "tiny" with 30 reports.
    for (label, n, seed) in [
        ("a", "40000", "1"),
        ("b", "30000", "2"),
        ("tiny", "30", "3"),
    ] {
        let file = dir.path().join(format!("{label}.parquet"));
        let o = ldpstream(&[
            "simulate",
            "--mechanism",
            "grr",
            "--epsilon",
            "2",
            "--domain",
            "4",
            "--p",
            "0.42,0.18,0.28,0.12",
            "--groups",
            &format!("{label}={n}"),
            "--seed",
            seed,
            "--out",
            file.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[[stream]]
name = "s"
source = {{ kind = "parquet", paths = ["{}/*.parquet"] }}
mechanism = {{ kind = "grr", epsilon = 2.0, domain = 4 }}
columns = {{ group_by = ["group"] }}
[[stream.test]]
name = "ind"
kind = "independence"
rows = 2
cols = 2
[[stream.test]]
name = "ab"
kind = "two_sample"
by = "group"
a = "a"
b = "b"
"#,
            dir.path().display()
        ),
    )
    .unwrap();
    let out = dir.path().join("o.jsonl");
    let o = run_batch(&cfg, &out);
    assert!(
        stderr(&o).contains("s/ind: 0 of 3 final results (windows × groups) with q < alpha"),
        "{}",
        stderr(&o)
    );
    let recs = records(&out);
    let ind: Vec<&Value> = recs.iter().filter(|r| r["test"] == "ind").collect();
    assert_eq!(ind.len(), 3);
    for r in &ind {
        assert_eq!(r["method"], "LocalExpIND");
        assert_eq!(r["df"], 1);
        assert!(r["q_value"].as_f64().unwrap() >= r["p_value"].as_f64().unwrap());
    }
    let tiny = ind.iter().find(|r| r["group"]["group"] == "tiny").unwrap();
    assert_eq!(tiny["inconclusive"], true, "{tiny}");
    assert_eq!(tiny["reject"], false);
    assert!(
        tiny["inconclusive_reason"]
            .as_str()
            .unwrap()
            .contains("expected cell"),
        "{tiny}"
    );
    let ab: Vec<&Value> = recs.iter().filter(|r| r["test"] == "ab").collect();
    assert_eq!(ab.len(), 1, "{ab:?}");
    assert_eq!(ab[0]["method"], "GenRRTwoSample");
    assert_eq!(ab[0]["n1"], 40000);
    assert_eq!(ab[0]["n2"], 30000);
    assert_eq!(ab[0]["group"], Value::Null);
    assert!(ab[0]["p_value"].as_f64().unwrap() > 0.001, "{}", ab[0]);
}

/// Writes `rows` noise reports of dimension `d` (Float64) to `path`.
fn write_noise(path: &Path, d: i32, rows: &[Vec<f64>]) {
    use arrow_array::{FixedSizeListArray, Float64Array};
    use arrow_schema::DataType;
    let values = Float64Array::from_iter_values(rows.iter().flatten().copied());
    let item = Arc::new(Field::new("item", DataType::Float64, false));
    let list = FixedSizeListArray::try_new(item, d, Arc::new(values), None).unwrap();
    write_parquet(path, vec![("report", Arc::new(list) as ArrayRef)]);
}

/// Issue 19 item 11: one Gaussian report with a coordinate of 1000 among 100,000 used to
/// be folded unchanged and decide the test. It is now rejected as `above_max_abs` (the
/// default bound, 1 + 40/√ρ = 41 here), and the p-value is exactly the one without it.
/// An explicit `max_abs` above 1000 folds it again.
#[test]
fn one_huge_gaussian_report_is_rejected_and_leaves_the_p_value_alone() {
    let dir = tempfile::tempdir().unwrap();
    let honest = dir.path().join("honest");
    std::fs::create_dir(&honest).unwrap();
    let o = ldpstream(&[
        "simulate",
        "--mechanism",
        "gauss",
        "--rho",
        "1",
        "--domain",
        "4",
        "--p",
        "0.25,0.25,0.25,0.25",
        "--groups",
        "all=99999",
        "--seed",
        "5",
        "--out",
        honest.join("h.parquet").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    write_noise(
        &dir.path().join("outlier.parquet"),
        4,
        &[vec![1000.0, 0.0, 0.0, 0.0]],
    );
    let cfg = |name: &str, pattern: &str, max_abs: &str| {
        let path = dir.path().join(name);
        std::fs::write(
            &path,
            format!(
                r#"
[[stream]]
name = "g"
source = {{ kind = "parquet", paths = [{pattern}] }}
mechanism = {{ kind = "gauss", rho = 1.0, domain = 4{max_abs} }}
[[stream.test]]
name = "u"
kind = "gof"
null = "uniform"
"#
            ),
        )
        .unwrap();
        path
    };
    let h = honest.join("h.parquet");
    let o = dir.path().join("outlier.parquet");
    let only_honest = format!("{:?}", h.to_str().unwrap());
    let both = format!("{:?}, {:?}", h.to_str().unwrap(), o.to_str().unwrap());
    let run = |cfg: &Path, out: &str| {
        let out = dir.path().join(out);
        run_batch(cfg, &out);
        let mut r = records(&out);
        assert_eq!(r.len(), 1);
        r.remove(0)
    };
    let base = run(&cfg("a.toml", &only_honest, ""), "a.jsonl");
    let with = run(&cfg("b.toml", &both, ""), "b.jsonl");
    assert_eq!(base["n"], 99999);
    assert_eq!(with["n"], 99999, "{with}");
    assert_eq!(with["rejected_reports"]["above_max_abs"], 1, "{with}");
    assert_eq!(with["rejected_reports"]["non_finite"], 0, "{with}");
    assert_eq!(with["p_value"], base["p_value"]);
    assert_eq!(with["statistic"], base["statistic"]);

    let lenient = run(&cfg("c.toml", &both, ", max_abs = 2000.0"), "c.jsonl");
    assert_eq!(lenient["n"], 100000, "{lenient}");
    assert_eq!(lenient["rejected_reports"]["above_max_abs"], 0);
    assert_ne!(lenient["p_value"], base["p_value"]);
}

/// Writes 20,000 GenRR reports with a group and no event time, `rows_per_group` rows per
/// row group.
fn write_row_groups(path: &Path, rows_per_group: usize) {
    use arrow_array::Array;
    use parquet::file::properties::WriterProperties;
    let n = 20_000u32;
    let report = UInt32Array::from_iter_values((0..n).map(|i| (i * 7 + i / 13) % 6));
    let group = StringArray::from_iter_values((0..n).map(|i| ["a", "b", "c"][(i % 3) as usize]));
    let schema = Arc::new(Schema::new(vec![
        Field::new("report", report.data_type().clone(), true),
        Field::new("group", group.data_type().clone(), true),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(report) as ArrayRef, Arc::new(group) as ArrayRef],
    )
    .unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(rows_per_group))
        .build();
    let file = std::fs::File::create(path).unwrap();
    let mut w = ArrowWriter::try_new(file, schema, Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let meta = parquet::file::reader::FileReader::metadata(
        &parquet::file::serialized_reader::SerializedFileReader::new(
            std::fs::File::open(path).unwrap(),
        )
        .unwrap(),
    )
    .num_row_groups();
    assert_eq!(meta, 20_000usize.div_ceil(rows_per_group));
}

/// Issue 19 item 12: the footer is now parsed once per file and shared by every row-group
/// task (the Arrow path and the dictionary-key path). A file of 2,000 row groups gives
/// exactly the records of the same rows in one row group, grouped (Arrow reader) and
/// ungrouped (dictionary keys).
#[test]
fn many_row_groups_give_the_records_of_one_row_group() {
    let dir = tempfile::tempdir().unwrap();
    let mut outputs = Vec::new();
    for (name, rows_per_group) in [("one", 20_000), ("many", 10)] {
        let sub = dir.path().join(name);
        std::fs::create_dir(&sub).unwrap();
        write_row_groups(&sub.join("r.parquet"), rows_per_group);
        let cfg = sub.join("c.toml");
        std::fs::write(
            &cfg,
            format!(
                r#"
[[stream]]
name = "grouped"
source = {{ kind = "parquet", paths = ["{0}/*.parquet"] }}
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 6 }}
columns = {{ group_by = ["group"] }}
[[stream.test]]
name = "u"
kind = "gof"
null = "uniform"
[[stream]]
name = "plain"
source = {{ kind = "parquet", paths = ["{0}/*.parquet"] }}
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 6 }}
[[stream.test]]
name = "u"
kind = "gof"
null = "uniform"
"#,
                sub.display()
            ),
        )
        .unwrap();
        let out = sub.join("o.jsonl");
        run_batch(&cfg, &out);
        outputs.push(records(&out));
    }
    assert_eq!(outputs[0].len(), 4, "{:?}", outputs[0]);
    assert_eq!(outputs[0], outputs[1]);
    let plain = outputs[1].iter().find(|r| r["stream"] == "plain").unwrap();
    assert_eq!(plain["n"], 20_000);
}
