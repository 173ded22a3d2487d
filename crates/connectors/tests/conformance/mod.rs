//! The golden half of the client conformance suite (conformance/README.md): each case maps
//! (mechanism, parameters, true value, the 32-bit words the sampler consumed) to the
//! report and the exact JSON and binary message bytes. The engine's randomizers replay the
//! words here; every client replays the same words and must produce the same bytes.
//!
//! `LDPSTREAM_WRITE_CONFORMANCE=1 cargo test -p ldpstream-connectors --test integration conformance`
//! rewrites conformance/golden.json from the engine; without it the file must be exactly
//! what the engine produces now.

mod longitudinal;
mod olh;
mod samplers;

use std::path::PathBuf;

use ldpstream_config::{Config, MessageFormat};
use ldpstream_connectors::messages::{Decoded, MessageDecoder};
use ldpstream_engine::mechanism::{Hadamard, Mechanism, NoiseKind};
use rand::{RngCore, SeedableRng};
use serde_json::{json, Value};

/// Replays fixed 32-bit words; a 64-bit word is two of them, low half first (as rand_core
/// builds `next_u64` from a block of u32s). Test-only: never a seed option for real data.
struct Replay {
    words: Vec<u32>,
    at: usize,
}

impl RngCore for Replay {
    fn next_u32(&mut self) -> u32 {
        let w = *self.words.get(self.at).expect("replay: words exhausted");
        self.at += 1;
        w
    }
    fn next_u64(&mut self) -> u64 {
        let lo = u64::from(self.next_u32());
        (u64::from(self.next_u32()) << 32) | lo
    }
    fn fill_bytes(&mut self, _: &mut [u8]) {
        panic!("the randomizers read words, not bytes");
    }
}

/// Draws words from a seeded generator and records them, for writing the fixtures.
struct Record {
    inner: rand::rngs::StdRng,
    words: Vec<u32>,
}

impl RngCore for Record {
    fn next_u32(&mut self) -> u32 {
        let w = self.inner.next_u32();
        self.words.push(w);
        w
    }
    fn next_u64(&mut self) -> u64 {
        let lo = u64::from(self.next_u32());
        (u64::from(self.next_u32()) << 32) | lo
    }
    fn fill_bytes(&mut self, _: &mut [u8]) {
        panic!("the randomizers read words, not bytes");
    }
}

/// A report in the stream's columns.
#[derive(Debug, PartialEq)]
enum Report {
    Category(u32),
    Bits(Vec<u8>),
    Indexed(u32, i8),
    /// gauss, laplace: e_x + grid noise.
    Noise(Vec<f64>),
    /// subset: the k categories, sorted.
    Items(Vec<u32>),
    /// olh: the pool index and the bucket.
    Pooled(u32, u32),
}

struct Case {
    name: &'static str,
    /// The mechanism table as the config writes it (TOML inline table).
    toml: String,
    value: u32,
    ts: Option<i64>,
    groups: Vec<(&'static str, &'static str)>,
    /// Fixed words for the edge cases, else words recorded from StdRng seeded with `seed`.
    words: Option<Vec<u32>>,
    seed: u64,
}

fn case(name: &'static str, toml: &str, value: u32, seed: u64) -> Case {
    Case {
        name,
        toml: toml.to_string(),
        value,
        ts: None,
        groups: Vec::new(),
        words: None,
        seed,
    }
}

