//! Issue 31, multiplicity across groups: a sequential monitor of G groups, each at α,
//! raises about G·α false alarms. Alerting on the anytime q-value (Benjamini–Hochberg over
//! the groups' anytime p-values, as `SequentialLatches` sets `anytime_q_value`) keeps the
//! false discovery rate across groups at most α. Seeded simulation: 1,000 groups of which
//! 50 are non-null, GenRR d = 4, ε = 1, 20 looks of 200 reports per group; a group is an
//! alarm once its anytime q-value is ≤ α at any look.
//!
//! `cargo test -p ldpstream-engine --test sequential_fdr -- --nocapture` prints the table;
//! 100 monitors by default (CI); `LDPSTREAM_FDR_MONITORS` sets another count
//! (benches/sequential.sh: 200).

use crate::eprocess::{gof_e_process, SequentialState};
use crate::mechanism::{Grr, Mechanism};
use crate::sketch::{CountSketch, Sketch};
use crate::stats::{bh_q_values, sample_multinomial};
use rand::rngs::StdRng;
use rand::SeedableRng;

const ALPHA: f64 = 0.05;
const GROUPS: usize = 1000;
const NON_NULL: usize = 50;
const LOOKS: usize = 20;
const STEP: u64 = 200;

fn monitors() -> usize {
    std::env::var("LDPSTREAM_FDR_MONITORS")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(100)
}

/// One monitor: (false alarms, true alarms) with alarms by the anytime q-value, and the
/// false alarms of alerting on each group's own anytime p-value.
fn monitor(seed: u64) -> (usize, usize, usize) {
    let grr = Grr::new(1.0, 4).unwrap();
    let m = Mechanism::Grr(grr);
    let p0 = [0.25; 4];
    let q_null = grr.report_law(&p0);
    let q_alt = grr.report_law(&[0.4, 0.2, 0.2, 0.2]);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut counts = vec![vec![0u64; 4]; GROUPS];
    let mut states = vec![SequentialState::default(); GROUPS];
    let mut alarmed = vec![false; GROUPS];
    let mut alone = vec![false; GROUPS];
    for _ in 0..LOOKS {
        let mut p = Vec::with_capacity(GROUPS);
        for g in 0..GROUPS {
            let law = if g < NON_NULL { &q_alt } else { &q_null };
            let inc = sample_multinomial(&mut rng, STEP, law).unwrap();
            counts[g].iter_mut().zip(inc).for_each(|(a, b)| *a += b);
            let sketch = Sketch::Counts(CountSketch::from_counts(counts[g].clone()));
            let e = gof_e_process(&m, &sketch, &p0).unwrap().e_value();
            let look = states[g].observe(e, ALPHA);
            alone[g] |= look.reject;
            p.push(Some(look.anytime_p_value));
        }
        for (g, q) in bh_q_values(&p).into_iter().enumerate() {
            alarmed[g] |= q.is_some_and(|q| q <= ALPHA);
        }
    }
    let false_alarms = alarmed[NON_NULL..].iter().filter(|&&a| a).count();
    let true_alarms = alarmed[..NON_NULL].iter().filter(|&&a| a).count();
    let alone_false = alone[NON_NULL..].iter().filter(|&&a| a).count();
    (false_alarms, true_alarms, alone_false)
}

#[test]
fn alerting_on_the_anytime_q_value_keeps_the_fdr_across_groups_at_alpha() {
    let runs = monitors();
    let (mut fdr_sum, mut any_false, mut power_sum, mut alone_any) = (0.0, 0, 0.0, 0);
    let mut fdrs = Vec::with_capacity(runs);
    for run in 0..runs {
        let (f, t, alone_false) = monitor(0xfd7 + run as u64);
        let fdr = f as f64 / (f + t).max(1) as f64;
        fdrs.push(fdr);
        fdr_sum += fdr;
        any_false += usize::from(f > 0);
        power_sum += t as f64 / NON_NULL as f64;
        alone_any += usize::from(alone_false > 0);
    }
    let n = runs as f64;
    let mean = fdr_sum / n;
    let sd = (fdrs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let se = sd / n.sqrt();
    eprintln!(
        "| {runs} monitors | FDR {mean:.4} ± {se:.4} | P(any false alarm) {:.3} | power {:.3} | \
         P(any false alarm), each group at alpha alone {:.3} |",
        any_false as f64 / n,
        power_sum / n,
        alone_any as f64 / n
    );
    assert!(
        mean <= ALPHA + 2.0 * se,
        "FDR {mean} > {ALPHA} + 2 SE ({se})"
    );
    assert!(
        power_sum / n > 0.5,
        "the non-null groups must mostly be found"
    );
}
