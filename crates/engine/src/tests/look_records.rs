//! A sequential test's provisional looks leave out what costs far more than their decision
//! (docs/STATISTICS.md §10.1, "What a look record leaves out"): the EM maximum-likelihood
//! estimate (matrix, Hadamard, cohort) and OLH's simulated fixed-n p-value. Every other
//! field of a look record is what the same evaluation writes in a final record, and the
//! mechanisms without such a cost write identical look and final records.

use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::Value;

use crate::hypothesis::{evaluate, Scope};
use crate::mechanism::{simulate_sketch, Mechanism};
use crate::record::TestRecord;
use crate::sketch::Sketch;
use crate::stream::{evaluate_snapshot, Private, Sequential, WindowSnapshot};
use ldpstream_config::{Config, StreamConfig};

fn stream(mechanism: &str) -> StreamConfig {
    let toml = format!(
        "[[stream]]\nname = \"s\"\nsource = {{ kind = \"parquet\", paths = [\"x\"] }}\n\
         mechanism = {mechanism}\n\
         [[stream.test]]\nname = \"t\"\nkind = \"gof\"\nnull = \"uniform\"\nsequential = true\n\
         mc_samples = 21\nwindow = {{ kind = \"tumbling\", size = \"1d\", looks = \"1h\" }}\n"
    );
    Config::from_toml_str(&toml, "t").unwrap().streams.remove(0)
}

/// A sketch of `n` reports of a skewed law (category j drawn ∝ d − j), through the client
/// randomizer and the fold.
fn sketch_of(m: &Mechanism, n: usize) -> Sketch {
    let d = m.domain();
    let total = (d * (d + 1) / 2) as f64;
    let p: Vec<f64> = (0..d).map(|j| (d - j) as f64 / total).collect();
    simulate_sketch(m, &p, n, &mut StdRng::seed_from_u64(44)).unwrap()
}

/// The record of `n` reports, evaluated as a look and as the final record.
fn records(stream: &StreamConfig, n: usize) -> (TestRecord, TestRecord) {
    let m = Mechanism::from_config(&stream.mechanism).unwrap();
    let sketch = sketch_of(&m, n);
    let at = |look| Scope {
        window_start: Some("2026-01-01T00:00:00Z".into()),
        window_end: Some("2026-01-02T00:00:00Z".into()),
        look,
        ..Scope::default()
    };
    let test = &stream.tests[0];
    (
        evaluate(stream, test, &m, at(true), &sketch).unwrap(),
        evaluate(stream, test, &m, at(false), &sketch).unwrap(),
    )
}

fn without(record: &TestRecord, fields: &[&str]) -> Value {
    let mut v = serde_json::to_value(record).unwrap();
    for f in fields {
        v.as_object_mut().unwrap().remove(*f);
    }
    v
}

const MLE: &[&str] = &["mle", "mle_converged", "mle_iterations", "mle_omitted"];
const FIXED_N: &[&str] = &[
    "statistic",
    "df",
    "p_value",
    "asymptotic_p_value",
    "mc_p_value",
    "critical_value",
    "calibration_reason",
];

#[test]
fn looks_leave_out_the_em_mle_and_olh_simulation_and_nothing_else() {
    // (mechanism, its MLE is EM's, its fixed-n test is simulated)
    let cases = [
        (
            "{ kind = \"hadamard\", epsilon = 1.0, domain = 16 }",
            true,
            false,
        ),
        (
            "{ kind = \"cohort\", epsilon = 1.0, domain = 16, cohorts = 32 }",
            true,
            false,
        ),
        (
            "{ kind = \"matrix\", matrix = [[0.6, 0.2, 0.2], [0.2, 0.6, 0.2], [0.2, 0.2, 0.6]] }",
            true,
            false,
        ),
        (
            "{ kind = \"olh\", epsilon = 1.0, domain = 16 }",
            false,
            true,
        ),
        (
            "{ kind = \"grr\", epsilon = 1.0, domain = 16 }",
            false,
            false,
        ),
        (
            "{ kind = \"oue\", epsilon = 1.0, domain = 16 }",
            false,
            false,
        ),
        (
            "{ kind = \"bitflip\", epsilon = 1.0, domain = 16 }",
            false,
            false,
        ),
        (
            "{ kind = \"subset\", epsilon = 1.0, domain = 16 }",
            false,
            false,
        ),
        ("{ kind = \"gauss\", rho = 0.5, domain = 16 }", false, false),
    ];
    for (mechanism, em, simulated) in cases {
        let stream = stream(mechanism);
        let (look, last) = records(&stream, 3_000);
        assert!(
            look.e_value.is_some(),
            "{mechanism}: a look has its e-value"
        );
        assert_eq!(look.e_value, last.e_value, "{mechanism}");
        assert_eq!(look.reject, last.reject, "{mechanism}");
        if em {
            assert!(
                !last.mle.is_empty(),
                "{mechanism}: the final record has the MLE"
            );
            assert!(look.mle.is_empty(), "{mechanism}");
            let why = look.mle_omitted.as_deref().unwrap_or_default();
            assert!(
                why.contains("a provisional record of a sequential test"),
                "{mechanism}: {why}"
            );
        }
        if simulated {
            assert!(
                last.mc_p_value.is_some() && last.p_value.is_some(),
                "{mechanism}"
            );
            assert_eq!((look.p_value, look.mc_p_value), (None, None), "{mechanism}");
            let why = look.calibration_reason.as_deref().unwrap_or_default();
            assert!(why.contains("final record only"), "{mechanism}: {why}");
        }
        let mut differ: Vec<&str> = Vec::new();
        if em {
            differ.extend(MLE);
        }
        if simulated {
            differ.extend(FIXED_N);
        }
        assert_eq!(
            without(&look, &differ),
            without(&last, &differ),
            "{mechanism}: the rest of a look record is the final record's"
        );
    }
}

/// serve's periodic snapshot of an open window is a provisional record too: through the
/// same window evaluation serve runs, it has no EM MLE, and the final snapshot has it.
#[test]
fn a_provisional_snapshot_is_a_look_and_the_final_one_is_not() {
    let stream = stream("{ kind = \"hadamard\", epsilon = 1.0, domain = 16 }");
    let m = Mechanism::from_config(&stream.mechanism).unwrap();
    let sketches = std::collections::BTreeMap::from([(Vec::new(), sketch_of(&m, 3_000))]);
    let evaluated = |is_final| {
        let snapshot = WindowSnapshot {
            test: 0,
            bounds: None,
            is_final,
            late: 0,
            sketches: std::borrow::Cow::Borrowed(&sketches),
        };
        let mut private = Private {
            ledger: None,
            noise: &mut StdRng::seed_from_u64(1),
        };
        evaluate_snapshot(&stream, &m, &snapshot, &mut private, &Sequential).unwrap()
    };
    let (provisional, last) = (evaluated(false), evaluated(true));
    assert_eq!((provisional.len(), last.len()), (1, 1));
    assert!(
        provisional[0].mle.is_empty(),
        "{:?}",
        provisional[0].mle_omitted
    );
    assert!(!last[0].mle.is_empty());
    assert_eq!(provisional[0].e_value, last[0].e_value);
}
