//! `serve`'s scale-out mode against the real broker (issue 15, part 3): instances in one
//! consumer group share a 6-partition topic, with their state in Kafka (changelog,
//! partials, transactions). An instance joins mid-run, the one that owns the merge is
//! killed with SIGKILL and replaced by one with an empty state directory, and still the
//! results topic holds exactly one final record per window, equal to `batch`'s over the
//! same reports.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use serde_json::Value;

use crate::common::kafka::{
    brokers, consume_all, create_topic, create_topic_with_partitions, produce, unique,
};
use crate::common::{bin, eventually, write_timed_reports, Serve};

const T0: i64 = 1_767_225_600_000;
const PARTITIONS: i32 = 6;
const RESULT_PARTITIONS: i32 = 2;

/// The reports: a seeded stream over 6 partitions, in event-time order within each, one
/// report every 5 ms of event time (300 s: five one-minute windows), two groups.
fn reports(n: usize) -> Vec<(i32, u32, i64, &'static str)> {
    let mut x: u64 = 7;
    (0..n)
        .map(|i| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = ((x >> 33) % 8) as u32;
            let g = if (x >> 20).is_multiple_of(3) {
                "a"
            } else {
                "b"
            };
            ((i % PARTITIONS as usize) as i32, r, T0 + 5 * i as i64, g)
        })
        .collect()
}

fn messages(rows: &[(i32, u32, i64, &str)]) -> Vec<(i32, Vec<u8>)> {
    rows.iter()
        .map(|(p, r, t, g)| {
            (
                *p,
                format!(r#"{{"report":{r},"ts":{t},"g":"{g}"}}"#).into_bytes(),
            )
        })
        .collect()
}

fn end_markers() -> Vec<(i32, Vec<u8>)> {
    (0..PARTITIONS)
        .map(|p| (p, br#"{"end":true}"#.to_vec()))
        .collect()
}

const TESTS: &str = r#"
mechanism = { kind = "grr", epsilon = 1.0, domain = 8 }
columns = { group_by = ["g"] }
allowed_lateness = "10s"
[[stream.test]]
name = "minute"
kind = "gof"
null = "uniform"
window = { kind = "tumbling", size = "1m" }
[[stream.test]]
name = "all"
kind = "gof"
null = "uniform"
window = { kind = "cumulative" }
[[stream.test]]
name = "global"
kind = "gof"
null = "uniform"
window = { kind = "global" }
"#;

/// A serve config for one instance: its own state directory, the shared group.
fn instance(
    dir: &Path,
    name: &str,
    brokers: &str,
    topic: &str,
    group: &str,
    results: &str,
) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            r#"
[serve]
snapshot_interval = "200ms"
[[stream]]
name = "k"
source = {{ kind = "kafka", brokers = "{brokers}", topics = ["{topic}"], group_id = "{group}", end_marker = true, scale_out = {{ results_topic = "{results}", commit_interval = "300ms" }} }}
{TESTS}"#
        ),
    )
    .unwrap();
    path
}

/// `batch`'s final records over the same reports, keyed by (test, window, group).
fn batch_finals(dir: &Path, rows: &[(i32, u32, i64, &str)]) -> BTreeMap<String, Value> {
    let parquet = dir.join("reports.parquet");
    write_timed_reports(
        &parquet,
        rows.iter().map(|r| r.1).collect(),
        rows.iter().map(|r| r.2).collect(),
        Some(rows.iter().map(|r| r.3.to_string()).collect()),
    );
    let cfg = dir.join("batch.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[stream]]\nname = \"k\"\nsource = {{ kind = \"parquet\", paths = [\"{}\"] }}\n{TESTS}",
            parquet.display()
        ),
    )
    .unwrap();
    let o = Command::new(bin())
        .args(["batch", "--config", cfg.to_str().unwrap(), "--output", "-"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["final"] == true)
        .map(|r| (key(&r), r))
        .collect()
}

fn key(r: &Value) -> String {
    format!("{}|{}|{}", r["test"], r["window_start"], r["group"])
}

/// Whether the broker is Tansu 0.6.0 (`LDPSTREAM_BROKER_SHOWS_ABORTED=1`, set by
/// scripts/test.sh and scripts/scale_out_stress.sh): its `read_committed` returns aborted
/// transactions, and its last stable offset can stay behind a transaction it never
/// finishes (docs/kafka.md, "Scale-out").
fn broker_shows_aborted() -> bool {
    std::env::var("LDPSTREAM_BROKER_SHOWS_ABORTED").as_deref() == Ok("1")
}

