//! Distribution conformance (conformance/README.md): reports drawn from each
//! implementation's real CSPRNG (the engine's `rand::rng()`, the JS client's
//! `crypto.getRandomValues`, the Python package's `Mechanism.randomize` without a seed)
//! must follow the law the server debiases with, by a χ² test at α = 1e-6 per
//! (implementation, mechanism, true value), so that a correct client fails about once in a
//! million runs. Configurations include ε ≥ 10 and d ≥ 1024. Subset reports are tested
//! whole (colex-numbered cells) where C(d, k) is small, else on their item counts
//! (`items_chi2`). OLH reports are tested whole, as cells seed·g + bucket of the S × g table.
//!
//! Ignored by plain `cargo test`: it needs the built JS client and the Python package in
//! .venv-py (scripts/python_env.sh; `LDPSTREAM_PYTHON` names another interpreter).
//! scripts/js_client_test.sh runs `cargo test --workspace --test client_distribution --
//! --ignored`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use crate::mechanism::Mechanism;
use crate::stats::chi2_sf;
use ldpstream_config::MechanismConfig;

const ALPHA: f64 = 1e-6;

struct Case {
    mechanism: &'static str,
    value: u32,
    n: u64,
}

/// Subset reports are tested whole (each k-subset a cell, by its colex index, the numbering
/// the audit uses) while C(d, k) is at most this; beyond it on their item counts.
const SUBSET_CELLS: u64 = 10_000;

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
        case(r#"{"kind":"oue","epsilon":1.0,"domain":16}"#, 3, 1_000_000),
        case(
            r#"{"kind":"oue","epsilon":10.0,"domain":1024}"#,
            17,
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
        // subset, C(d, k) cells: 10 subsets; and at ε = 10 the one subset without x
        // (P ≈ e^-10/5, ~9 reports in 10^6).
        case(
            r#"{"kind":"subset","epsilon":1.0,"domain":5,"k":2}"#,
            0,
            1_000_000,
        ),
        case(
            r#"{"kind":"subset","epsilon":10.0,"domain":6,"k":5}"#,
            2,
            1_000_000,
        ),
        // subset, item counts: d = 1024 with Floyd's draw (k = 8) at ε = 10, and with the
        // partial shuffle (default k = 123) at ε = 2, whose 123 draws per report in JS
        // take 10^5 reports to a second and a half.
        case(
            r#"{"kind":"subset","epsilon":10.0,"domain":1024,"k":8}"#,
            0,
            1_000_000,
        ),
        case(
            r#"{"kind":"subset","epsilon":2.0,"domain":1024}"#,
            512,
            100_000,
        ),
        // olh: every (seed, bucket) cell, so S·g is kept small enough for a χ² table (32,
        // 128 and 64 cells; the default S = 1024 would leave too few reports per cell); the
        // default g = round(e²)+1 = 8 at d = 1024; at ε = 10 the lie cells expect ~11 reports.
        case(
            r#"{"kind":"olh","epsilon":1.0,"domain":16,"g":4,"pool_size":8,"pool_seed":3}"#,
            5,
            1_000_000,
        ),
        case(
            r#"{"kind":"olh","epsilon":2.0,"domain":1024,"pool_size":16}"#,
            1000,
            1_000_000,
        ),
        case(
            r#"{"kind":"olh","epsilon":10.0,"domain":1024,"g":16,"pool_size":4,"pool_seed":9}"#,
            1023,
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
    /// subset item counts: the true value x, the subset size k, P(x ∈ S) and the number of
    /// categories d.
    Items { x: u32, k: u32, keep: f64, d: u32 },
}

/// `C(n, k)` in f64 (exact for the small cells tested here).
fn choose(n: u64, k: u64) -> f64 {
    if k > n {
        return 0.0;
    }
    (1..=k).fold(1.0, |c, i| c * (n - k + i) as f64 / i as f64)
}

fn subset_cells(d: u64, k: u64) -> bool {
    choose(d, k) <= SUBSET_CELLS as f64
}

/// P(S | x) per colex index Σ_i C(s_i, i+1) of S: p/C(d−1, k−1) when x ∈ S, else
/// (1 − p)/C(d−1, k), every k-subset enumerated.
fn subset_law(d: u32, k: u32, x: u32, keep: f64, miss: f64) -> Vec<f64> {
    let (d64, k64) = (u64::from(d), u64::from(k));
    let mut law = vec![0.0; choose(d64, k64).round() as usize];
    let mut s: Vec<u32> = (0..k).collect();
    loop {
        let index: f64 = s
            .iter()
            .enumerate()
            .map(|(i, &v)| choose(u64::from(v), i as u64 + 1))
            .sum();
        law[index.round() as usize] = if s.contains(&x) {
            keep / choose(d64 - 1, k64 - 1)
        } else {
            miss / choose(d64 - 1, k64)
        };
        // The next k-subset in lexicographic order, or stop.
        let Some(i) = (0..k as usize).rev().find(|&i| s[i] < d - k + i as u32) else {
            return law;
        };
        s[i] += 1;
        for j in i + 1..k as usize {
            s[j] = s[j - 1] + 1;
        }
    }
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
            &|j| crate::mechanism::Hadamard::entry(j, x),
            h.one_minus_two_eta() / 2.0,
        ),
        Mechanism::Cohort(c) => signed(c.cohorts(), &|j| c.sign(j, x), c.one_minus_two_eta() / 2.0),
        Mechanism::Subset(m) if subset_cells(m.domain().into(), m.k().into()) => {
            Law::Cells(subset_law(
                m.domain(),
                m.k(),
                x,
                m.keep_probability(),
                m.miss_probability(),
            ))
        }
        // Cell i·g + y: the index uniform over the pool, then GenRR over the g buckets around
        // h_i(x) (the row law the server's support counts and GOF test use).
        Mechanism::Olh(m) => {
            let (q, keep) = (m.q(), m.q() + m.p_minus_q());
            let share = 1.0 / f64::from(m.pool_size());
            Law::Cells(
                (0..m.pool_size())
                    .flat_map(|i| {
                        let truth = m.bucket(i, x);
                        (0..m.g()).map(move |y| share * if y == truth { keep } else { q })
                    })
                    .collect(),
            )
        }
        Mechanism::Subset(m) => Law::Items {
            x,
            k: m.k(),
            keep: m.keep_probability(),
            d: m.domain(),
        },
        other => panic!("no client randomizer for {}", other.kind()),
    }
}

