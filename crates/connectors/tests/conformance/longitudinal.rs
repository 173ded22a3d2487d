//! The longitudinal golden cases (conformance/README.md, "Longitudinal"): lgrr, losue and
//! lsue clients, step by step. Each step gives the metric's memo before it (canonical
//! JSON), the words it reads, its report or refusal, the memo after it and the message
//! bytes; a client loads `memo_before` into its store, replays the words, and must produce
//! the rest exactly. A step with `restart_before` follows a restart of the client: here the
//! engine's client is dropped and rebuilt on the same memo file (`FileMemoStore`).

use ldpstream_config::MessageFormat;
use ldpstream_connectors::memo_file::FileMemoStore;
use ldpstream_connectors::messages::{Decoded, MessageDecoder};
use ldpstream_engine::mechanism::longitudinal::device::{
    Device, DeviceError, DeviceOptions, SamePeriod,
};
use ldpstream_engine::mechanism::longitudinal::memo::{InMemoryMemoStore, MemoStore, MetricMemo};
use ldpstream_engine::mechanism::{Mechanism, Response};
use rand::SeedableRng;
use serde_json::{json, Value};

use super::{binary_message, hex, json_message, mechanism, Record, Replay, Report};

const DAY: i64 = 86_400_000;
/// 2026-01-01T00:00:00Z.
const NEW_YEAR: i64 = 1_767_225_600_000;

/// One call of the client.
struct Step {
    metric: &'static str,
    value: u32,
    ts: i64,
    /// The client is rebuilt from its durable store before this step.
    restart_before: bool,
    /// Fixed words instead of recorded ones.
    words: Option<Vec<u32>>,
}

fn step(metric: &'static str, value: u32, ts: i64) -> Step {
    Step {
        metric,
        value,
        ts,
        restart_before: false,
        words: None,
    }
}

struct LCase {
    name: &'static str,
    toml: &'static str,
    options: DeviceOptions,
    groups: Vec<(&'static str, &'static str)>,
    /// A memo in the store before the first step (another mechanism's, or one at its cap).
    preset: Option<(&'static str, &'static str)>,
    steps: Vec<Step>,
    seed: u64,
}

fn lcase(name: &'static str, toml: &'static str, seed: u64, steps: Vec<Step>) -> LCase {
    LCase {
        name,
        toml,
        options: DeviceOptions::default(),
        groups: Vec::new(),
        preset: None,
        steps,
        seed,
    }
}

const LGRR4: &str =
    "{ kind = \"lgrr\", epsilon_perm = 2.0, epsilon_1 = 1.0, domain = 4, period = \"1d\" }";
const LOSUE10: &str =
    "{ kind = \"losue\", epsilon_perm = 3.0, epsilon_1 = 0.5, domain = 10, period = \"1d\" }";
const LSUE16: &str =
    "{ kind = \"lsue\", epsilon_perm = 4.0, epsilon_1 = 1.0, domain = 16, period = \"1h\" }";

