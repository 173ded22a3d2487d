//! A privacy budget survives `kill -9` right after a release: `serve` writes the spend to
//! the ledger file (fsynced, apart from `checkpoint_dir`) before it publishes the record, so the
//! restarted service refuses what the budget no longer covers, even though no checkpoint
//! was written after the release. Sliding windows overlap, so after one release of the
//! whole budget every later window is refused (disjoint windows would compose in
//! parallel and each could spend it).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::Serve;

fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn wait_for(path: &Path, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(r) = records(path).into_iter().find(|r| ok(r)) {
            return r;
        }
        assert!(Instant::now() < deadline, "no {what} in {}", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_spend_survives_kill_9_right_after_its_release() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.toml");
    let (first, second) = (
        dir.path().join("first.jsonl"),
        dir.path().join("second.jsonl"),
    );
    let write = |out: &Path| {
        std::fs::write(
            &config,
            format!(
                r#"
ledger = "{ledger}"
[serve]
snapshot_interval = "100ms"
# No checkpoint after the start: only the ledger file can remember the spend.
checkpoint_interval = "1h"
checkpoint_dir = "{ck}"
sink = [{{ kind = "jsonl", path = "{out}" }}]
[[stream]]
name = "raw"
mechanism = {{ kind = "raw", domain = 20 }}
budget_epsilon = 1.0
source = {{ kind = "simulator", rate = 5000.0, p = "uniform", seed = 3 }}
[[stream.test]]
name = "collisions"
kind = "uniformity"
epsilon = 1.0
mc_samples = 99
window = {{ kind = "sliding", size = "2s", slide = "1s" }}
"#,
                ledger = dir.path().join("ledger.json").display(),
                ck = dir.path().join("ck").display(),
                out = out.display()
            ),
        )
        .unwrap();
    };

    write(&first);
    let mut serve = Serve::start(&config, &[]);
    let released = wait_for(&first, "release", |r| r["epsilon_spent"] == 1.0);
    serve.child.kill().unwrap(); // SIGKILL
    serve.child.wait().unwrap();
    assert_eq!(released["refused"], Value::Null, "{released}");

    write(&second);
    let mut serve = Serve::start(&config, &[]);
    let next = wait_for(&second, "final record", |r| r["final"] == true);
    serve.child.kill().unwrap();
    serve.child.wait().unwrap();
    assert_eq!(next["refused"], "privacy budget exhausted", "{next}");
    assert_eq!(next["budget_remaining"], 0.0, "{next}");
}
