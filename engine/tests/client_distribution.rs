//! Distribution conformance (conformance/README.md): reports drawn from each
//! implementation's real CSPRNG (the engine's `rand::rng()`, the JS client's
//! `crypto.getRandomValues`) must follow the law the server debiases with, by a χ² test at
//! α = 1e-6 per (implementation, mechanism, true value), so that a correct client fails
//! about once in a million runs. Configurations include ε ≥ 10 and d ≥ 1024.
//!
//! Ignored by plain `cargo test`: it needs the built JS client. scripts/js_client_test.sh
//! builds it and runs `cargo test --workspace --test client_distribution -- --ignored`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use ldpstream_config::MechanismConfig;
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::stats::chi2_sf;

const ALPHA: f64 = 1e-6;

struct Case {
    mechanism: &'static str,
    value: u32,
    n: u64,
}

fn cases() -> Vec<Case> {
    let case = |mechanism, value, n| Case {
        mechanism,
        value,
        n,
    };
    vec![
        case(r#"{"kind":"grr","epsilon":1.0,"domain":4}"#, 0, 1_000_000),
        case(r#"{"kind":"grr","epsilon":1.0,"domain":4}"#, 3, 1_000_000),
        case(
            r#"{"kind":"grr","epsilon":10.0,"domain":1024}"#,
            5,
            1_000_000,
        ),
        case(
            r#"{"kind":"bitflip","epsilon":1.0,"domain":16}"#,
            0,
            1_000_000,
        ),
        // 1024 exact Bernoullis per report: 10^5 reports (10^8 bits) keep the run short.
        case(
            r#"{"kind":"bitflip","epsilon":10.0,"domain":1024}"#,
            1000,
            100_000,
        ),
        case(
            r#"{"kind":"hadamard","epsilon":1.0,"domain":5}"#,
            4,
            1_000_000,
        ),
        case(
            r#"{"kind":"hadamard","epsilon":10.0,"domain":1024}"#,
            700,
            1_000_000,
        ),
        case(
            r#"{"kind":"cohort","epsilon":1.0,"domain":16,"cohorts":64,"seed":7}"#,
            3,
            1_000_000,
        ),
        case(
            r#"{"kind":"cohort","epsilon":10.0,"domain":64,"cohorts":256,"seed":1}"#,
            63,
            1_000_000,
        ),
        case(
            r#"{"kind":"matrix","matrix":[[0.7,0.5],[0.2,0.3],[0.1,0.2]]}"#,
            0,
            1_000_000,
        ),
        case(
            r#"{"kind":"matrix","matrix":[[0.7,0.5],[0.2,0.3],[0.1,0.2]]}"#,
            1,
            1_000_000,
        ),
    ]
}

/// What one true value's reports are tested on.
enum Law {
    /// P(output) per output index (hadamard, cohort: 2·index + (report < 0)).
    Cells(Vec<f64>),
    /// P(bit j = 1), the bits independent (bitflip).
    Bits(Vec<f64>),
}

fn law(m: &Mechanism, x: u32) -> Law {
    let signed = |count: u32, truth: &dyn Fn(u32) -> i8, lie: f64| {
        let share = 1.0 / f64::from(count);
        let cells = (0..count).flat_map(|j| {
            let plus = if truth(j) > 0 { 1.0 - lie } else { lie };
            [share * plus, share * (1.0 - plus)]
        });
        Law::Cells(cells.collect())
    };
    match m {
        Mechanism::Grr(g) => {
            let mut one_hot = vec![0.0; g.domain() as usize];
            one_hot[x as usize] = 1.0;
            Law::Cells(g.report_law(&one_hot))
        }
        Mechanism::Channel(c) => {
            Law::Cells((0..c.signals()).map(|s| c.entry(s, x as usize)).collect())
        }
        Mechanism::BitFlip(b) => Law::Bits(
            (0..b.domain())
                .map(|j| {
                    if j == x {
                        b.keep_probability()
                    } else {
                        b.flip()
                    }
                })
                .collect(),
        ),
        Mechanism::Hadamard(h) => signed(
            h.rows(),
            &|j| ldpstream_engine::mechanism::Hadamard::entry(j, x),
            h.one_minus_two_eta() / 2.0,
        ),
        Mechanism::Cohort(c) => signed(c.cohorts(), &|j| c.sign(j, x), c.one_minus_two_eta() / 2.0),
        other => panic!("no client randomizer for {}", other.kind()),
    }
}

/// Pearson's χ² of the counts against the law, with its degrees of freedom. A report in a
/// cell of probability 0 is a failure by itself (p-value 0).
fn chi2(law: &Law, counts: &[u64], n: u64) -> (f64, u32) {
    let nf = n as f64;
    match law {
        Law::Cells(p) => {
            let mut stat = 0.0;
            let mut cells = 0;
            for (i, &pi) in p.iter().enumerate() {
                let c = counts.get(i).copied().unwrap_or(0) as f64;
                if pi == 0.0 {
                    if c > 0.0 {
                        return (f64::INFINITY, 1);
                    }
                    continue;
                }
                stat += (c - nf * pi).powi(2) / (nf * pi);
                cells += 1;
            }
            if counts.iter().skip(p.len()).any(|&c| c > 0) {
                return (f64::INFINITY, 1); // an output the mechanism cannot produce
            }
            (stat, cells - 1)
        }
        // Independent binomials: Σ z² is χ² with one degree per bit.
        Law::Bits(p) => {
            let stat = p
                .iter()
                .zip(counts)
                .map(|(&pj, &c)| (c as f64 - nf * pj).powi(2) / (nf * pj * (1.0 - pj)))
                .sum();
            (stat, p.len() as u32)
        }
    }
}

/// The engine's own randomizer, `rand::rng()`: counts in the layout of `law`.
fn engine_counts(m: &Mechanism, x: u32, n: u64) -> Vec<u64> {
    match m {
        Mechanism::BitFlip(b) => {
            let mut ones = vec![0u64; b.domain() as usize];
            for _ in 0..n {
                let r = b.randomize(x).unwrap();
                for (j, one) in ones.iter_mut().enumerate() {
                    *one += u64::from((r[j / 8] >> (j % 8)) & 1);
                }
            }
            ones
        }
        _ => {
            let mut counts = Vec::new();
            let mut rng = rand::rng();
            for _ in 0..n {
                let s = ldpstream_engine::audit::sample_output(m, x, &mut rng).unwrap();
                if counts.len() <= s {
                    counts.resize(s + 1, 0);
                }
                counts[s] += 1;
            }
            counts
        }
    }
}

fn js_sampler(case: &Case) -> Child {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let script = root.join("clients/js/scripts/sample.mjs");
    assert!(
        root.join("clients/js/dist/src/index.js").exists(),
        "the JS client is not built: run scripts/js_client_test.sh (npm ci && npm run build in clients/js)"
    );
    Command::new("node")
        .arg(script)
        .arg(case.mechanism)
        .arg(case.value.to_string())
        .arg(case.n.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("node (v18 or later) on PATH")
}

/// The JS sampler's JSON: an object of output → count, or an array of per-bit counts.
fn js_counts(child: Child) -> Vec<u64> {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "node sample.mjs failed");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    match v {
        serde_json::Value::Array(a) => a.iter().map(|c| c.as_u64().unwrap()).collect(),
        serde_json::Value::Object(o) => {
            let mut counts = Vec::new();
            for (k, c) in o {
                let s: usize = k.parse().unwrap();
                if counts.len() <= s {
                    counts.resize(s + 1, 0);
                }
                counts[s] = c.as_u64().unwrap();
            }
            counts
        }
        other => panic!("unexpected sampler output {other}"),
    }
}

#[test]
#[ignore = "needs the built JS client: scripts/js_client_test.sh runs it"]
fn every_implementation_samples_the_law_the_server_debiases_with() {
    let cases = cases();
    // The JS samplers run in their own processes while the engine samples here.
    let children: Vec<Child> = cases.iter().map(js_sampler).collect();
    let mut failures = Vec::new();
    for (case, child) in cases.iter().zip(children) {
        let config: MechanismConfig = serde_json::from_str(case.mechanism).unwrap();
        let m = Mechanism::from_config(&config).unwrap();
        let law = law(&m, case.value);
        for (who, counts) in [
            ("engine", engine_counts(&m, case.value, case.n)),
            ("js", js_counts(child)),
        ] {
            let (stat, df) = chi2(&law, &counts, case.n);
            let p = chi2_sf(df, stat);
            println!(
                "{who:6} {} x={} n={}: chi2 {stat:.1} df {df} p {p:.4}",
                case.mechanism, case.value, case.n
            );
            if p.is_nan() || p < ALPHA {
                failures.push(format!(
                    "{who} {} x={}: p = {p:e}",
                    case.mechanism, case.value
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "rejected at alpha = {ALPHA}: {failures:#?}"
    );
}
