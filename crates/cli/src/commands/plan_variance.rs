//! `plan`'s estimator-variance table: how noisy each mechanism's unbiased frequency
//! estimate is at d and ε, and the ε-LDP mechanism with the least noise.

use anyhow::Result;
use ldpstream_engine::plan::{estimator_variance, PlanMechanism};

use super::usage;

/// Prints `n·Var(p̂_j)` (small p_j) of every mechanism and the recommended estimator.
pub fn print_variances(d: u32, epsilon: f64) -> Result<()> {
    println!(
        "estimator variance: n·Var(p̂_j) for a small p_j (Wang et al. 2017; docs/STATISTICS.md §7), d = {d}, ε = {epsilon}"
    );
    println!(
        "{:<16} {:>22} {:>14}",
        "mechanism", "n·Var(p̂_j)", "× the least"
    );
    let rows = PlanMechanism::all(epsilon)
        .into_iter()
        .map(|m| {
            estimator_variance(m, d as usize)
                .map(|v| (m, v))
                .map_err(|e| usage(format!("--domain {d} --epsilon {epsilon}: {e}")))
        })
        .collect::<Result<Vec<_>>>()?;
    // Gaussian noise is planned at ρ = ε²/2, not ε-LDP: shown, never recommended.
    let ldp = |m: &PlanMechanism| !matches!(m, PlanMechanism::Gauss { .. });
    let least = rows
        .iter()
        .filter(|(m, _)| ldp(m))
        .map(|&(_, v)| v)
        .fold(f64::INFINITY, f64::min);
    for (m, v) in &rows {
        println!("{:<16} {:>22.6e} {:>14.3}", m.name(), v, v / least);
    }
    if let Some((best, v)) = rows
        .iter()
        .filter(|(m, _)| ldp(m))
        .find(|(_, v)| *v == least)
    {
        let grr = rows
            .iter()
            .find(|(m, _)| matches!(m, PlanMechanism::Grr { .. }))
            .map_or(f64::NAN, |(_, g)| g / v);
        println!(
            "recommended estimator: {} (least variance among the ε-LDP mechanisms; GenRR's is {grr:.3}× it)",
            best.name()
        );
    }
    println!();
    Ok(())
}
