//! The simulator: true categories drawn from a known distribution and privatized with the
//! real client-side randomizer ([`ldpstream_engine::mechanism::privatize_batch`]). One
//! sampler serves both uses: `simulate` writes a seeded, reproducible Parquet file
//! ([`file`]), and `serve` runs it as a live source stamping wall-clock event times
//! ([`live`]).

#[cfg(feature = "parquet")]
pub mod devices;
#[cfg(feature = "parquet")]
pub mod file;
pub mod live;

use rand_distr::weighted::WeightedAliasIndex;

use crate::error::ConnectorError;

/// An O(1) sampler of the true categories, or an error naming the bad distribution.
pub fn sampler(p: Vec<f64>, what: &str) -> Result<WeightedAliasIndex<f64>, ConnectorError> {
    WeightedAliasIndex::new(p).map_err(|e| ConnectorError::Distribution {
        what: what.to_string(),
        message: e.to_string(),
    })
}

#[cfg(feature = "parquet")]
pub use devices::{simulate_devices_to_parquet, DeviceSimulation, DevicesWritten};
#[cfg(feature = "parquet")]
pub use file::{simulate_to_parquet, SimulateSpec};
