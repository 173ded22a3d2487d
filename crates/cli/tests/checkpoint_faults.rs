//! A checkpoint that cannot be written (a full disk, a failing volume; here the write is
//! made to fail by putting a directory where the previous checkpoint goes) does not stop
//! `serve`: it logs the error, counts it in `ldpstream_checkpoint_failures_total`, keeps
//! the last good checkpoint untouched, stays up, and retries at the next interval.

use std::time::{Duration, Instant};

use crate::common::{eventually, sample, Serve};

#[test]
fn a_failing_checkpoint_write_keeps_the_last_good_one_and_retries() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let config = dir.path().join("c.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[serve]
snapshot_interval = "100ms"
checkpoint_interval = "150ms"
checkpoint_dir = "{}"
sink = [{{ kind = "jsonl", path = "{}" }}]
[[stream]]
name = "sim"
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 4 }}
source = {{ kind = "simulator", rate = 2000.0, seed = 1 }}
[[stream.test]]
name = "gof"
kind = "gof"
null = "uniform"
"#,
            ck.display(),
            dir.path().join("out.jsonl").display()
        ),
    )
    .unwrap();
    let mut serve = Serve::start_with_env(&config, &[], &[("RUST_LOG", "info")]);
    let newest = ck.join("checkpoint.ldpc");
    let previous = ck.join("checkpoint.prev.ldpc");
    eventually("a checkpoint", Duration::from_secs(30), || {
        previous.exists().then_some(())
    });

    // The fault: the previous checkpoint's place is taken by a non-empty directory.
    std::fs::remove_file(&previous).unwrap();
    std::fs::create_dir(&previous).unwrap();
    std::fs::write(previous.join("x"), b"x").unwrap();
    let failures = |s: &Serve| {
        sample(
            &s.get("/metrics").1,
            "ldpstream_checkpoint_failures_total",
            "",
        )
    };
    eventually("two failed checkpoints", Duration::from_secs(30), || {
        failures(&serve).filter(|&f| f >= 2.0)
    });
    let kept = std::fs::read(&newest).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        std::fs::read(&newest).unwrap(),
        kept,
        "the last good checkpoint changed"
    );
    assert_eq!(serve.get("/healthz").0, 200, "serve is down");
    assert!(serve.child.try_wait().unwrap().is_none(), "serve exited");
    assert!(serve.stderr.lock().unwrap().contains("checkpoint failed"));
    // Startup said where the state lives and what a restart replays.
    assert!(serve
        .stderr
        .lock()
        .unwrap()
        .contains("are checkpointed here; a restart restores them"));

    // The fault clears: the next interval writes a new checkpoint.
    std::fs::remove_dir_all(&previous).unwrap();
    let cleared = Instant::now();
    eventually("a new checkpoint", Duration::from_secs(30), || {
        (std::fs::read(&newest).ok()? != kept).then_some(())
    });
    let after = failures(&serve).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        failures(&serve).unwrap(),
        after,
        "still failing after the fault cleared"
    );
    assert!(cleared.elapsed() < Duration::from_secs(30));
    assert!(serve.terminate(Duration::from_secs(30)).success());
}