fn cases() -> Vec<LCase> {
    let mut grouped = lcase(
        "lgrr-d4-fresh-then-memo",
        LGRR4,
        101,
        vec![
            step("homepage", 2, NEW_YEAR + 5),
            step("homepage", 2, NEW_YEAR + DAY),
            step("homepage", 2, NEW_YEAR + 3 * DAY - 1),
        ],
    );
    grouped.groups = vec![("country", "fr")];
    let mut repeat = lcase(
        "lgrr-same-period-repeat",
        LGRR4,
        103,
        vec![
            step("m", 1, NEW_YEAR),
            step("m", 1, NEW_YEAR + DAY - 1),
            step("m", 3, NEW_YEAR + 2),
        ],
    );
    repeat.options.same_period = SamePeriod::Repeat;
    let mut capped = lcase(
        "losue-cap-then-stopped",
        LOSUE10,
        105,
        vec![
            step("m", 0, 0),
            step("m", 9, DAY),
            step("m", 0, 2 * DAY),
            step("m", 5, 3 * DAY),
            step("m", 0, 4 * DAY),
        ],
    );
    capped.options.max_memoized_values = 2;
    let mut mismatch = lcase(
        "lsue-memo-of-another-mechanism",
        LSUE16,
        106,
        vec![step("m", 3, NEW_YEAR)],
    );
    mismatch.preset = Some(("m", LGRR4));
    let mut restart = lcase(
        "lsue-restart-continues",
        LSUE16,
        107,
        vec![
            step("m", 15, NEW_YEAR),
            Step {
                restart_before: true,
                ..step("m", 15, NEW_YEAR + 3_600_000)
            },
            Step {
                restart_before: true,
                ..step("m", 15, NEW_YEAR + 3_600_001)
            },
            step("m", 4, NEW_YEAR + 7_200_000),
        ],
    );
    restart.groups = vec![("app", "naïve")];
    vec![
        grouped,
        lcase(
            "lgrr-same-period-refused-then-clock-back",
            LGRR4,
            102,
            vec![
                step("m", 0, NEW_YEAR + DAY),
                step("m", 0, NEW_YEAR + DAY + 1),
                step("m", 0, NEW_YEAR),
                step("other", 3, NEW_YEAR),
            ],
        ),
        repeat,
        lcase(
            "losue-d10-values-change",
            LOSUE10,
            104,
            vec![step("m", 7, NEW_YEAR), step("m", 2, NEW_YEAR + DAY), step("m", 7, NEW_YEAR + 2 * DAY)],
        ),
        capped,
        mismatch,
        restart,
        // At d = 2 the exact second round is the paper's; periods before 1970 round down.
        lcase(
            "lgrr-d2-before-1970",
            "{ kind = \"lgrr\", epsilon_perm = 1.0, epsilon_1 = 0.5, domain = 2, period = \"1d\" }",
            108,
            vec![step("m", 1, -1), step("m", 1, 0)],
        ),
        lcase(
            "lgrr-eps1-near-eps-perm",
            "{ kind = \"lgrr\", epsilon_perm = 2.0, epsilon_1 = 1.9999, domain = 1000, period = \"1d\" }",
            109,
            vec![step("m", 999, NEW_YEAR), step("m", 999, NEW_YEAR + DAY)],
        ),
        lcase(
            "losue-eps-perm-700",
            "{ kind = \"losue\", epsilon_perm = 700.0, epsilon_1 = 699.0, domain = 3, period = \"1d\" }",
            110,
            vec![step("m", 1, NEW_YEAR), step("m", 1, NEW_YEAR + DAY)],
        ),
        lcase(
            "lsue-d3-default-period",
            "{ kind = \"lsue\", epsilon_perm = 0.5, epsilon_1 = 0.1, domain = 3 }",
            111,
            vec![step("m", 2, NEW_YEAR), step("m", 0, NEW_YEAR + DAY)],
        ),
    ]
}

fn memo_value(memo: Option<MetricMemo>) -> Value {
    memo.map_or(Value::Null, |m| {
        serde_json::from_str(&m.to_json()).expect("a memo's JSON parses")
    })
}

fn report_of(r: &Response) -> Report {
    match r {
        Response::Category(c) => Report::Category(*c),
        Response::Bits(b) => Report::Bits(b.clone()),
    }
}

/// A client of the case's mechanism over `store`.
fn device<S: MemoStore>(c: &LCase, m: &Mechanism, store: S) -> Device<S> {
    let Mechanism::Longitudinal(l) = m else {
        panic!("{}: not a longitudinal mechanism", c.name)
    };
    Device::new((**l).clone(), store, c.options).expect("device options")
}

fn outcome(result: &Result<Response, DeviceError>) -> (Option<Response>, Option<&'static str>) {
    match result {
        Ok(r) => (Some(r.clone()), None),
        Err(e) => {
            assert_ne!(e.code(), "error", "{e}");
            (None, Some(e.code()))
        }
    }
}

