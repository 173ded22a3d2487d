//! Curator-model releases and the privacy ledger: the groups of one window are disjoint
//! sets of reports, so their releases compose in parallel; an empty window spends nothing.

use std::collections::BTreeMap;

use crate::curator::ledger::PrivacyLedger;
use crate::hypothesis::{evaluate_private, Scope};
use crate::mechanism::Mechanism;
use crate::sketch::{CountSketch, Sketch};
use ldpstream_config::Config;
use rand::rngs::StdRng;
use rand::SeedableRng;

const CONFIG: &str = r#"
[[stream]]
name = "raw"
source = { kind = "parquet", paths = ["x.parquet"] }
mechanism = { kind = "raw", domain = 10 }
columns = { report = "report", group_by = ["site"] }
budget_epsilon = 1.0
[[stream.test]]
name = "uniform"
kind = "uniformity"
method = "PrivateCollisions"
epsilon = 1.0
mc_samples = 99
window = { kind = "tumbling", size = "1h" }
"#;

fn scope(site: usize) -> Scope {
    Scope {
        group: Some(BTreeMap::from([(
            "site".to_string(),
            Some(format!("s{site:02}")),
        )])),
        window_start: Some("2026-01-01T00:00:00Z".into()),
        window_end: Some("2026-01-01T01:00:00Z".into()),
        look: false,
    }
}

/// 50 groups under a budget that covers one release per window: every group gets its
/// result, none is refused, and a second round in the same window is refused everywhere.
#[test]
fn every_group_of_a_window_gets_its_release() {
    let config = Config::from_toml_str(CONFIG, "test.toml").unwrap();
    let (stream, test) = (&config.streams[0], &config.streams[0].tests[0]);
    let mechanism = Mechanism::from_config(&stream.mechanism).unwrap();
    let mut ledger = PrivacyLedger::new(1.0);
    let mut noise = StdRng::seed_from_u64(1);
    let sketch = Sketch::Counts(CountSketch::from_counts(vec![30; 10]));
    let window = (Some(0), Some(3_600_000));
    for site in 0..50 {
        let r = evaluate_private(
            stream,
            test,
            &mechanism,
            scope(site),
            &sketch,
            window,
            &mut ledger,
            &mut noise,
            None,
        )
        .unwrap();
        assert_eq!(r.refused, None, "group {site}: {r:?}");
        assert!(r.statistic.is_some() && r.p_value.is_some(), "group {site}");
        assert_eq!(r.epsilon_spent, Some(1.0));
        assert_eq!(r.budget_remaining, Some(0.0));
    }
    let again = evaluate_private(
        stream,
        test,
        &mechanism,
        scope(3),
        &sketch,
        window,
        &mut ledger,
        &mut noise,
        None,
    )
    .unwrap();
    assert_eq!(again.refused.as_deref(), Some("privacy budget exhausted"));
    // The next window has its whole budget again.
    let next = evaluate_private(
        stream,
        test,
        &mechanism,
        scope(3),
        &sketch,
        (Some(3_600_000), Some(7_200_000)),
        &mut ledger,
        &mut noise,
        None,
    )
    .unwrap();
    assert_eq!(next.refused, None);
}

/// A window without reports releases nothing, so it must not spend ε.
#[test]
fn an_empty_window_spends_nothing() {
    let config = Config::from_toml_str(CONFIG, "test.toml").unwrap();
    let (stream, test) = (&config.streams[0], &config.streams[0].tests[0]);
    let mechanism = Mechanism::from_config(&stream.mechanism).unwrap();
    let mut ledger = PrivacyLedger::new(1.0);
    let mut noise = StdRng::seed_from_u64(2);
    let empty = mechanism.new_sketch();
    let window = (Some(0), Some(3_600_000));
    let r = evaluate_private(
        stream,
        test,
        &mechanism,
        scope(0),
        &empty,
        window,
        &mut ledger,
        &mut noise,
        None,
    )
    .unwrap();
    assert!(r.inconclusive);
    assert_eq!(r.epsilon_spent, None);
    assert_eq!(r.budget_remaining, Some(1.0));
    assert!(ledger.spends.is_empty(), "{ledger:?}");
}

/// Issue 43 (ledger_other): the overflow group's reports change with `max_groups` and the
/// arrival order, so a release on it could charge any group: it is refused, spending
/// nothing, and names `max_groups`.
#[test]
fn the_overflow_group_is_never_released() {
    let config = Config::from_toml_str(CONFIG, "test.toml").unwrap();
    let (stream, test) = (&config.streams[0], &config.streams[0].tests[0]);
    let mechanism = Mechanism::from_config(&stream.mechanism).unwrap();
    let mut ledger = PrivacyLedger::new(1.0);
    let mut noise = StdRng::seed_from_u64(1);
    let sketch = Sketch::Counts(CountSketch::from_counts(vec![30; 10]));
    let overflow = Scope {
        group: Some(BTreeMap::from([(
            "site".to_string(),
            Some(crate::window::OTHER_GROUP.to_string()),
        )])),
        ..scope(0)
    };
    let r = evaluate_private(
        stream,
        test,
        &mechanism,
        overflow,
        &sketch,
        (Some(0), Some(3_600_000)),
        &mut ledger,
        &mut noise,
        None,
    )
    .unwrap();
    assert_eq!(r.refused.as_deref(), Some("overflow group: not released"));
    assert!(r.statistic.is_none() && r.p_value.is_none() && r.epsilon_spent.is_none());
    assert!(
        r.inconclusive_reason
            .as_deref()
            .is_some_and(|m| m.contains("max_groups = 10000")),
        "{r:?}"
    );
    assert!(ledger.spends.is_empty());
}