/// Every committed record of the results topic, read until `count` windows arrived, then
/// for `settle` longer, so that a duplicate emitted late would be seen too. On Tansu the
/// topic is read `read_uncommitted`: its `read_committed` shows aborted records as well,
/// so the two differ only where a transaction Tansu never finishes holds the last stable
/// offset, and every record after it, back (seen once in 40 stress runs: the last 8
/// final records, written and committed, stayed out of sight).
fn committed_results(brokers: &str, topic: &str, count: usize, settle: Duration) -> Vec<Value> {
    let isolation = if broker_shows_aborted() {
        "read_uncommitted"
    } else {
        "read_committed"
    };
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", unique("check"))
        .set("isolation.level", isolation)
        .create()
        .unwrap();
    let mut all = TopicPartitionList::new();
    for p in 0..RESULT_PARTITIONS {
        all.add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&all).unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut complete_at: Option<Instant> = None;
    while Instant::now() < deadline {
        let windows: BTreeSet<String> = out.iter().map(key).collect();
        if windows.len() >= count
            && complete_at.get_or_insert_with(Instant::now).elapsed() >= settle
        {
            break;
        }
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            out.push(serde_json::from_slice(m.payload().unwrap_or_default()).unwrap());
        }
    }
    out
}

/// Checks exactly one final per window, equal to batch's. With
/// `LDPSTREAM_BROKER_SHOWS_ABORTED=1` (scripts/scale_out_stress.sh on Tansu 0.6.0, whose
/// `read_committed` returns aborted transactions) a window may also have copies from a
/// merge transaction a kill cut, each equal to batch's as well: they are counted and
/// printed (`DUPLICATE_FINALS`), never a different count.
fn assert_once_and_equal(got: &[Value], expected: &BTreeMap<String, Value>) {
    let shows_aborted = broker_shows_aborted();
    let mut seen: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for r in got {
        assert_eq!(
            r["final"], true,
            "only final records go to the results topic: {r}"
        );
        seen.entry(key(r)).or_default().push(r);
    }
    let repeated: Vec<&String> = seen
        .iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|(k, _)| k)
        .collect();
    assert!(
        shows_aborted || repeated.is_empty(),
        "final records emitted more than once: {repeated:?}"
    );
    if !repeated.is_empty() {
        eprintln!("DUPLICATE_FINALS n={} windows={repeated:?}", repeated.len());
    }
    assert_eq!(
        seen.len(),
        expected.len(),
        "windows: {:?}",
        seen.keys().collect::<Vec<_>>()
    );
    for (k, want) in expected {
        let copies = seen
            .get(k)
            .unwrap_or_else(|| panic!("no final record for {k}"));
        for have in copies {
            assert_eq!(*have, want, "{k}");
        }
    }
}

/// An instance logging at info, so the test can see which one owns the merge.
fn start(config: &Path) -> Serve {
    Serve::start_with_env(config, &[], &[("RUST_LOG", "info")])
}

/// The instance that owns the merge now and has read the partials back: the one whose
/// newest read-back follows its newest take-over and no loss since.
fn settled_merge_owner(instances: &[Serve]) -> Option<usize> {
    instances.iter().position(|s| {
        let log = s.stderr.lock().unwrap();
        let took = log.rfind("this instance owns the partials topic");
        let lost = log.rfind("the partials topic moved to another instance");
        let read = log.rfind("merge: partials read back; emitting from here");
        took.is_some() && took > lost && read > took
    })
}

/// How this run kills (scripts/scale_out_stress.sh sets `LDPSTREAM_STRESS_SEED` to vary
/// it): the merge owner between transactions (seed 0, the default), just after it emitted
/// a window (0.0-0.6 s after, 1), or at a random moment while the input is folded (2);
/// then a fold-only instance 0.1-1.5 s into the last third of the input.
struct Kills {
    merge_mode: u64,
    merge_delay: Duration,
    fold_delay: Duration,
}