fn cases() -> Vec<Case> {
    let grr4 = "{ kind = \"grr\", epsilon = 0.5, domain = 4 }";
    let mut out = vec![
        case("grr-d4-a", grr4, 0, 1),
        case("grr-d4-b", grr4, 3, 2),
        case("grr-d4-c", grr4, 1, 3),
        case("grr-d1000", "{ kind = \"grr\", epsilon = 0.1, domain = 1000 }", 999, 4),
        case("grr-eps-libm-edge", "{ kind = \"grr\", epsilon = 7.340955895268801, domain = 3 }", 2, 15),
        case("grr-eps700-truth", "{ kind = \"grr\", epsilon = 700.0, domain = 2 }", 1, 5),
        case("bitflip-d10", "{ kind = \"bitflip\", epsilon = 1.0, domain = 10 }", 9, 6),
        case("bitflip-d3", "{ kind = \"bitflip\", epsilon = 0.2, domain = 3 }", 0, 7),
        case("bitflip-d16", "{ kind = \"bitflip\", epsilon = 2.0, domain = 16 }", 5, 8),
        case("hadamard-d5", "{ kind = \"hadamard\", epsilon = 0.5, domain = 5 }", 4, 9),
        case("hadamard-d1024", "{ kind = \"hadamard\", epsilon = 10.0, domain = 1024 }", 700, 10),
        case("cohort-d6", "{ kind = \"cohort\", epsilon = 0.5, domain = 6, cohorts = 16, seed = 7 }", 5, 11),
        case("cohort-bigseed", "{ kind = \"cohort\", epsilon = 1.0, domain = 3, cohorts = 1000, seed = 9007199254740993 }", 2, 12),
        case("matrix-a", "{ kind = \"matrix\", matrix = [[0.7, 0.5], [0.2, 0.3], [0.1, 0.2]] }", 1, 13),
        case("matrix-b", "{ kind = \"matrix\", matrix = [[0.7, 0.5], [0.2, 0.3], [0.1, 0.2]] }", 0, 14),
        case("gauss-d3", "{ kind = \"gauss\", rho = 0.5, domain = 3 }", 1, 16),
        case("gauss-rho-min", "{ kind = \"gauss\", rho = 1e-11, domain = 2 }", 0, 17),
        case("gauss-rho-max", "{ kind = \"gauss\", rho = 245000.0, domain = 2 }", 1, 18),
        case("laplace-d4", "{ kind = \"laplace\", epsilon = 1.0, domain = 4 }", 2, 19),
        case("laplace-eps700", "{ kind = \"laplace\", epsilon = 700.0, domain = 2 }", 0, 20),
        case("laplace-eps-min", "{ kind = \"laplace\", epsilon = 1e-5, domain = 2 }", 1, 21),
        // rand's index::sample picks its algorithm by (d − 1, k): Floyd's below, a partial
        // shuffle for k > 11 with d − 1 < (10 + 1.6k)k, rejection for k ≥ 163 with
        // d − 1 ≥ 270k. The clients port all three.
        case("subset-d5-k2", "{ kind = \"subset\", epsilon = 1.0, domain = 5, k = 2 }", 3, 22),
        case("subset-default-k", "{ kind = \"subset\", epsilon = 2.0, domain = 16 }", 0, 23),
        case("subset-floyd-k12", "{ kind = \"subset\", epsilon = 0.5, domain = 1000, k = 12 }", 999, 24),
        case("subset-shuffle", "{ kind = \"subset\", epsilon = 0.5, domain = 40, k = 15 }", 20, 25),
        case("subset-d1024-default", "{ kind = \"subset\", epsilon = 2.0, domain = 1024 }", 512, 26),
        case("subset-rejection", "{ kind = \"subset\", epsilon = 1.0, domain = 50000, k = 170 }", 7, 27),
        case("subset-eps700", "{ kind = \"subset\", epsilon = 700.0, domain = 3 }", 2, 28),
    ];
    for c in &mut out {
        match c.name {
            "grr-d4-b" => {
                c.ts = Some(1_767_225_600_000);
                c.groups = vec![("country", "fr"), ("app", "naïve \"quoted\"")];
            }
            "bitflip-d10" => {
                c.ts = Some(-5);
                c.groups = vec![("g", "")];
            }
            "cohort-d6" => c.ts = Some(1),
            "subset-default-k" => {
                c.ts = Some(1_767_225_600_000);
                c.groups = vec![("country", "fr")];
            }
            "gauss-rho-max" => {
                c.ts = Some(1_767_225_600_000);
                c.groups = vec![("country", "fr")];
            }
            _ => {}
        }
    }
    out.extend(edge_cases());
    // Appended after the others, so that adding a mechanism leaves every earlier case's
    // bytes where they were.
    out.extend(oue_cases());
    out.extend(olh::olh_cases());
    out
}

