//! The engine's statistical and kernel checks: known values (scipy-verified), seeded Monte
//! Carlo levels, coverage and power, and every fold kernel against its scalar reference.
//! They live inside the crate so that the statistics stay `pub(crate)`: the engine's public
//! API is what the jobs, the service and the clients use, not what these tests inspect.

mod common;

mod client_distribution;
mod client_noise_distribution;
mod confidence_sequences;
mod curator;
mod extreme_epsilon;
mod extreme_independence;
mod fold_kernels;
mod gof_reference;
mod gof_size;
mod group_fold;
mod group_map;
mod independence_two_sample;
mod longitudinal;
mod look_records;
mod mc_seeds;
mod olh;
mod olh_factor_cost;
mod olh_sequential;
mod olh_unbiased;
mod oue;
mod private_budget;
mod row_conditioned;
mod sequential;
mod sequential_fdr;
mod sequential_small_eps;
mod small_n;
mod std_errors;
mod subset;
