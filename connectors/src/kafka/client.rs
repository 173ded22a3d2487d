//! librdkafka client settings shared by the Kafka source, the Kafka sink and the
//! dead-letter producer: ldpstream's defaults, then the user's `options`, then secrets
//! from the environment (never logged).

use std::collections::BTreeMap;

use rdkafka::config::ClientConfig;

use crate::error::ConnectorError;

/// `owner` names the config entry in errors, e.g. `stream "events"`.
pub(crate) fn client_config(
    defaults: &[(&str, &str)],
    options: &BTreeMap<String, String>,
    options_from_env: &BTreeMap<String, String>,
    owner: &str,
) -> Result<ClientConfig, ConnectorError> {
    let mut config = ClientConfig::new();
    for (k, v) in defaults {
        config.set(*k, *v);
    }
    for (k, v) in options {
        config.set(k, v);
    }
    for (k, var) in options_from_env {
        let value = std::env::var(var).map_err(|_| ConnectorError::MissingEnv {
            owner: owner.to_string(),
            option: k.clone(),
            var: var.clone(),
        })?;
        config.set(k, value);
    }
    Ok(config)
}