/// Optimized unary encoding: the true bit dropped with 1/2, every other set with
/// 1/(e^ε+1), in bitflip's report format.
fn oue_cases() -> Vec<Case> {
    let mut grouped = case(
        "oue-d10",
        "{ kind = \"oue\", epsilon = 1.0, domain = 10 }",
        7,
        22,
    );
    grouped.ts = Some(1_767_225_600_000);
    grouped.groups = vec![("country", "fr")];
    // Bit 0 set at ε = 700 (U = 0: 16 zero 64-bit words), then the true bit kept (U > 1/2).
    let mut set700 = vec![0u32; 32];
    set700.extend([0xffff_ffff, 0xffff_ffff]);
    vec![
        grouped,
        case(
            "oue-d16-eps10",
            "{ kind = \"oue\", epsilon = 10.0, domain = 16 }",
            0,
            23,
        ),
        case(
            "oue-d1024",
            "{ kind = \"oue\", epsilon = 0.5, domain = 1024 }",
            1023,
            24,
        ),
        Case {
            words: Some(set700),
            ..case(
                "oue-eps700-set",
                "{ kind = \"oue\", epsilon = 700.0, domain = 2 }",
                1,
                0,
            )
        },
    ]
}

/// Word sequences the seeded ones almost never give: the branches the ports must agree on.
fn edge_cases() -> Vec<Case> {
    let fixed = |name, toml: &str, value, words: Vec<u32>| Case {
        words: Some(words),
        ..case(name, toml, value, 0)
    };
    // U = 0 lies even at ε = 700 (p ≈ 2^-1010: 16 zero 64-bit words), then the one other
    // category (range 1, one word).
    let mut lie700 = vec![0u32; 32];
    lie700.push(0xdead_beef);
    vec![
        fixed(
            "grr-eps700-lie",
            "{ kind = \"grr\", epsilon = 700.0, domain = 2 }",
            0,
            lie700,
        ),
        // A lie, then Canon's method needing a third word: 0x55555555·3 = 2^32 − 1 twice.
        fixed(
            "grr-canon-carry",
            "{ kind = \"grr\", epsilon = 0.1, domain = 4 }",
            1,
            vec![0, 0, 0x5555_5555, 0x5555_5555, 0xffff_ffff],
        ),
        // Row 0x12345678 mod 1024 is not how the row is drawn: ⌊1024·U⌋ = 72; then a lie.
        fixed(
            "hadamard-eps10-lie",
            "{ kind = \"hadamard\", epsilon = 10.0, domain = 1024 }",
            3,
            vec![0x1234_5678, 0, 0],
        ),
        // u = 1 − 2^-53 is not below column 0's running sum 0.7 + 0.2 + 0.1 = 1 − 2^-53:
        // the last possible signal.
        fixed(
            "matrix-rounding-fallback",
            "{ kind = \"matrix\", matrix = [[0.7, 0.5], [0.2, 0.3], [0.1, 0.2]] }",
            0,
            vec![0xffff_ffff, 0xffff_ffff],
        ),
        // U = 1 − 2^-64 is not below keep: x is left out, and Floyd's draws 0 twice (d − 1 = 3
        // others, k = 2): the repeat is replaced by j = 2, i.e. categories {0, 3}.
        fixed(
            "subset-floyd-repeat",
            "{ kind = \"subset\", epsilon = 1.0, domain = 4, k = 2 }",
            1,
            vec![0xffff_ffff, 0xffff_ffff, 0, 0],
        ),
    ]
}

fn mechanism(toml: &str, group_by: &[(&str, &str)]) -> (ldpstream_config::StreamConfig, Mechanism) {
    let groups: Vec<String> = group_by.iter().map(|(g, _)| format!("{g:?}")).collect();
    let text = format!(
        "[[stream]]\nname = \"s\"\nsource = {{ kind = \"kafka\", brokers = \"b:1\", topics = [\"t\"], group_id = \"g\" }}\nmechanism = {toml}\ncolumns = {{ group_by = [{}] }}\n",
        groups.join(", ")
    );
    let c = Config::from_toml_str(&text, "conformance").unwrap();
    let s = c.streams[0].clone();
    let m = Mechanism::from_config(&s.mechanism).unwrap();
    (s, m)
}