impl Kills {
    fn from_env() -> Kills {
        let seed: u64 = std::env::var("LDPSTREAM_STRESS_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5DEE_CE66;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let merge_mode = seed % 3;
        let merge_delay = Duration::from_millis(match merge_mode {
            1 => next(600),
            2 => next(3_000),
            _ => 0,
        });
        Kills {
            merge_mode,
            merge_delay,
            fold_delay: Duration::from_millis(100 + next(1_400)),
        }
    }
}

/// Every instance's count of "the merge is caught up and emitting" log lines.
fn merge_read_backs(instances: &[Serve]) -> usize {
    instances
        .iter()
        .map(|s| {
            s.stderr
                .lock()
                .unwrap()
                .matches("merge: partials read back; emitting from here")
                .count()
        })
        .sum()
}

/// Waits until some instance has taken the merge over and read it back since `before`
/// read-backs, and says how long after `killed` that was (`FAILOVER` lines, which
/// scripts/scale_out_stress.sh collects for benches/RESULTS.md).
fn measure_failover(kind: &str, instances: &[Serve], before: usize, killed: Instant) {
    let secs = eventually(
        "the merge to be taken over",
        Duration::from_secs(120),
        || (merge_read_backs(instances) > before).then(|| killed.elapsed().as_secs_f64()),
    );
    eprintln!("FAILOVER kind={kind} secs={secs:.3}");
}

/// The instance's `ldpstream_scale_out_merge_owner` for stream "k".
fn owner_gauge(s: &Serve) -> Option<f64> {
    crate::common::sample(
        &s.get("/metrics").1,
        "ldpstream_scale_out_merge_owner",
        "stream=\"k\"",
    )
}

/// SIGKILLs the merge owner as `kills` says, while the second third of the input goes in.
fn kill_merge_owner(
    instances: &mut Vec<Serve>,
    kills: &Kills,
    produce_second: impl FnOnce() + Send,
) {
    let emitted = |s: &Serve| {
        s.stderr
            .lock()
            .unwrap()
            .matches("merge: final records emitted")
            .count()
    };
    let owner = eventually("a settled merge owner", Duration::from_secs(60), || {
        settled_merge_owner(instances)
    });
    // The gauge names the owner, and only it.
    eventually("the owner gauge", Duration::from_secs(10), || {
        let gauges: Vec<Option<f64>> = instances.iter().map(owner_gauge).collect();
        let want: Vec<Option<f64>> = (0..instances.len())
            .map(|i| Some(if i == owner { 1.0 } else { 0.0 }))
            .collect();
        (gauges == want).then_some(())
    });
    match kills.merge_mode {
        1 => {
            let before = emitted(&instances[owner]);
            std::thread::scope(|scope| {
                scope.spawn(produce_second);
                eventually("a window emitted", Duration::from_secs(90), || {
                    (emitted(&instances[owner]) > before).then_some(())
                });
                std::thread::sleep(kills.merge_delay);
                instances[owner].child.kill().unwrap();
            });
        }
        2 => std::thread::scope(|scope| {
            scope.spawn(produce_second);
            std::thread::sleep(kills.merge_delay);
            instances[owner].child.kill().unwrap();
        }),
        _ => {
            produce_second();
            std::thread::sleep(Duration::from_secs(2));
            instances[owner].child.kill().unwrap();
        }
    }
    let killed = Instant::now();
    eprintln!(
        "killed the merge owner, instance {owner} (mode {}, {:?})",
        kills.merge_mode, kills.merge_delay
    );
    let mut dead = instances.remove(owner);
    dead.child.wait().unwrap();
    let before = merge_read_backs(instances);
    measure_failover("merge_owner", instances, before, killed);
}

#[test]
fn instances_join_and_die_yet_each_window_has_one_final_equal_to_batch() {
    let brokers = brokers();
    let kills = Kills::from_env();
    let dir = tempfile::tempdir().unwrap();
    let (topic, results, group) = (unique("so-in"), unique("so-out"), unique("so"));
    create_topic_with_partitions(&brokers, &topic, PARTITIONS);
    create_topic_with_partitions(&brokers, &results, RESULT_PARTITIONS);
    let rows = reports(60_000);
    let expected = batch_finals(dir.path(), &rows);
    // Five one-minute windows, the cumulative and the global one, for each of the two
    // groups.
    assert_eq!(expected.len(), 14);
    let msgs = messages(&rows);
    let third = msgs.len() / 3;
    let cfg = |name: &str| instance(dir.path(), name, &brokers, &topic, &group, &results);

    let a = start(&cfg("a"));
    let b = start(&cfg("b"));
    produce(&brokers, &topic, &msgs[..third]);
    // The first windows close on every partition's watermark and are emitted.
    eventually("a first final record", Duration::from_secs(90), || {
        (!committed_results(&brokers, &results, 1, Duration::ZERO).is_empty()).then_some(())
    });

    // A third instance joins: the group rebalances, partitions move with their state.
    let c = start(&cfg("c"));
    eventually(
        "the group to settle with c",
        Duration::from_secs(90),
        || {
            let settled = [&a, &b, &c].iter().all(|s| {
                s.stderr
                    .lock()
                    .unwrap()
                    .contains("input partitions assigned")
            });
            settled.then_some(())
        },
    );
    std::thread::sleep(Duration::from_secs(2));

    // SIGKILL the instance that owns the merge (stage 2) and start a fresh one, as
    // `kills` says: between transactions, just after a window went out, or mid-fold.
    let mut instances = vec![a, b, c];
    kill_merge_owner(&mut instances, &kills, || {
        produce(&brokers, &topic, &msgs[third..2 * third])
    });
    instances.push(start(&cfg("d")));
    eventually("d to get partitions", Duration::from_secs(90), || {
        let log = instances[2].stderr.lock().unwrap().clone();
        log.contains("input partitions assigned").then_some(())
    });

    // SIGKILL an instance that folds but does not merge, mid-fold: it holds reports it
    // has not committed, and maybe a transaction it has not finished. Its partitions are
    // restored from their changelogs by the others, and read again from the committed
    // offsets.
    let merging = eventually("a settled merge owner", Duration::from_secs(60), || {
        settled_merge_owner(&instances)
    });
    produce(&brokers, &topic, &msgs[2 * third..]);
    std::thread::sleep(kills.fold_delay);
    let victim = (0..instances.len()).find(|i| *i != merging).unwrap();
    eprintln!(
        "killing instance {victim} (the merge is on {merging}) mid-fold, {:?} into the last third",
        kills.fold_delay
    );
    let mut dead_too = instances.remove(victim);
    dead_too.child.kill().unwrap();
    let killed = Instant::now();
    dead_too.child.wait().unwrap();
    let before = merge_read_backs(&instances);
    instances.push(start(&cfg("e")));
    measure_failover("fold_only", &instances, before, killed);
    produce(&brokers, &topic, &end_markers());

    let got = committed_results(&brokers, &results, expected.len(), Duration::from_secs(5));
    assert_once_and_equal(&got, &expected);
    // Every input partition ended: each instance exits by itself (end_marker), the merge
    // owner first, then each that takes the merge over and finds it done.
    for s in &mut instances {
        assert!(s.wait(Duration::from_secs(180)).success());
    }
}

#[test]
fn one_scale_out_instance_equals_batch() {
    let brokers = brokers();
    let dir = tempfile::tempdir().unwrap();
    let (topic, results, group) = (unique("so1-in"), unique("so1-out"), unique("so1"));
    create_topic_with_partitions(&brokers, &topic, PARTITIONS);
    create_topic_with_partitions(&brokers, &results, RESULT_PARTITIONS);
    let rows = reports(30_000);
    let expected = batch_finals(dir.path(), &rows);
    let mut msgs = messages(&rows);
    // Counted and dead-lettered, never folded, as without scale-out.
    msgs.push((3, b"{not json".to_vec()));
    msgs.extend(end_markers());
    produce(&brokers, &topic, &msgs);
    let dead = unique("so1-dead");
    create_topic(&brokers, &dead);
    let cfg = instance(dir.path(), "one", &brokers, &topic, &group, &results);
    let text = std::fs::read_to_string(&cfg).unwrap().replace(
        "end_marker = true,",
        &format!("end_marker = true, dead_letter_topic = \"{dead}\","),
    );
    std::fs::write(&cfg, text).unwrap();
    let mut one = Serve::start(&cfg, &[]);
    let got = committed_results(&brokers, &results, expected.len(), Duration::from_secs(3));
    assert_once_and_equal(&got, &expected);
    let letters = consume_all(&brokers, &dead, 1, Duration::from_secs(60));
    assert_eq!(letters[0].payload, b"{not json");
    // Every input partition ended (end_marker): serve exits by itself, as without
    // scale-out (issue 34, item 10: it kept running).
    assert!(one.wait(Duration::from_secs(60)).success());
}

#[test]
fn a_missing_results_topic_or_a_foreign_state_message_stops_serve_naming_it() {
    let brokers = brokers();
    let dir = tempfile::tempdir().unwrap();
    let (topic, group) = (unique("so2-in"), unique("so2"));
    create_topic_with_partitions(&brokers, &topic, 2);
    let missing = unique("so2-no-such-results");
    let mut s = Serve::start(
        &instance(dir.path(), "missing", &brokers, &topic, &group, &missing),
        &[],
    );
    let status = s.wait(Duration::from_secs(60));
    assert_eq!(status.code(), Some(1));
    let log = s.stderr.lock().unwrap().clone();
    assert!(log.contains(&missing), "{log}");

    // Something else wrote a pane key into the partials topic: the merge refuses it rather
    // than fold an unknown sketch into the results.
    let results = unique("so2-out");
    create_topic_with_partitions(&brokers, &results, RESULT_PARTITIONS);
    let partials = format!("{group}-partials");
    create_topic_with_partitions(&brokers, &partials, 1);
    let producer: rdkafka::producer::BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .create()
        .unwrap();
    producer
        .send(
            rdkafka::producer::BaseRecord::to(&partials)
                .partition(0)
                .key("pane/0/0")
                .payload("not a sketch"),
        )
        .unwrap();
    rdkafka::producer::Producer::flush(&producer, Duration::from_secs(30)).unwrap();
    let mut s = Serve::start(
        &instance(dir.path(), "foreign", &brokers, &topic, &group, &results),
        &[],
    );
    let status = s.wait(Duration::from_secs(90));
    assert_eq!(status.code(), Some(1));
    let log = s.stderr.lock().unwrap().clone();
    assert!(
        log.contains("stream \"k\" (scale-out state in Kafka)") && log.contains("does not decode"),
        "{log}"
    );
}
