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
    olh_pool_line(d, epsilon);
    println!();
    Ok(())
}

/// OLH's row assumes fresh hashes; a fixed pool of S seeds multiplies the unbiased
/// estimate's variance by about 1/(1 − γ), γ = (d − 1)/(S(g − 1)) (docs/STATISTICS.md
/// §1.8), and identifies nothing past d = S(g − 1) + 1.
fn olh_pool_line(d: u32, epsilon: f64) {
    let g = ldpstream_config::olh_default_g(epsilon);
    let default = ldpstream_config::OLH_DEFAULT_POOL_SIZE;
    let suggested = match ldpstream_config::olh_suggested_pool_size(d, g) {
        Some(s) => format!("pool_size ≥ {s} keeps it within 10% (γ ≤ 1/12)"),
        None => "no pool_size within the limits keeps it within 10%".to_string(),
    };
    let at_default = if u64::from(d) > ldpstream_config::olh_identifiable_domain(g, default) {
        format!("the default pool_size {default} cannot identify {d} categories at g = {g}")
    } else {
        format!(
            "the default pool_size {default} multiplies it by about {:.3}",
            ldpstream_config::olh_variance_factor_estimate(d, g, default)
        )
    };
    println!("olh: the row is for fresh hashes; {at_default}; {suggested}");
}