fn randomize<R: RngCore>(m: &Mechanism, x: u32, rng: &mut R) -> Report {
    match m {
        Mechanism::Grr(g) => Report::Category(g.randomize_with(x, rng).unwrap()),
        Mechanism::Channel(c) => Report::Category(c.randomize_with(x, rng).unwrap()),
        Mechanism::BitFlip(b) => Report::Bits(b.randomize_with(x, rng).unwrap()),
        Mechanism::Hadamard(h) => {
            let (j, s) = h.randomize_with(x, rng).unwrap();
            Report::Indexed(j, s)
        }
        Mechanism::Cohort(c) => {
            let (j, s) = c.randomize_with(x, rng).unwrap();
            Report::Indexed(j, s)
        }
        Mechanism::Noise(n) => Report::Noise(n.randomize_with(x, rng).unwrap()),
        Mechanism::Subset(m) => Report::Items(m.randomize_with(x, rng).unwrap()),
        Mechanism::Olh(m) => {
            let (i, y) = m.randomize_with(x, rng).unwrap();
            Report::Pooled(i, y)
        }
        other => panic!("no client randomizer for {}", other.kind()),
    }
}

/// The noise's grid, which the clients compute from ρ or ε in the same f64 operations:
/// the exponent k of the step 2^-k and the scale in steps.
fn grid(m: &Mechanism) -> Value {
    match m {
        Mechanism::Noise(n) => {
            json!({"exponent": (1.0 / n.grid_step()).log2() as u32, "scale": n.grid_scale()})
        }
        _ => Value::Null,
    }
}

/// ECMAScript's `Number.prototype.toString`, which the JS client writes into JSON messages:
/// the shortest digits that round-trip, laid out as JS does.
fn js_number(v: f64) -> String {
    if v == 0.0 {
        return "0".to_string();
    }
    // The fewest digits that round-trip; among those, the closest to v, ties to even, as
    // ECMAScript asks and V8 does. Rust's shortest mode breaks ties upwards
    // (−1.21057891845703125 is …0312 in JS), and plain exact rounding can leave the
    // round-trip interval at a power of two (2^-24 is …063 in JS, not …062).
    let shortest = format!("{:e}", v.abs());
    let count = shortest.split_once('e').unwrap().0.replace('.', "").len();
    let nearest = format!("{:.*e}", count - 1, v.abs());
    let sci = if nearest.parse::<f64>() == Ok(v.abs()) {
        nearest
    } else {
        shortest
    };
    let (mantissa, exp) = sci.split_once('e').unwrap();
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let k = digits.len() as i32;
    // v = 0.digits × 10^n
    let n = exp.parse::<i32>().unwrap() + 1;
    let body = if k <= n && n <= 21 {
        digits + &"0".repeat((n - k) as usize)
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let e = n - 1;
        let m = if k == 1 {
            digits
        } else {
            format!("{}.{}", &digits[..1], &digits[1..])
        };
        format!("{m}e{}{}", if e >= 0 { "+" } else { "-" }, e.abs())
    };
    if v < 0.0 {
        format!("-{body}")
    } else {
        body
    }
}

