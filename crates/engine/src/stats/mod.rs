//! Hypothesis tests on sketch snapshots. Every p-value comes from a survival function,
//! never `1 − cdf`, so that tiny p-values keep their precision.

mod bilinear_fit;
mod bitflip_gof;
mod chi2;
mod gof;
mod gof_simulation;
mod independence;
mod local_exp_gof;
mod monte_carlo;
mod multinomial;
mod multiple;
mod noise_gof;
mod olh_gof;
mod pearson;
mod rank_one;
mod row_conditioned;
mod sheffet;
mod subset_gof;
mod two_sample;

pub use bitflip_gof::local_bitflip_gof;
pub use chi2::chi2_sf;
#[cfg(any(test, feature = "bench-internals"))]
pub use gof::gof_statistic;
pub use gof::{run_gof, GofParams, GofResult};
#[cfg(test)]
pub use independence::local_exp_ind_plug_in;
pub use independence::{
    local_bitflip_ind, local_exp_ind, local_noise_ind, marginal_information, marginal_product,
};
#[cfg(test)]
pub use local_exp_gof::local_exp_gof;
pub use local_exp_gof::local_exp_gof_cells;
#[cfg(test)]
pub use monte_carlo::sample_subset_counts;
pub use monte_carlo::{monte_carlo_p_value, sample_multinomial, sample_null_sketch};
pub use multiple::bh_q_values;
pub use noise_gof::noise_statistic;
pub use olh_gof::{olh_gof, OlhNull};
pub use pearson::{pearson_gof, pearson_gof_cells, pearson_statistic_cells};
pub use row_conditioned::{sign_row_means, sign_spread};
pub use sheffet::tv_distance;
#[cfg(test)]
pub use sheffet::{cohort_chi2_statistic, sheffet_chi2_statistic};
#[cfg(test)]
pub use subset_gof::subset_gof;
pub use subset_gof::{pinv_form as subset_pinv_form, subset_statistic};
pub use two_sample::{bitflip_two_sample, genrr_two_sample};

/// A statistic with its asymptotic law, when it has one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    pub statistic: f64,
    /// Degrees of freedom of the χ² null law; None for decision rules without one.
    pub df: Option<u32>,
    /// Asymptotic p-value; None for decision rules without one.
    pub p_value: Option<f64>,
}

impl Decision {
    pub fn chi2(statistic: f64, df: u32, p_value: f64) -> Self {
        Decision {
            statistic,
            df: Some(df),
            p_value: Some(p_value),
        }
    }
}
