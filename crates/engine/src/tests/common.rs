//! What the frequency-oracle tests share (issue 30's "Numbers to reach" for estimates).

/// The estimate check's acceptance, one rule for every oracle: the empirical variance
/// within 5% of the closed form (`ratio`), and the means within 3 s.e. of the truth at
/// d = 16; at large d, where d × datasets z-scores are looked at, the worst within 4.5 s.e.
/// and at most 1% of categories (`beyond`) past 3 s.e.
pub fn assert_estimates_match(label: &str, d: u64, ratio: f64, worst: f64, beyond: f64) {
    assert!((ratio - 1.0).abs() <= 0.05, "{label} d={d}: ratio {ratio}");
    if d == 16 {
        assert!(worst <= 3.0, "{label} d={d}: worst |z| {worst}");
    } else {
        assert!(
            worst <= 4.5 && beyond <= 0.01,
            "{label} d={d}: worst |z| {worst}, share beyond 3 s.e. {beyond}"
        );
    }
}

/// Datasets per case: `LDPSTREAM_ORACLE_RUNS` (benches/oracles.sh sets 1,000), else the
/// test's own few.
pub fn runs_or(default: usize) -> usize {
    std::env::var("LDPSTREAM_ORACLE_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// An OLH mechanism with a pool of `pool_size` seeds (None: the default), g by the config's
/// rule unless given.
pub fn olh_mechanism(
    epsilon: f64,
    domain: u32,
    g: Option<u32>,
    pool_size: Option<u32>,
    pool_seed: u64,
) -> crate::mechanism::Mechanism {
    crate::mechanism::Mechanism::from_config(&ldpstream_config::MechanismConfig::Olh {
        epsilon,
        domain,
        g,
        pool_size,
        pool_seed,
    })
    .unwrap()
}

/// The OLH inside `m`, which the caller built as one.
pub fn olh_of(m: &crate::mechanism::Mechanism) -> &crate::mechanism::Olh {
    match m {
        crate::mechanism::Mechanism::Olh(o) => o,
        _ => unreachable!("an OLH mechanism"),
    }
}