/// The probability the sampler compares its words with (lie, or bit flip): the clients
/// must compute the same double, so it is pinned too.
fn probability(m: &Mechanism) -> Option<f64> {
    match m {
        Mechanism::Grr(g) => Some(g.lie_probability()),
        Mechanism::BitFlip(b) => Some(b.flip()),
        // 2·sign_lie(ε), and halving a double is exact.
        Mechanism::Hadamard(h) => Some(h.one_minus_two_eta() / 2.0),
        Mechanism::Cohort(c) => Some(c.one_minus_two_eta() / 2.0),
        // subset: P(x in the set), the one Bernoulli.
        Mechanism::Subset(m) => Some(m.keep_probability()),
        // olh: GenRR's lie over the g buckets.
        Mechanism::Olh(m) => Some(m.bucket_rr().lie_probability()),
        _ => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// docs/clients.md's JSON message, keys in the order the clients write them.
fn json_message(m: &Mechanism, r: &Report, ts: Option<i64>, groups: &[(&str, &str)]) -> String {
    let mut fields = Vec::new();
    match r {
        Report::Category(x) => fields.push(format!("\"report\":{x}")),
        Report::Bits(b) => fields.push(format!("\"report\":\"{}\"", hex(b))),
        Report::Indexed(j, s) => {
            let index = if matches!(m, Mechanism::Cohort(_)) {
                "cohort"
            } else {
                "row"
            };
            fields.push(format!("\"{index}\":{j}"));
            fields.push(format!("\"report\":{s}"));
        }
        Report::Noise(v) => {
            let coords: Vec<String> = v.iter().map(|&c| js_number(c)).collect();
            fields.push(format!("\"report\":[{}]", coords.join(",")));
        }
        Report::Items(items) => {
            let items: Vec<String> = items.iter().map(u32::to_string).collect();
            fields.push(format!("\"report\":[{}]", items.join(",")));
        }
        Report::Pooled(i, y) => {
            fields.push(format!("\"seed\":{i}"));
            fields.push(format!("\"report\":{y}"));
        }
    }
    if let Some(ts) = ts {
        fields.push(format!("\"ts\":{ts}"));
    }
    for (g, v) in groups {
        fields.push(format!("{}:{}", json!(g), json!(v)));
    }
    format!("{{{}}}", fields.join(","))
}

/// docs/clients.md's binary message.
fn binary_message(r: &Report, ts: Option<i64>, groups: &[(&str, &str)]) -> Vec<u8> {
    let mut out = vec![1u8];
    out.extend_from_slice(&ts.unwrap_or(i64::MIN).to_le_bytes());
    match r {
        Report::Category(x) => out.extend_from_slice(&x.to_le_bytes()),
        Report::Bits(b) => out.extend_from_slice(b),
        Report::Indexed(j, s) => {
            out.extend_from_slice(&j.to_le_bytes());
            out.push(*s as u8);
        }
        Report::Noise(v) => {
            for &c in v {
                assert_eq!(c as f32 as f64, c, "{c} is not exactly an f32");
                out.extend_from_slice(&(c as f32).to_le_bytes());
            }
        }
        Report::Items(items) => {
            out.extend_from_slice(&(items.len() as u16).to_le_bytes());
            for item in items {
                out.extend_from_slice(&item.to_le_bytes());
            }
        }
        Report::Pooled(i, y) => {
            out.extend_from_slice(&i.to_le_bytes());
            out.extend_from_slice(&y.to_le_bytes());
        }
    }
    for (_, v) in groups {
        out.extend_from_slice(&(v.len() as u16).to_le_bytes());
        out.extend_from_slice(v.as_bytes());
    }
    out
}

fn report_json(r: &Report) -> Value {
    match r {
        Report::Category(x) => json!({ "report": x }),
        Report::Bits(b) => json!({ "report": hex(b) }),
        Report::Indexed(j, s) => json!({ "index": j, "report": s }),
        Report::Noise(v) => json!({ "report": v }),
        Report::Items(items) => json!({ "report": items }),
        Report::Pooled(i, y) => json!({ "index": i, "report": y }),
    }
}

/// One case as the engine produces it, checked against the server's decoder.
fn golden(c: &Case) -> Value {
    let (stream, m) = mechanism(&c.toml, &c.groups);
    let (report, words) = match &c.words {
        Some(words) => {
            let mut rng = Replay {
                words: words.clone(),
                at: 0,
            };
            let r = randomize(&m, c.value, &mut rng);
            assert_eq!(rng.at, words.len(), "{}: fixed words left unread", c.name);
            (r, words.clone())
        }
        None => {
            let inner = rand::rngs::StdRng::seed_from_u64(c.seed);
            let mut rng = Record {
                inner,
                words: Vec::new(),
            };
            let r = randomize(&m, c.value, &mut rng);
            (r, rng.words)
        }
    };
    // Replaying the recorded words gives the same report, reading all of them.
    let mut replay = Replay {
        words: words.clone(),
        at: 0,
    };
    assert_eq!(randomize(&m, c.value, &mut replay), report, "{}", c.name);
    assert_eq!(replay.at, words.len(), "{}", c.name);
    let json = json_message(&m, &report, c.ts, &c.groups);
    let binary = binary_message(&report, c.ts, &c.groups);
    for (format, bytes) in [
        (MessageFormat::Json, json.as_bytes()),
        (MessageFormat::Binary, &binary),
    ] {
        let mut decoder = MessageDecoder::new(&stream, &m, format);
        assert_eq!(
            decoder.push(bytes),
            Ok(Decoded::Report),
            "{}: {format:?}",
            c.name
        );
    }
    // Stamped with the stream's fingerprint (JSON field, binary kind 2), every mechanism's
    // message is accepted too.
    if let Some(f) = m.fingerprint() {
        let stamped_json = format!("{},\"fingerprint\":\"{f:08x}\"}}", &json[..json.len() - 1]);
        let mut stamped_binary = vec![2u8];
        stamped_binary.extend_from_slice(&f.to_le_bytes());
        stamped_binary.extend_from_slice(&binary[1..]);
        for (format, bytes) in [
            (MessageFormat::Json, stamped_json.as_bytes()),
            (MessageFormat::Binary, &stamped_binary),
        ] {
            let mut decoder = MessageDecoder::new(&stream, &m, format);
            assert_eq!(
                decoder.push(bytes),
                Ok(Decoded::Report),
                "{}: stamped {format:?}",
                c.name
            );
        }
    }
    let mut mechanism = mechanism_json(&m);
    if matches!(m, Mechanism::Subset(_)) && !c.toml.contains("k =") {
        // k left to its default: every client must resolve it as the server does (the
        // fingerprint pins the resolved k).
        mechanism.as_object_mut().unwrap().remove("k");
    }
    if matches!(m, Mechanism::Olh(_)) {
        // The same for olh's g and pool size (the fingerprint pins the resolved ones).
        for key in ["g", "pool_size"] {
            if !c.toml.contains(&format!("{key} =")) {
                mechanism.as_object_mut().unwrap().remove(key);
            }
        }
    }
    json!({
        "name": c.name,
        "mechanism": mechanism,
        "probability_bits": probability(&m).map(|p| format!("{:016x}", p.to_bits())),
        "grid": grid(&m),
        "fingerprint": m.fingerprint().map(|f| format!("{f:08x}")),
        "value": c.value,
        "ts": c.ts,
        "groups": c.groups,
        "words": words,
        "report": report_json(&report),
        "json": json,
        "binary": hex(&binary),
    })
}

/// The mechanism table as JSON, with the config's keys; the cohort seed as a decimal
/// string, since it may exceed the 2^53 a JSON number holds exactly in JavaScript.
fn mechanism_json(m: &Mechanism) -> Value {
    match m {
        Mechanism::Grr(g) => json!({"kind": "grr", "epsilon": g.epsilon(), "domain": g.domain()}),
        Mechanism::BitFlip(b) => {
            json!({"kind": b.kind(), "epsilon": b.epsilon(), "domain": b.domain()})
        }
        Mechanism::Hadamard(h) => {
            json!({"kind": "hadamard", "epsilon": h.epsilon(), "domain": h.domain()})
        }
        Mechanism::Cohort(c) => json!({
            "kind": "cohort", "epsilon": c.epsilon(), "domain": c.domain(),
            "cohorts": c.cohorts(), "seed": c.seed().to_string(),
        }),
        Mechanism::Channel(c) => {
            let rows: Vec<Vec<f64>> = (0..c.signals())
                .map(|s| (0..c.domain() as usize).map(|x| c.entry(s, x)).collect())
                .collect();
            json!({"kind": "matrix", "matrix": rows})
        }
        Mechanism::Noise(n) => match n.kind() {
            NoiseKind::Gauss { rho } => {
                json!({"kind": "gauss", "rho": rho, "domain": n.domain()})
            }
            NoiseKind::Laplace { epsilon } => {
                json!({"kind": "laplace", "epsilon": epsilon, "domain": n.domain()})
            }
        },
        Mechanism::Subset(m) => json!({
            "kind": "subset", "epsilon": m.epsilon(), "domain": m.domain(), "k": m.k(),
        }),
        // The pool seed as a decimal string, like the cohort seed.
        Mechanism::Olh(m) => json!({
            "kind": "olh", "epsilon": m.epsilon(), "domain": m.domain(), "g": m.g(),
            "pool_size": m.pool_size(), "pool_seed": m.pool_seed().to_string(),
        }),
        other => panic!("no client randomizer for {}", other.kind()),
    }
}

fn fixture_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../conformance/golden.json")
}

#[test]
fn golden_encodings_are_what_the_engine_produces() {
    let golden = json!({
        "about": "conformance/README.md: replay `words` (32-bit, a 64-bit word is low then high) through the randomizer of `mechanism` on `value`; the report, `json` and `binary` (hex) must be identical",
        "cases": cases().iter().map(golden).collect::<Vec<_>>(),
        "samplers": samplers::sampler_cases(),
        "olh_pools": olh::olh_pools(),
        "longitudinal": longitudinal::longitudinal_cases(),
    });
    let text = serde_json::to_string_pretty(&golden).unwrap() + "\n";
    let path = fixture_path();
    if std::env::var_os("LDPSTREAM_WRITE_CONFORMANCE").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap();
    assert!(
        committed == text,
        "{} is not what the engine produces now: rerun with LDPSTREAM_WRITE_CONFORMANCE=1 if the change is intended (every client must then follow)",
        path.display()
    );
}

/// The fixed-word cases reach the branches they are there for.
#[test]
fn edge_cases_hit_their_branches() {
    let by_name = |name: &str| {
        let c = cases().into_iter().find(|c| c.name == name).unwrap();
        let (_, m) = mechanism(&c.toml, &[]);
        let mut rng = Replay {
            words: c.words.clone().unwrap(),
            at: 0,
        };
        randomize(&m, c.value, &mut rng)
    };
    assert_eq!(by_name("grr-eps700-lie"), Report::Category(1));
    assert_eq!(by_name("grr-canon-carry"), Report::Category(2));
    let row = ((0x1234_5678u64 * 1024) >> 32) as u32;
    assert_eq!(
        by_name("hadamard-eps10-lie"),
        Report::Indexed(row, -Hadamard::entry(row, 3))
    );
    assert_eq!(by_name("matrix-rounding-fallback"), Report::Category(2));
    assert_eq!(by_name("oue-eps700-set"), Report::Bits(vec![0b11]));
    assert_eq!(by_name("subset-floyd-repeat"), Report::Items(vec![0, 3]));
    let (_, m) = mechanism(
        "{ kind = \"olh\", epsilon = 700.0, domain = 3, pool_size = 1 }",
        &[],
    );
    let Mechanism::Olh(m) = m else { panic!("olh") };
    let Report::Pooled(0, y) = by_name("olh-pool1-eps700-lie") else {
        panic!("olh-pool1-eps700-lie: not pool index 0")
    };
    assert_ne!(y, m.bucket(0, 2), "the lie");
    let (_, m) = mechanism(
        "{ kind = \"olh\", epsilon = 1.0, domain = 10, g = 4, pool_size = 3 }",
        &[],
    );
    let Mechanism::Olh(m) = m else { panic!("olh") };
    assert_eq!(
        by_name("olh-canon-carry-keep"),
        Report::Pooled(1, m.bucket(1, 9))
    );
    // The tie e^ε = 2.5 (exact in f64) gives g = round(2.5) + 1 = 4.
    let (_, m) = mechanism(
        "{ kind = \"olh\", epsilon = 0.9162907318741551, domain = 8, pool_size = 4 }",
        &[],
    );
    let Mechanism::Olh(m) = m else { panic!("olh") };
    assert_eq!((0.916_290_731_874_155_1_f64.exp(), m.g()), (2.5, 4));
}

/// `js_number` is what V8 prints (node -e 'console.log(String(v))' for each of these).
#[test]
fn js_number_is_ecmascript_number_to_string() {
    for (v, js) in [
        (2f64.powi(-24), "5.960464477539063e-8"),
        (-3.0 * 2f64.powi(-24), "-1.7881393432617188e-7"),
        (1e21, "1e+21"),
        (2f64.powi(70), "1.1805916207174113e+21"),
        (1e-6, "0.000001"),
        (1e-7, "1e-7"),
        (123456789012345680000.0, "123456789012345680000"),
        (0.5, "0.5"),
        // −1.21057891845703125 exactly: a tie at 17 digits.
        (-317_346.0 / 262_144.0, "-1.2105789184570312"),
        (16_777_215.0, "16777215"),
        (3.0 * 2f64.powi(-20), "0.00000286102294921875"),
        (0.0, "0"),
    ] {
        assert_eq!(js_number(v), js, "{v:e}");
    }
}
