//! Group evaluation on other threads (issue 45): a window's records do not depend on the
//! order or the threads its groups were evaluated on, because every Monte Carlo seed is
//! keyed by the group and the records come back in the window's key order.

use std::sync::Mutex;

use crate::mechanism::Mechanism;
use crate::record::TestRecord;
use crate::sketch::{CountSketch, Sketch};
use crate::stream::{
    evaluate_stream, GroupEmit, GroupMap, GroupTask, PanedDelta, Private, Sequential, StreamError,
};
use crate::window::Grouped;
use ldpstream_config::Config;
use rand::rngs::StdRng;
use rand::SeedableRng;

/// Runs the tasks last index first, spread over three threads, and puts the records back
/// in index order: what a work-stealing pool may do at its most disordered.
struct Scrambled;

impl GroupMap for Scrambled {
    fn map(
        &self,
        len: usize,
        task: &GroupTask<'_>,
        emit: &mut GroupEmit<'_>,
    ) -> Result<(), StreamError> {
        let out: Mutex<Vec<Option<Result<TestRecord, StreamError>>>> =
            Mutex::new((0..len).map(|_| None).collect());
        std::thread::scope(|s| {
            for lane in 0..3 {
                let out = &out;
                s.spawn(move || {
                    for i in (0..len).rev().filter(|i| i % 3 == lane) {
                        let r = task(i);
                        out.lock().unwrap()[i] = Some(r);
                    }
                });
            }
        });
        for r in out.into_inner().unwrap() {
            emit(r.unwrap()?)?;
        }
        Ok(())
    }
}

fn records(toml: &str, groups: &dyn GroupMap) -> Vec<String> {
    let stream = Config::from_toml_str(toml, "t").unwrap().streams.remove(0);
    let m = Mechanism::from_config(&stream.mechanism).unwrap();
    // 40 groups, each its own counts, small enough that the GOF is Monte Carlo calibrated.
    let grouped: Grouped = (0..40u64)
        .map(|g| {
            let counts = (0..10).map(|c| (g * 7 + c * 3) % 5).collect();
            (
                vec![
                    Some(format!("g{g:02}")),
                    Some(["a", "b"][g as usize % 2].into()),
                ],
                Sketch::Counts(CountSketch::from_counts(counts)),
            )
        })
        .collect();
    let delta = PanedDelta {
        untimed: grouped,
        ..PanedDelta::default()
    };
    let mut noise = StdRng::seed_from_u64(0);
    let mut private = Private {
        ledger: None,
        noise: &mut noise,
    };
    evaluate_stream(&stream, &m, delta, &mut private, groups)
        .unwrap()
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect()
}

const STREAM: &str = "[[stream]]\nname = \"s\"\nsource = { kind = \"parquet\", paths = [\"x\"] }\n\
     columns = { report = \"r\", group_by = [\"g\", \"side\"] }\n\
     mechanism = { kind = \"raw\", domain = 10 }\n";

#[test]
fn gof_records_do_not_depend_on_evaluation_order() {
    let toml = format!(
        "{STREAM}[[stream.test]]\nname = \"t\"\nkind = \"gof\"\nnull = \"uniform\"\n\
         calibration = \"monte_carlo\"\nmc_samples = 99\n"
    );
    let sequential = records(&toml, &Sequential);
    assert_eq!(sequential.len(), 40);
    assert_eq!(sequential, records(&toml, &Scrambled));
}

#[test]
fn two_sample_records_do_not_depend_on_evaluation_order() {
    let toml = STREAM.replace(
        "kind = \"raw\", domain = 10",
        "kind = \"grr\", epsilon = 1.0, domain = 10",
    ) + "[[stream.test]]\nname = \"t\"\nkind = \"two_sample\"\nby = \"side\"\n\
           a = \"a\"\nb = \"b\"\n";
    let sequential = records(&toml, &Sequential);
    // One record per value of `g`: each pairs side a with side b (one of them empty).
    assert_eq!(sequential.len(), 40);
    assert_eq!(sequential, records(&toml, &Scrambled));
}
