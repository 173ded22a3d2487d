//! Study planning: the asymptotic power of each mechanism's identity test against a chosen
//! alternative, the sample size each needs for a target power, and a chart comparing them
//! (docs/STATISTICS.md §7).
//!
//! Every test statistic is asymptotically noncentral `χ²_ν(λ)` under a local alternative,
//! so power is `P(χ²_ν(λ) > χ²_{ν,1−α})`; the mechanisms differ only in ν and in how much
//! of the distance between null and alternative survives their noise into λ.

mod alternative;
mod detection;
mod longitudinal;
mod ncx2;
mod noncentrality;
mod olh_pool;
mod power;
mod svg;
mod variance;

pub use alternative::{Alternative, Hypotheses};
pub use detection::{sequential_detection, Detection, SequentialOptions};
pub use longitudinal::{lifetime_spend, LifetimeSpend};
pub use ncx2::{chi2_isf, ncx2_sf};
pub use noncentrality::{noncentrality, PlanMechanism};
pub use olh_pool::{OlhPoolPower, MAX_POOL_PLAN_WORK};
pub use power::{asymptotic_power, power, required_n};
pub use svg::power_svg;
pub use variance::estimator_variance;
