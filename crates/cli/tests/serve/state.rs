//! `serve`'s durable state: checkpoints across kill -9, the state directory and its lock, corrupt or mismatched checkpoints.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::common::serve::{jsonl, serve_to_the_end, simulate, SIMULATOR};
use crate::common::{bin, Serve};

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
    crate::common::simulate(
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

/// Issue 31 defect 3: `serve` forgot the sequential state on restart, so a rejected window
/// could show `reject: false` again and its anytime p-value rise. A strongly skewed start
/// rejects a cumulative window at once; 300,000 uniform reports after it dilute the
/// evidence until the e-value alone no longer rejects (batch, one look at the end, says
/// so). Kill -9 after the rejection and a checkpoint; the restarted run must still reject
/// at every later look, its anytime p-value never above the one before the kill.
#[test]
fn a_rejection_survives_kill_9_and_the_anytime_p_value_never_rises() {
    let dir = tempfile::tempdir().unwrap();
    let skewed = dir.path().join("a.parquet");
    let uniform = dir.path().join("b.parquet");
    let common = ["--mechanism", "grr", "--epsilon", "1", "--domain", "4"];
    let args = |p: &str, n: &str, seed: &str| {
        let mut v: Vec<String> = common.iter().map(|s| s.to_string()).collect();
        v.extend(["--p", p, "--n", n, "--seed", seed].map(String::from));
        v
    };
    let a = args("0.7,0.1,0.1,0.1", "3000", "1");
    simulate(&skewed, &a.iter().map(String::as_str).collect::<Vec<_>>());
    let b = args("uniform", "300000", "2");
    simulate(&uniform, &b.iter().map(String::as_str).collect::<Vec<_>>());
    let config = dir.path().join("seq.toml");
    let out = dir.path().join("seq.jsonl");
    std::fs::write(
        &config,
        format!(
            r#"
[serve]
snapshot_interval = "100ms"
checkpoint_interval = "100ms"
checkpoint_dir = "{dir}/ck"
sink = [{{ kind = "jsonl", path = "{out}" }}]
[[stream]]
name = "s"
source = {{ kind = "parquet", paths = ["{a}", "{b}"], rate = 100000.0 }}
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 4 }}
max_batch_rows = 2000
[[stream.test]]
name = "seq"
kind = "gof"
null = "uniform"
sequential = true
window = {{ kind = "cumulative" }}
"#,
            dir = dir.path().display(),
            out = out.display(),
            a = skewed.display(),
            b = uniform.display(),
        ),
    )
    .unwrap();
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
    assert!(
        batch.status.success(),
        "{}",
        String::from_utf8_lossy(&batch.stderr)
    );
    let end: Value = serde_json::from_str(String::from_utf8_lossy(&batch.stdout).trim()).unwrap();
    assert!(
        end["e_value"].as_f64().unwrap() < 20.0 && end["reject"] == false,
        "the diluted end must not reject on its own e-value: {end}"
    );

    let mut first = Serve::start(&config, &[]);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let rejected_before = loop {
        let records = if out.exists() {
            jsonl(&out)
        } else {
            Vec::new()
        };
        if let Some(r) = records.iter().find(|r| r["reject"] == true) {
            break r["anytime_p_value"].as_f64().unwrap();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no rejection before the kill"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // Let a checkpoint after the rejection land, well before the replay's end (~3 s).
    std::thread::sleep(Duration::from_millis(400));
    assert!(
        first.child.try_wait().unwrap().is_none(),
        "the replay ended before the kill"
    );
    let _ = first.child.kill(); // SIGKILL
    let _ = first.child.wait();
    let seen = jsonl(&out).len();

    let mut second = Serve::start(&config, &[]);
    let status = second.wait(Duration::from_secs(60));
    assert!(status.success(), "restart exited with {status:?}");
    let after: Vec<Value> = jsonl(&out).into_iter().skip(seen).collect();
    assert!(after.iter().any(|r| r["final"] == true), "{after:?}");
    for r in &after {
        assert_eq!(r["reject"], true, "the restart forgot the rejection: {r}");
        let p = r["anytime_p_value"].as_f64().unwrap();
        assert!(
            p <= rejected_before,
            "anytime p rose from {rejected_before} to {p}"
        );
    }
}
