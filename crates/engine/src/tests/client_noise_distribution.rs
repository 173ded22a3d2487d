//! Distribution conformance of the noise mechanisms (conformance/README.md): the
//! coordinates of gauss and laplace reports drawn from each implementation's real CSPRNG
//! (the engine's `rand::rng()`, the JS client's `crypto.getRandomValues`) must all lie on
//! the grid 2^-k·ℤ and be exact f32s, and their noise, in grid steps, must follow the exact
//! discrete law (N_ℤ(0, s²) or Lap_ℤ(t)): a χ² test at α = 1e-6 over cells of a quarter
//! scale out to ±4 scales plus both tails, each split by the parity of the integer (so
//! that a port that loses or biases the low-order bit is caught too).
//!
//! Ignored by plain `cargo test`: it needs the built JS client. scripts/js_client_test.sh
//! builds it and runs `cargo test --workspace --test client_noise_distribution -- --ignored`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use crate::mechanism::{Mechanism, Noise, NoiseKind};
use crate::stats::chi2_sf;
use ldpstream_config::MechanismConfig;

const ALPHA: f64 = 1e-6;
/// Cells per scale (σ or t, in grid steps) and scales covered before the two tail cells.
const CELLS_PER_SCALE: i64 = 4;
const SCALES: i64 = 4;

struct Case {
    mechanism: &'static str,
    value: u32,
    /// Reports; each gives d coordinates.
    n: usize,
}