/// Replays one step's words through a client whose store holds `memo_before`, and checks
/// it gives the same outcome and memo: what every other client does with the case.
fn replay_step(c: &LCase, m: &Mechanism, metric: &str, value: u32, ts: i64, golden: &Value) {
    let mut store = InMemoryMemoStore::new();
    if !golden["memo_before"].is_null() {
        let memo = MetricMemo::from_json(&golden["memo_before"].to_string()).unwrap();
        store.save(metric, &memo).unwrap();
    }
    let words: Vec<u32> = serde_json::from_value(golden["words"].clone()).unwrap();
    let mut rng = Replay {
        words: words.clone(),
        at: 0,
    };
    let mut d = device(c, m, &mut store);
    let (report, refusal) = outcome(&d.report_with(metric, value, ts, &mut rng));
    assert_eq!(rng.at, words.len(), "{}: words left unread", c.name);
    assert_eq!(
        report.as_ref().map(|r| super::report_json(&report_of(r))),
        Some(golden["report"].clone()).filter(|v| !v.is_null()),
        "{}",
        c.name
    );
    assert_eq!(
        refusal.map(Value::from),
        Some(golden["refusal"].clone()).filter(|v| !v.is_null())
    );
    let after = memo_value(store.load(metric).unwrap());
    assert_eq!(after, golden["memo_after"], "{}", c.name);
}

fn golden(c: &LCase) -> Value {
    let (stream, m) = mechanism(c.toml, &c.groups);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memo.json");
    let mut store = FileMemoStore::open(&path).unwrap();
    if let Some((metric, other)) = c.preset {
        let (_, om) = mechanism(other, &[]);
        let mut d = device(c, &om, &mut store);
        d.report_with(metric, 0, 0, &mut rand::rngs::StdRng::seed_from_u64(1))
            .unwrap();
    }
    let mut rng = Record {
        inner: rand::rngs::StdRng::seed_from_u64(c.seed),
        words: Vec::new(),
    };
    let mut steps = Vec::new();
    for s in &c.steps {
        if s.restart_before {
            drop(store);
            store = FileMemoStore::open(&path).unwrap();
        }
        let memo_before = memo_value(store.load(s.metric).unwrap());
        rng.words.clear();
        let result = match &s.words {
            Some(words) => {
                let mut fixed = Replay {
                    words: words.clone(),
                    at: 0,
                };
                let r = device(c, &m, &mut store).report_with(s.metric, s.value, s.ts, &mut fixed);
                rng.words = words.clone();
                r
            }
            None => device(c, &m, &mut store).report_with(s.metric, s.value, s.ts, &mut rng),
        };
        let (report, refusal) = outcome(&result);
        let memo_after = memo_value(store.load(s.metric).unwrap());
        let (json, binary) = match &report {
            Some(r) => {
                let report = report_of(r);
                let json = json_message(&m, &report, Some(s.ts), &c.groups);
                let binary = binary_message(&report, Some(s.ts), &c.groups);
                check_decodes(c, &stream, &m, &json, &binary);
                (Value::from(json), Value::from(hex(&binary)))
            }
            None => (Value::Null, Value::Null),
        };
        let golden_step = json!({
            "metric": s.metric,
            "value": s.value,
            "ts": s.ts,
            "restart_before": s.restart_before,
            "memo_before": memo_before,
            "words": rng.words,
            "report": report.as_ref().map(|r| super::report_json(&report_of(r))),
            "refusal": refusal,
            "memo_after": memo_after,
            "json": json,
            "binary": binary,
        });
        replay_step(c, &m, s.metric, s.value, s.ts, &golden_step);
        steps.push(golden_step);
    }
    let Mechanism::Longitudinal(l) = &m else {
        unreachable!("checked by device()")
    };
    let bits = |p: f64| format!("{:016x}", p.to_bits());
    json!({
        "name": c.name,
        "mechanism": mechanism_json(&m),
        "period_ms": l.period_ms(),
        "fingerprint": m.fingerprint().map(|f| format!("{f:08x}")),
        "probability_bits": [bits(l.first_probability()), bits(l.second_probability())],
        "options": {
            "max_memoized_values": c.options.max_memoized_values,
            "same_period": c.options.same_period.name(),
        },
        "groups": c.groups,
        "steps": steps,
    })
}

