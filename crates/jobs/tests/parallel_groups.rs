//! A window's groups evaluated on rayon's pool (`RayonGroups`, what `batch`, `merge`, the
//! Python package and `serve`'s snapshot rounds use): the records are those of evaluating
//! the groups one by one, byte for byte and in key order, over more groups than one chunk
//! holds, and the work really is spread over the pool's threads.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::Mutex;

use ldpstream_config::Config;
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::sketch::{CountSketch, Sketch};
use ldpstream_engine::stream::{
    evaluate_snapshot, GroupEmit, GroupMap, GroupTask, Private, Sequential, StreamError,
    WindowSnapshot,
};
use ldpstream_engine::window::Grouped;
use ldpstream_jobs::parallel_groups::RayonGroups;
use rand::rngs::StdRng;
use rand::SeedableRng;

const GROUPS: u64 = 5_000;

/// The snapshot `serve` takes of one window of a GenRR stream grouped by `g`, with
/// `GROUPS` groups of a few reports each (so that every GOF simulates its p-value).
fn records(groups: &dyn GroupMap) -> Vec<String> {
    let toml = "[[stream]]\nname = \"s\"\nsource = { kind = \"parquet\", paths = [\"x\"] }\n\
         columns = { report = \"r\", group_by = [\"g\"] }\n\
         mechanism = { kind = \"grr\", epsilon = 1.0, domain = 8 }\n\
         [[stream.test]]\nname = \"t\"\nkind = \"gof\"\nnull = \"uniform\"\nmc_samples = 49\n";
    let stream = Config::from_toml_str(toml, "t").unwrap().streams.remove(0);
    let m = Mechanism::from_config(&stream.mechanism).unwrap();
    let sketches: Grouped = (0..GROUPS)
        .map(|g| {
            let counts = (0..8).map(|c| (g * 7 + c * 3) % 4).collect();
            (
                vec![Some(format!("g{g:05}"))],
                Sketch::Counts(CountSketch::from_counts(counts)),
            )
        })
        .collect();
    let snapshot = WindowSnapshot {
        test: 0,
        bounds: None,
        is_final: false,
        late: 0,
        sketches: Cow::Owned(sketches),
    };
    let mut noise = StdRng::seed_from_u64(0);
    let mut private = Private {
        ledger: None,
        noise: &mut noise,
    };
    evaluate_snapshot(&stream, &m, &snapshot, &mut private, groups)
        .unwrap()
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect()
}

/// `RayonGroups`, noting which of the pool's threads ran each task. The first task waits
/// (up to a minute, never in a passing run) until a task has run on another thread, so a
/// pool that ran everything on one thread fails the test instead of passing by luck.
struct Watched {
    threads: Mutex<BTreeSet<usize>>,
}

impl GroupMap for Watched {
    fn map(
        &self,
        len: usize,
        task: &GroupTask<'_>,
        emit: &mut GroupEmit<'_>,
    ) -> Result<(), StreamError> {
        let watched = |i: usize| {
            let me = rayon::current_thread_index().expect("a task on the pool");
            self.threads.lock().unwrap().insert(me);
            if i == 0 {
                let start = std::time::Instant::now();
                while self.threads.lock().unwrap().len() < 2
                    && start.elapsed() < std::time::Duration::from_secs(60)
                {
                    std::thread::yield_now();
                }
            }
            task(i)
        };
        RayonGroups.map(len, &watched, emit)
    }
}

#[test]
fn rayon_groups_give_the_sequential_records_on_several_threads() {
    let sequential = records(&Sequential);
    assert_eq!(sequential.len(), GROUPS as usize);
    // In key order, with their q-values across the window.
    assert!(sequential[0].contains("\"g\":\"g00000\"") && sequential[1].contains("g00001"));
    assert!(sequential.iter().all(|r| !r.contains("\"q_value\":null")));
    let watched = Watched {
        threads: Mutex::new(BTreeSet::new()),
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let parallel = pool.install(|| records(&watched));
    assert!(
        parallel == sequential,
        "the records differ from the sequential ones"
    );
    assert_eq!(
        watched.threads.lock().unwrap().len(),
        2,
        "one thread did all"
    );
}