fn cases() -> Vec<Case> {
    let case = |mechanism, value, n| Case {
        mechanism,
        value,
        n,
    };
    vec![
        case(r#"{"kind":"gauss","rho":0.5,"domain":4}"#, 1, 250_000),
        case(r#"{"kind":"gauss","rho":245000.0,"domain":2}"#, 0, 500_000),
        case(r#"{"kind":"gauss","rho":50.0,"domain":1024}"#, 1000, 1_000),
        case(r#"{"kind":"laplace","epsilon":1.0,"domain":4}"#, 3, 250_000),
        case(
            r#"{"kind":"laplace","epsilon":10.0,"domain":1024}"#,
            5,
            1_000,
        ),
        case(
            r#"{"kind":"laplace","epsilon":700.0,"domain":2}"#,
            1,
            500_000,
        ),
    ]
}

/// The cell of a noise of `y` grid steps: its bin (a quarter scale wide, the tails
/// pooled) times two, plus its parity.
fn cell(y: i64, scale: i64) -> usize {
    let width = (scale / CELLS_PER_SCALE).max(1);
    let half = CELLS_PER_SCALE * SCALES;
    let bin = y.div_euclid(width).clamp(-half - 1, half) + half + 1;
    2 * bin as usize + y.rem_euclid(2) as usize
}

fn cells() -> usize {
    2 * (2 * CELLS_PER_SCALE * SCALES + 2) as usize
}

/// The exact law of the cells, summing the unnormalized pmf over |y| ≤ 40 scales (the mass
/// beyond is below e^-40 for the Laplace and e^-800 for the Gaussian).
fn law(noise: &Noise) -> Vec<f64> {
    let scale = noise.grid_scale() as i64;
    let s = scale as f64;
    let weight = |y: i64| match noise.kind() {
        NoiseKind::Gauss { .. } => (-((y as f64) / s).powi(2) / 2.0).exp(),
        NoiseKind::Laplace { .. } => (-(y.abs() as f64) / s).exp(),
    };
    let mut p = vec![0.0; cells()];
    for y in -40 * scale..=40 * scale {
        p[cell(y, scale)] += weight(y);
    }
    let total: f64 = p.iter().sum();
    p.iter().map(|w| w / total).collect()
}

/// Counts per cell of the coordinates' noise, and how many coordinates were off the grid
/// or not exactly an f32.
fn bin(noise: &Noise, x: u32, coordinates: &[f64]) -> (Vec<u64>, usize) {
    let scale = noise.grid_scale() as i64;
    let steps_per_unit = 1.0 / noise.grid_step();
    let d = noise.domain() as usize;
    let mut counts = vec![0u64; cells()];
    let mut off_grid = 0;
    for (i, &v) in coordinates.iter().enumerate() {
        let truth = if i % d == x as usize { 1.0 } else { 0.0 };
        let steps = (v - truth) * steps_per_unit;
        if v as f32 as f64 != v || steps.fract() != 0.0 || !steps.is_finite() {
            off_grid += 1;
            continue;
        }
        counts[cell(steps as i64, scale)] += 1;
    }
    (counts, off_grid)
}

fn chi2(p: &[f64], counts: &[u64]) -> (f64, u32) {
    let n: u64 = counts.iter().sum();
    let nf = n as f64;
    let stat = p
        .iter()
        .zip(counts)
        .map(|(&pi, &c)| (c as f64 - nf * pi).powi(2) / (nf * pi))
        .sum();
    (stat, p.len() as u32 - 1)
}

fn js_sampler(case: &Case) -> Child {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    assert!(
        root.join("clients/js/dist/index.js").exists(),
        "the JS client is not built: run scripts/js_client_test.sh (npm ci && npm run build in clients/js)"
    );
    Command::new("node")
        .arg(root.join("clients/js/scripts/sample.mjs"))
        .arg(case.mechanism)
        .arg(case.value.to_string())
        .arg(case.n.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("node (v18 or later) on PATH")
}

/// The sampler's n·d coordinates, f64 little-endian.
fn js_coordinates(child: Child) -> Vec<f64> {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "node sample.mjs failed");
    out.stdout
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

fn engine_coordinates(noise: &Noise, x: u32, n: usize) -> Vec<f64> {
    (0..n).flat_map(|_| noise.randomize(x).unwrap()).collect()
}

#[test]
#[ignore = "needs the built JS client: scripts/js_client_test.sh runs it"]
fn every_implementation_draws_the_exact_grid_noise() {
    let cases = cases();
    let children: Vec<Child> = cases.iter().map(js_sampler).collect();
    let mut failures = Vec::new();
    for (case, child) in cases.iter().zip(children) {
        let config: MechanismConfig = serde_json::from_str(case.mechanism).unwrap();
        let Mechanism::Noise(noise) = Mechanism::from_config(&config).unwrap() else {
            panic!("{} is not a noise mechanism", case.mechanism);
        };
        let p = law(&noise);
        for (who, coordinates) in [
            ("engine", engine_coordinates(&noise, case.value, case.n)),
            ("js", js_coordinates(child)),
        ] {
            let expected = case.n * noise.domain() as usize;
            let (counts, off_grid) = bin(&noise, case.value, &coordinates);
            let (stat, df) = chi2(&p, &counts);
            let pvalue = chi2_sf(df, stat);
            println!(
                "{who:6} {} x={} coordinates={}: off grid {off_grid}, chi2 {stat:.1} df {df} p {pvalue:.4}",
                case.mechanism,
                case.value,
                coordinates.len()
            );
            if coordinates.len() != expected || off_grid > 0 || pvalue.is_nan() || pvalue < ALPHA {
                failures.push(format!(
                    "{who} {}: {} coordinates (want {expected}), {off_grid} off the grid, p = {pvalue:e}",
                    case.mechanism,
                    coordinates.len()
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "rejected at alpha = {ALPHA}: {failures:#?}"
    );
}

/// The test can fail: noise one grid step too wide, or with its low bit biased, is
/// rejected at 10^6 coordinates (what a wrong integer scale or a lost bit would give).
#[test]
fn the_chi_square_rejects_a_wrong_scale_and_a_parity_bias() {
    use rand::SeedableRng;
    let noise = Noise::new(NoiseKind::Laplace { epsilon: 1.0 }, 4).unwrap();
    let p = law(&noise);
    let t = noise.grid_scale();
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let draws: Vec<i64> = (0..1_000_000)
        .map(|_| crate::mechanism::discrete_laplace(&mut rng, t))
        .collect();
    let scale = t as i64;
    let histogram = |f: &dyn Fn(i64) -> i64| {
        let mut c = vec![0u64; cells()];
        for &y in &draws {
            c[cell(f(y), scale)] += 1;
        }
        c
    };
    let right = chi2(&p, &histogram(&|y| y));
    assert!(chi2_sf(right.1, right.0) > ALPHA, "{right:?}");
    // 1.02 times too wide
    let wide = chi2(&p, &histogram(&|y| y + y / 50));
    assert!(chi2_sf(wide.1, wide.0) < ALPHA, "{wide:?}");
    // the low bit cleared: every draw even
    let even = chi2(&p, &histogram(&|y| y & !1));
    assert!(chi2_sf(even.1, even.0) < ALPHA, "{even:?}");
}
