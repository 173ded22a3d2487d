//! Fold speed of the frequency oracles against the kernels they are measured by, for
//! `benches/oracles.sh`: `bitflip` against `oue` (the same positional-popcount fold over
//! reports from each randomizer), `subset` (the list fold, k items a report) against both
//! and `grr`, and `grr` against `olh` (the category count against the (seed, bucket) pool
//! table). One core, the whole-batch `fold_batch` a stream calls.
//! Usage: oracle-fold ROWS REPEATS; prints one Markdown row per (mechanism, d): the median
//! time of REPEATS folds of ROWS reports and the reports per second; then the median time
//! of OLH's snapshot estimate (support counts, O(S·d)) at d = 65,536 and S = 1,024, alone
//! (records carry no IBU at that d). Subset
//! batches hold at most 2^24 items (64 MiB), so at large k they have fewer rows.

use std::time::Instant;

use ldpstream_config::MechanismConfig;
use ldpstream_engine::kernels::fold_batch;
use ldpstream_engine::mechanism::{privatize_batch, Mechanism};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn median_seconds(mechanism: &Mechanism, rows: usize, repeats: usize) -> Result<f64, String> {
    let mut rng = StdRng::seed_from_u64(7);
    let d = mechanism.domain() as u32;
    let xs: Vec<u32> = (0..rows).map(|_| rng.random_range(0..d)).collect();
    let columns = privatize_batch(mechanism, &xs, &mut rng).map_err(|e| e.to_string())?;
    // Index-carrying reports (olh) come as [index, report].
    let (report, index) = match columns.as_slice() {
        [index, report] => (report, Some(index.as_ref())),
        [report] => (report, None),
        _ => return Err("no report column".into()),
    };
    let mut times = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let mut sketch = mechanism.new_sketch();
        let start = Instant::now();
        fold_batch(mechanism, &mut sketch, report.as_ref(), index).map_err(|e| e.to_string())?;
        times.push(start.elapsed().as_secs_f64());
        if sketch.n() != rows as u64 {
            return Err(format!("folded {} of {rows} reports", sketch.n()));
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, rows, repeats] = args.as_slice() else {
        return Err("usage: oracle-fold ROWS REPEATS".into());
    };
    let (rows, repeats): (usize, usize) = (rows.parse()?, repeats.parse()?);
    println!("| mechanism | d | k | reports | median fold time | reports/s |");
    println!("|---|---|---|---|---|---|");
    for domain in [64u32, 1024] {
        for config in [
            MechanismConfig::Bitflip {
                epsilon: 2.0,
                domain,
            },
            MechanismConfig::Oue {
                epsilon: 2.0,
                domain,
            },
            MechanismConfig::Grr {
                epsilon: 2.0,
                domain,
            },
            MechanismConfig::Subset {
                epsilon: 2.0,
                domain,
                k: None,
            },
            MechanismConfig::Olh {
                epsilon: 2.0,
                domain,
                g: None,
                pool_size: None,
                pool_seed: 0,
            },
        ] {
            let m = Mechanism::from_config(&config)?;
            let (k, rows) = match &m {
                Mechanism::Subset(s) => (s.k(), rows.min((1 << 24) / s.k() as usize)),
                _ => (1, rows),
            };
            let t = median_seconds(&m, rows, repeats.max(1))?;
            println!(
                "| {} | {domain} | {k} | {rows} | {:.3} ms | {:.3e} |",
                m.kind(),
                t * 1e3,
                rows as f64 / t
            );
        }
    }
    olh_snapshot(repeats.max(1))
}

/// The median time of OLH's estimate (support counts plus debiasing) from a full pool
/// table at d = 65,536, S = 1,024, g = 8 (ε = 2).
fn olh_snapshot(repeats: usize) -> Result<(), Box<dyn std::error::Error>> {
    let m = Mechanism::from_config(&MechanismConfig::Olh {
        epsilon: 2.0,
        domain: 65_536,
        g: None,
        pool_size: None,
        pool_seed: 0,
    })?;
    let mut sketch = m.new_sketch();
    let mut rng = StdRng::seed_from_u64(3);
    let xs: Vec<u32> = (0..1 << 20).map(|_| rng.random_range(0..65_536)).collect();
    let columns = privatize_batch(&m, &xs, &mut rng)?;
    fold_batch(
        &m,
        &mut sketch,
        columns[1].as_ref(),
        Some(columns[0].as_ref()),
    )?;
    let mut times = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let start = Instant::now();
        let e = m.estimate(&sketch)?;
        times.push(start.elapsed().as_secs_f64());
        if e.estimate.len() != 65_536 {
            return Err("short estimate".into());
        }
    }
    println!(
        "olh snapshot estimate, d = 65536, S = 1024, g = 8: median {:.1} ms of {repeats}",
        median(&mut times) * 1e3
    );
    // What a record computes: above IBU_MAX_DOMAIN the estimate alone (no IBU).
    if m.estimate_and_ibu(&sketch)?.ibu.is_some() {
        return Err("an IBU at d = 65,536".into());
    }
    Ok(())
}

fn median(times: &mut [f64]) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}