/// Cells expected to hold fewer reports than this are pooled into one (Cochran's rule):
/// Hadamard at ε = 10, d = 1024 has 1,024 lie cells expecting 0.044 reports each, where one
/// cell with 4 reports adds 360 to Pearson's sum and a correct sampler failed at α = 10⁻⁶
/// (p = 1.6·10⁻⁸). Pooled, those cells are one cell expecting 45.
const MIN_EXPECTED: f64 = 5.0;

/// Pearson's χ² of the counts against the law, with its degrees of freedom. A report in a
/// cell of probability 0 is a failure by itself (p-value 0).
fn chi2(law: &Law, counts: &[u64], n: u64) -> (f64, u32) {
    let nf = n as f64;
    match law {
        Law::Cells(p) => {
            let mut stat = 0.0;
            let mut cells = 0;
            let (mut pooled_expected, mut pooled_count) = (0.0, 0.0);
            for (i, &pi) in p.iter().enumerate() {
                let c = counts.get(i).copied().unwrap_or(0) as f64;
                if pi == 0.0 {
                    if c > 0.0 {
                        return (f64::INFINITY, 1);
                    }
                    continue;
                }
                if nf * pi < MIN_EXPECTED {
                    pooled_expected += nf * pi;
                    pooled_count += c;
                    continue;
                }
                stat += (c - nf * pi).powi(2) / (nf * pi);
                cells += 1;
            }
            if pooled_expected > 0.0 {
                stat += (pooled_count - pooled_expected).powi(2) / pooled_expected;
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
        Law::Items { x, k, keep, d } => items_chi2(*x, *k, *keep, *d, counts, n),
    }
}

/// Item counts c_j of n subset reports. c_x ~ Binomial(n, p): one z². Given which reports
/// hold x (c_x of them), each report's other members are a uniform m-subset of the N = d − 1
/// other categories (m = k − 1 or k), whose indicators have covariance
/// v_m·N/(N−1)·(I − J/N), v_m = (m/N)(1 − m/N). So the deviations of the other counts from
/// their mean, scaled by V = c_x·v_{k−1} + (n − c_x)·v_k, give Σ (c_j − c̄)²·(N−1)/(N·V),
/// asymptotically χ² with N − 1 degrees, independent of the z². Together: χ²(N).
fn items_chi2(x: u32, k: u32, keep: f64, d: u32, counts: &[u64], n: u64) -> (f64, u32) {
    let nf = n as f64;
    let cx = counts[x as usize] as f64;
    let z2 = (cx - nf * keep).powi(2) / (nf * keep * (1.0 - keep));
    let big_n = f64::from(d - 1);
    let v = |m: f64| (m / big_n) * (1.0 - m / big_n);
    let var = cx * v(f64::from(k) - 1.0) + (nf - cx) * v(f64::from(k));
    let others: Vec<f64> = (0..d)
        .filter(|&j| j != x)
        .map(|j| counts.get(j as usize).copied().unwrap_or(0) as f64)
        .collect();
    let mean = others.iter().sum::<f64>() / big_n;
    let spread: f64 = others.iter().map(|c| (c - mean).powi(2)).sum();
    (z2 + spread * (big_n - 1.0) / (big_n * var), d - 1)
}

/// The engine's own randomizer, `rand::rng()`: counts in the layout of `law`.
fn engine_counts(m: &Mechanism, x: u32, n: u64) -> Vec<u64> {
    match m {
        Mechanism::Subset(s) if !subset_cells(s.domain().into(), s.k().into()) => {
            let mut items = vec![0u64; s.domain() as usize];
            for _ in 0..n {
                for j in s.randomize(x).unwrap() {
                    items[j as usize] += 1;
                }
            }
            items
        }
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
                let s = crate::audit::sample_output(m, x, &mut rng).unwrap();
                if counts.len() <= s {
                    counts.resize(s + 1, 0);
                }
                counts[s] += 1;
            }
            counts
        }
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Subset reports over too many subsets to be cells are sampled as per-item counts.
fn items_mode(case: &Case) -> bool {
    let config: MechanismConfig = serde_json::from_str(case.mechanism).unwrap();
    match Mechanism::from_config(&config).unwrap() {
        Mechanism::Subset(s) => !subset_cells(s.domain().into(), s.k().into()),
        _ => false,
    }
}

fn js_sampler(case: &Case) -> Child {
    let items = items_mode(case);
    let root = root();
    assert!(
        root.join("clients/js/dist/index.js").exists(),
        "the JS client is not built: run scripts/js_client_test.sh (npm ci && npm run build in clients/js)"
    );
    Command::new("node")
        .arg(root.join("clients/js/scripts/sample.mjs"))
        .arg(case.mechanism)
        .arg(case.value.to_string())
        .arg(case.n.to_string())
        .args(items.then_some("--items"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("node (v18 or later) on PATH")
}

/// python/tests/client_samples.py: `Mechanism.randomize` from the OS-seeded CSPRNG.
fn python_sampler(case: &Case) -> Child {
    let python = std::env::var_os("LDPSTREAM_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".venv-py/bin/python"));
    assert!(
        python.exists(),
        "no Python with the ldpstream package at {}: run scripts/python_env.sh or set LDPSTREAM_PYTHON",
        python.display()
    );
    Command::new(python)
        .arg(root().join("python/tests/client_samples.py"))
        .arg(case.mechanism)
        .arg(case.value.to_string())
        .arg(case.n.to_string())
        .args(items_mode(case).then_some("--items"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("the Python interpreter starts")
}

/// A client sampler's JSON: an object of output → count, or an array of per-bit counts.
fn client_counts(child: Child) -> Vec<u64> {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the client's sampler failed");
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
#[ignore = "needs the built JS client and Python package: scripts/js_client_test.sh runs it"]
fn every_implementation_samples_the_law_the_server_debiases_with() {
    let cases = cases();
    // The client samplers run in their own processes while the engine samples here.
    let children: Vec<(Child, Child)> = cases
        .iter()
        .map(|c| (js_sampler(c), python_sampler(c)))
        .collect();
    let mut failures = Vec::new();
    for (case, (js, python)) in cases.iter().zip(children) {
        let config: MechanismConfig = serde_json::from_str(case.mechanism).unwrap();
        let m = Mechanism::from_config(&config).unwrap();
        let law = law(&m, case.value);
        for (who, counts) in [
            ("engine", engine_counts(&m, case.value, case.n)),
            ("js", client_counts(js)),
            ("python", client_counts(python)),
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

/// The item-count χ² can fail: engine reports at ε = 2 pass against their own law and are
/// rejected against ε = 1.8's, and so are the same counts with 1% of the reports moving
/// one member from category 1 to category 2 (the spread term alone sees that).
#[test]
fn subset_item_chi2_rejects_a_wrong_law() {
    let (d, k, x, n) = (64u32, 8u32, 3u32, 200_000u64);
    let m = crate::mechanism::Subset::new(2.0, d, Some(k)).unwrap();
    let mut counts = vec![0u64; d as usize];
    for _ in 0..n {
        for j in m.randomize(x).unwrap() {
            counts[j as usize] += 1;
        }
    }
    let p_value = |keep: f64, counts: &[u64]| {
        let (stat, df) = items_chi2(x, k, keep, d, counts, n);
        chi2_sf(df, stat)
    };
    assert!(p_value(m.keep_probability(), &counts) > ALPHA);
    let wrong = crate::mechanism::Subset::new(1.8, d, Some(k)).unwrap();
    assert!(p_value(wrong.keep_probability(), &counts) < ALPHA);
    let mut moved = counts.clone();
    moved[1] -= n / 100;
    moved[2] += n / 100;
    assert!(p_value(m.keep_probability(), &moved) < ALPHA);
}

/// The OLH cell χ² can fail: engine reports pass against their own pool's law and are
/// rejected against the law of another pool seed (other hashes) and of ε = 0.8 for 1.
#[test]
fn olh_cell_chi2_rejects_a_wrong_law() {
    let olh = |epsilon, seed| {
        Mechanism::Olh(Box::new(
            crate::mechanism::Olh::new(epsilon, 16, 4, 8, seed).unwrap(),
        ))
    };
    let (m, x, n) = (olh(1.0, 3), 5u32, 200_000u64);
    let counts = engine_counts(&m, x, n);
    let p_value = |other: &Mechanism| {
        let (stat, df) = chi2(&law(other, x), &counts, n);
        chi2_sf(df, stat)
    };
    assert!(p_value(&m) > ALPHA);
    assert!(p_value(&olh(1.0, 4)) < ALPHA);
    assert!(p_value(&olh(0.8, 3)) < ALPHA);
}