/// The mechanism table with the config's keys (`period` as its duration string).
fn mechanism_json(m: &Mechanism) -> Value {
    let Mechanism::Longitudinal(l) = m else {
        panic!("not longitudinal")
    };
    let period = ldpstream_config::DurationMs(l.period_ms()).to_string();
    json!({
        "kind": l.kind(), "epsilon_perm": l.epsilon_perm(), "epsilon_1": l.epsilon_1(),
        "domain": l.domain(), "period": period.trim_matches('"'),
    })
}

/// The server decodes both messages, plain and stamped with the stream's fingerprint.
fn check_decodes(
    c: &LCase,
    stream: &ldpstream_config::StreamConfig,
    m: &Mechanism,
    json: &str,
    binary: &[u8],
) {
    let f = m
        .fingerprint()
        .expect("longitudinal kinds have a fingerprint");
    let stamped_json = format!("{},\"fingerprint\":\"{f:08x}\"}}", &json[..json.len() - 1]);
    let mut stamped_binary = vec![2u8];
    stamped_binary.extend_from_slice(&f.to_le_bytes());
    stamped_binary.extend_from_slice(&binary[1..]);
    for (format, bytes) in [
        (MessageFormat::Json, json.as_bytes()),
        (MessageFormat::Binary, binary),
        (MessageFormat::Json, stamped_json.as_bytes()),
        (MessageFormat::Binary, &stamped_binary),
    ] {
        let mut decoder = MessageDecoder::new(stream, m, format);
        assert_eq!(
            decoder.push(bytes),
            Ok(Decoded::Report),
            "{}: {format:?}",
            c.name
        );
    }
    // A message stamped by the composed one-shot kind is another mechanism's: refused.
    let Mechanism::Longitudinal(l) = m else {
        return;
    };
    let other = l.composed().fingerprint().expect("fingerprint");
    let mut wrong = vec![2u8];
    wrong.extend_from_slice(&other.to_le_bytes());
    wrong.extend_from_slice(&binary[1..]);
    let mut decoder = MessageDecoder::new(stream, m, MessageFormat::Binary);
    assert_ne!(decoder.push(&wrong), Ok(Decoded::Report), "{}", c.name);
}

pub fn longitudinal_cases() -> Vec<Value> {
    cases().iter().map(golden).collect()
}

/// The cases reach the branches they are named for.
#[test]
fn longitudinal_cases_hit_their_branches() {
    let cases = longitudinal_cases();
    let refusals = |name: &str| -> Vec<Value> {
        cases.iter().find(|c| c["name"] == name).unwrap()["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["refusal"].clone())
            .collect()
    };
    assert_eq!(
        refusals("lgrr-same-period-refused-then-clock-back"),
        vec![
            Value::Null,
            "same_period".into(),
            "clock_went_back".into(),
            Value::Null
        ]
    );
    assert_eq!(
        refusals("losue-cap-then-stopped"),
        vec![
            Value::Null,
            Value::Null,
            Value::Null,
            "memo_full".into(),
            "stopped".into()
        ]
    );
    assert_eq!(
        refusals("lsue-memo-of-another-mechanism"),
        vec![Value::from("memo_mismatch")]
    );
    let repeat = cases
        .iter()
        .find(|c| c["name"] == "lgrr-same-period-repeat")
        .unwrap();
    let steps = repeat["steps"].as_array().unwrap();
    assert_eq!(steps[1]["report"], steps[0]["report"]);
    assert_eq!(steps[2]["report"], steps[0]["report"]);
    assert_eq!(steps[1]["words"], json!([]));
    // A memo hit reads only round 2's words; a refusal none.
    let restart = cases
        .iter()
        .find(|c| c["name"] == "lsue-restart-continues")
        .unwrap();
    let steps = restart["steps"].as_array().unwrap();
    assert_eq!(
        steps[1]["memo_before"]["values"],
        steps[0]["memo_after"]["values"]
    );
    assert_eq!(steps[2]["refusal"], "same_period");
    assert_eq!(steps[2]["words"], json!([]));
}
