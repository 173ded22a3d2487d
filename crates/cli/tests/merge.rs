//! Batch across machines: `batch --emit-sketches` over disjoint shares of the input, then
//! `merge`, gives exactly the records of one `batch` over all of it (integer sketches
//! merge exactly). And `merge` refuses what would change a result silently: an input
//! folded into two sketch files, sketches counted under other settings, a file that is
//! not a sketch file or was cut short.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn ldpstream(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ldpstream"))
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn config(dir: &Path, name: &str, epsilon: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            r#"
[[stream]]
name = "s"
source = {{ kind = "parquet", paths = ["{}/data/*.parquet"] }}
mechanism = {{ kind = "grr", epsilon = {epsilon}, domain = 5 }}
columns = {{ group_by = ["group"] }}
[[stream.test]]
name = "global"
kind = "gof"
null = "uniform"
[[stream.test]]
name = "ten_minutes"
kind = "gof"
null = "uniform"
window = {{ kind = "tumbling", size = "10m" }}
"#,
            dir.display()
        ),
    )
    .unwrap();
    path
}

fn records(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn four_emitted_shares_merge_to_the_records_of_one_batch() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    for (i, groups) in [
        "a=20000,b=5000",
        "a=7000",
        "b=12000,c=3000",
        "a=1000,c=9000",
    ]
    .iter()
    .enumerate()
    {
        let file = data.join(format!("part-{i}.parquet"));
        let o = ldpstream(&[
            "simulate",
            "--mechanism",
            "grr",
            "--epsilon",
            "1",
            "--domain",
            "5",
            "--p",
            "0.3,0.2,0.2,0.2,0.1",
            "--groups",
            groups,
            "--seed",
            &i.to_string(),
            "--ts-start",
            "2026-01-01T00:00:00Z",
            "--rate",
            "20",
            "--out",
            file.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let cfg = config(dir.path(), "c.toml", "1.0");
    let cfg = cfg.to_str().unwrap();
    let one = ldpstream(&["batch", "--config", cfg]);
    assert!(one.status.success(), "{}", stderr(&one));
    let one = records(&String::from_utf8_lossy(&one.stdout));
    assert_eq!(one.len(), 10, "{one:?}");

    let sketches = dir.path().join("sketches");
    for i in 0..4 {
        let input = data.join(format!("part-{i}.parquet"));
        let o = ldpstream(&[
            "batch",
            "--config",
            cfg,
            "--input",
            input.to_str().unwrap(),
            "--emit-sketches",
            sketches.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(o.stdout.is_empty(), "--emit-sketches wrote records");
        assert!(stderr(&o).contains("written to"), "{}", stderr(&o));
    }
    let glob = format!("{}/*.ldpp", sketches.display());
    let merged = ldpstream(&["merge", "--config", cfg, "--input", &glob]);
    assert!(merged.status.success(), "{}", stderr(&merged));
    assert!(
        stderr(&merged).contains("merged 4 sketch file(s)"),
        "{}",
        stderr(&merged)
    );
    let merged = records(&String::from_utf8_lossy(&merged.stdout));
    assert_eq!(merged, one, "merge differs from one batch over all files");

    // A share emitted again (a retried job) replaces its own file: still 4 files.
    let input = data.join("part-2.parquet");
    let o = ldpstream(&[
        "batch",
        "--config",
        cfg,
        "--input",
        input.to_str().unwrap(),
        "--emit-sketches",
        sketches.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read_dir(&sketches).unwrap().count(), 4);

    // The same input in two files: refused, naming the input and both files.
    let both = dir.path().join("both");
    let o = ldpstream(&[
        "batch",
        "--config",
        cfg,
        "--input",
        data.join("part-0.parquet").to_str().unwrap(),
        "--input",
        data.join("part-1.parquet").to_str().unwrap(),
        "--emit-sketches",
        both.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = ldpstream(&[
        "merge",
        "--config",
        cfg,
        "--input",
        &glob,
        "--input",
        &format!("{}/*.ldpp", both.display()),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        (stderr(&o).contains("part-0.parquet") || stderr(&o).contains("part-1.parquet"))
            && stderr(&o).contains("count its reports twice"),
        "{}",
        stderr(&o)
    );

    // Sketches counted under ε = 1 merged under a config that says ε = 2: refused.
    let other = config(dir.path(), "other.toml", "2.0");
    let o = ldpstream(&[
        "merge",
        "--config",
        other.to_str().unwrap(),
        "--input",
        &glob,
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("mechanism epsilon changed from 1 to 2"),
        "{}",
        stderr(&o)
    );

    // A file cut short, and a file that is not a sketch file: errors naming them.
    let first = std::fs::read_dir(&sketches)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let bytes = std::fs::read(&first).unwrap();
    let cut = dir.path().join("cut.ldpp");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let stray = data.join("part-0.parquet");
    for (bad, says) in [
        (&cut, "checksum mismatch"),
        (&stray, "not an ldpstream sketch file"),
    ] {
        let o = ldpstream(&["merge", "--config", cfg, "--input", bad.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(
            stderr(&o).contains(bad.file_name().unwrap().to_str().unwrap())
                && stderr(&o).contains(says),
            "{}",
            stderr(&o)
        );
    }
}

fn simulate(file: &Path, groups: &str, seed: &str) {
    let o = ldpstream(&[
        "simulate",
        "--mechanism",
        "grr",
        "--epsilon",
        "1",
        "--domain",
        "5",
        "--p",
        "0.2,0.2,0.2,0.2,0.2",
        "--groups",
        groups,
        "--seed",
        seed,
        "--out",
        file.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// A partial file's header rewritten (as a hostile user would, checksum recomputed).
fn rewrap(bytes: &[u8], edit: impl Fn(&mut Value)) -> Vec<u8> {
    let len = u32::from_le_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]) as usize;
    let mut header: Value = serde_json::from_slice(&bytes[9..9 + len]).unwrap();
    edit(&mut header);
    let header = serde_json::to_vec(&header).unwrap();
    let mut out = bytes[..5].to_vec();
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(&bytes[9 + len..bytes.len() - 4]);
    let sum = crc32c::crc32c(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// The probe's path_spelling_double_count: `--input 'data/*.parquet' --input
/// ./data/a.parquet` counted a.parquet twice (n = 30,000 of 20,000), and sketch files
/// emitted for `data/a.parquet` and `link/a.parquet` (a symlinked directory) merged to
/// 30,000 without the "folded into two files" refusal. Also: a crafted file whose input
/// list was emptied could be merged any number of times.
#[test]
fn a_file_under_two_spellings_is_counted_once_and_a_file_without_inputs_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    simulate(&data.join("a.parquet"), "a=10000", "1");
    simulate(&data.join("b.parquet"), "a=10000", "2");
    std::os::unix::fs::symlink(&data, dir.path().join("link")).unwrap();
    let cfg = config(dir.path(), "c.toml", "1.0");
    let cfg = cfg.to_str().unwrap();
    let run = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_ldpstream"))
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        o
    };
    let o = run(&[
        "batch",
        "--config",
        cfg,
        "--input",
        "data/*.parquet",
        "--input",
        "./data/a.parquet",
        "--input",
        "link/a.parquet",
    ]);
    let recs = records(&String::from_utf8_lossy(&o.stdout));
    let global = recs.iter().find(|r| r["test"] == "global").unwrap();
    assert_eq!(global["n"], 20000, "{global}");

    for (input, out) in [("data/a.parquet", "one"), ("link/a.parquet", "two")] {
        run(&[
            "batch",
            "--config",
            cfg,
            "--input",
            input,
            "--emit-sketches",
            out,
        ]);
    }
    let o = ldpstream(&[
        "merge",
        "--config",
        cfg,
        "--input",
        &format!("{}/one/*.ldpp", dir.path().display()),
        "--input",
        &format!("{}/two/*.ldpp", dir.path().display()),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("count its reports twice"),
        "{}",
        stderr(&o)
    );

    let one = std::fs::read_dir(dir.path().join("one"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let emptied = dir.path().join("emptied.ldpp");
    std::fs::write(
        &emptied,
        rewrap(&std::fs::read(&one).unwrap(), |h| {
            h["inputs"]["s"] = serde_json::json!([]);
            h["input_ids"]["s"] = serde_json::json!([]);
        }),
    )
    .unwrap();
    let e = emptied.to_str().unwrap();
    let o = ldpstream(&["merge", "--config", cfg, "--input", e, "--input", e]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("names no input files"),
        "{}",
        stderr(&o)
    );
}

/// Issue 30: an `oue` stream (bit-count sketches) merges exactly too: two shares emitted
/// and merged give the records of one batch, fixed-n and sequential GOF alike, and the
/// records carry the consistent estimate.
#[test]
fn oue_shares_merge_to_the_records_of_one_batch() {
    shares_merge_to_one_batch("oue", &[], "{ kind = \"oue\", epsilon = 2.0, domain = 12 }");
}

/// Issue 30: a `subset` stream (item-count sketches from list reports) merges exactly
/// too, fixed-n and sequential SubsetGOF alike.
#[test]
fn subset_shares_merge_to_the_records_of_one_batch() {
    shares_merge_to_one_batch(
        "subset",
        &[],
        "{ kind = \"subset\", epsilon = 2.0, domain = 12 }",
    );
}

/// Issue 30: an `olh` stream (S × g pool tables, pool of 64 seeds) merges exactly too,
/// the Monte Carlo OlhSupportGOF and its sequential whitened-statistic mixture alike.
#[test]
fn olh_shares_merge_to_the_records_of_one_batch() {
    shares_merge_to_one_batch(
        "olh",
        &["--pool-size", "64", "--pool-seed", "3"],
        "{ kind = \"olh\", epsilon = 2.0, domain = 12, pool_size = 64, pool_seed = 3 }",
    );
}

fn shares_merge_to_one_batch(kind: &str, flags: &[&str], mechanism: &str) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    for (i, groups) in ["a=20000,b=5000", "a=7000,b=9000"].iter().enumerate() {
        let file = data.join(format!("part-{i}.parquet"));
        let seed = i.to_string();
        let mut args = vec![
            "simulate",
            "--mechanism",
            kind,
            "--epsilon",
            "2",
            "--domain",
            "12",
            "--groups",
            groups,
            "--seed",
            &seed,
            "--out",
            file.to_str().unwrap(),
        ];
        args.extend_from_slice(flags);
        let o = ldpstream(&args);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let cfg = dir.path().join(format!("{kind}.toml"));
    std::fs::write(
        &cfg,
        format!(
            r#"
[[stream]]
name = "s"
source = {{ kind = "parquet", paths = ["{}/data/*.parquet"] }}
mechanism = {mechanism}
columns = {{ group_by = ["group"] }}
[[stream.test]]
name = "gof"
kind = "gof"
null = "uniform"
[[stream.test]]
name = "anytime"
kind = "gof"
null = "uniform"
sequential = true
"#,
            dir.path().display(),
        ),
    )
    .unwrap();
    let cfg = cfg.to_str().unwrap();
    let one = ldpstream(&["batch", "--config", cfg]);
    assert!(one.status.success(), "{}", stderr(&one));
    let one = records(&String::from_utf8_lossy(&one.stdout));
    assert_eq!(one.len(), 4, "{one:?}");
    for r in &one {
        assert_eq!(r["mechanism"], kind);
        let total: f64 = r["estimate_norm_sub"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .sum();
        assert!((total - 1.0).abs() < 1e-12, "{r}");
    }
    let sketches = dir.path().join("sketches");
    for i in 0..2 {
        let input = data.join(format!("part-{i}.parquet"));
        let o = ldpstream(&[
            "batch",
            "--config",
            cfg,
            "--input",
            input.to_str().unwrap(),
            "--emit-sketches",
            sketches.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let glob = format!("{}/*.ldpp", sketches.display());
    let merged = ldpstream(&["merge", "--config", cfg, "--input", &glob]);
    assert!(merged.status.success(), "{}", stderr(&merged));
    let merged = records(&String::from_utf8_lossy(&merged.stdout));
    assert_eq!(merged, one, "merge differs from one batch over all files");
}
