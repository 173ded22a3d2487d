//! The ldpstream configuration: a serde model of the TOML file and its validation.
//!
//! Every key is documented in `docs/configuration.md`. Unknown keys are rejected at parse time,
//! and validation (`validate/`) turns every semantic problem into a [`ConfigError`] that names
//! the key, the bad value and what is allowed.

mod duration;
mod error;
mod hypothesis_config;
mod hypothesis_spec;
mod load;
mod longitudinal;
mod model;
mod null;
mod number_text;
mod olh_pool;
mod state_location;
mod toml_form;
mod topic_names;
mod validate;
mod values;
mod window;

pub use duration::DurationMs;
pub use error::ConfigError;
pub use hypothesis_config::{MethodSpec, TestConfig};
pub use hypothesis_spec::{
    Calibration, CuratorSpec, InnerTester, KindKeyError, TestKind, TestMethod, TestSpec,
};
pub use longitudinal::{LongitudinalKind, LongitudinalParams, DEFAULT_PERIOD, MIN_PERIOD};
pub use model::{
    olh_default_g, ColumnsConfig, Config, EventTime, HttpTlsConfig, KafkaConfig, MechanismConfig,
    MessageFormat, ScaleOutConfig, ServeConfig, SimulatorConfig, SinkConfig, SourceConfig,
    StreamConfig, OLH_DEFAULT_POOL_SIZE, OLH_MAX_G, OLH_MAX_POOL_SIZE,
};
pub use null::NullSpec;
pub use number_text::compact;
pub use olh_pool::{
    olh_gamma, olh_identifiable_domain, olh_suggested_pool_size, olh_variance_factor_estimate,
    OLH_MAX_DENSE_DOMAIN, OLH_POOL_GAMMA_FOR_TEN_PERCENT,
};
pub use state_location::{InMemoryBecause, StateLocation};
pub use topic_names::scale_out_state_topics;
pub use validate::{
    MAX_OLH_SUPPORT_WORK, MAX_OLH_TABLE_CELLS, MAX_RHO, MIN_LAPLACE_EPSILON, MIN_RHO,
};
pub use values::{Alpha, Domain, Epsilon, MAX_DOMAIN, MAX_EPSILON, MIN_EPSILON};
pub use window::WindowConfig;
