//! Issue 31, confidence sequences: the per-category sequences in records cover the true
//! frequency at every look at once. Seeded simulation: GenRR d = 4, ε = 1, p = (0.4, 0.3,
//! 0.2, 0.1); 500 streams × 500 looks of 100 reports (n up to 50,000); a stream covers a
//! category when the category's frequency is inside its sequence at every look. Also
//! prints the width against the fixed-n Wald interval over n.
//!
//! `cargo test -p ldpstream-engine --test confidence_sequences -- --nocapture`.

use crate::eprocess::confidence::{confidence_sequence, width_in_standard_errors};
use crate::mechanism::{Grr, Mechanism};
use crate::sketch::{CountSketch, Sketch};
use crate::stats::sample_multinomial;
use rand::rngs::StdRng;
use rand::SeedableRng;

const ALPHA: f64 = 0.05;
const STREAMS: usize = 500;
const LOOKS: usize = 500;
const STEP: u64 = 100;

/// Runs the coverage simulation; `design_n` tunes the sequences to a planned n.
fn coverage(design_n: Option<u64>, seed: u64) {
    let grr = Grr::new(1.0, 4).unwrap();
    let m = Mechanism::Grr(grr);
    let p = [0.4, 0.3, 0.2, 0.1];
    let law = grr.report_law(&p);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut covered = [0usize; 4];
    let mut all_covered = 0usize;
    for _ in 0..STREAMS {
        let mut counts = vec![0u64; 4];
        let mut ok = [true; 4];
        for look in 1..=LOOKS as u64 {
            let inc = sample_multinomial(&mut rng, STEP, &law).unwrap();
            counts.iter_mut().zip(inc).for_each(|(a, b)| *a += b);
            let sketch = Sketch::Counts(CountSketch::from_counts(counts.clone()));
            let e = m.estimate(&sketch).unwrap();
            let (lo, hi) =
                confidence_sequence(&e.estimate, &e.std_error, look * STEP, ALPHA, design_n);
            for j in 0..4 {
                ok[j] &= lo[j] <= p[j] && p[j] <= hi[j];
            }
        }
        for j in 0..4 {
            covered[j] += usize::from(ok[j]);
        }
        all_covered += usize::from(ok.iter().all(|&c| c));
    }
    let s = STREAMS as f64;
    let bound = 1.0 - ALPHA - 2.0 * (ALPHA * (1.0 - ALPHA) / s).sqrt();
    for (j, &c) in covered.iter().enumerate() {
        let rate = c as f64 / s;
        eprintln!(
            "| design_n {design_n:?} | category {j} (p = {}) | covered at every look: \
             {rate:.3} | bound {bound:.3} |",
            p[j]
        );
        assert!(rate >= bound, "category {j}: coverage {rate} < {bound}");
    }
    eprintln!(
        "| all 4 categories at once | {:.3} | (Bonferroni guarantee 1 − 4α = 0.80) |",
        all_covered as f64 / s
    );
}

#[test]
fn sequences_cover_every_look_at_once() {
    coverage(None, 31);
}

/// Tuned to a planned n inside the looks' range (10,000 of 50,000 reports), where the
/// two-point component carries the boundary.
#[test]
fn tuned_sequences_cover_every_look_at_once() {
    coverage(Some(10_000), 32);
}

/// The price of time-uniformity: the sequence's half-width over the fixed-n Wald
/// interval's (1.96 standard errors at α = 0.05), by n: equal weights, and tuned to
/// `design_n` = 10⁶, where issue 31 asks for at most 1.5×.
#[test]
fn width_against_the_fixed_n_interval() {
    let wald = 1.959963984540054;
    for n in [
        1_000u64,
        10_000,
        100_000,
        1_000_000,
        10_000_000,
        100_000_000,
    ] {
        let k = width_in_standard_errors(n, ALPHA, None).unwrap();
        let tuned = width_in_standard_errors(n, ALPHA, Some(1_000_000)).unwrap();
        let (ratio, tuned_ratio) = (k / wald, tuned / wald);
        eprintln!("| n = {n} | {ratio:.3} × Wald | design_n 10⁶: {tuned_ratio:.3} × Wald |");
        assert!(ratio > 1.0 && ratio < 2.5, "n = {n}: {ratio}");
        assert!(
            tuned_ratio > 1.0 && tuned_ratio < 3.0,
            "n = {n}: {tuned_ratio}"
        );
        if n == 1_000_000 {
            assert!(tuned_ratio <= 1.5, "at the planned n: {tuned_ratio}");
        }
    }
}
