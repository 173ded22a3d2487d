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

/// librdkafka's version and its compiled-in features (`builtin.features`: `ssl`,
/// `sasl_scram`, ...), logged when a Kafka client starts so an operator can see that TLS
/// and SASL are there before a connection fails for lack of them.
pub fn librdkafka_build() -> (String, String) {
    let (_, version) = rdkafka::util::get_rdkafka_version();
    let features = ClientConfig::new()
        .create_native_config()
        .and_then(|native| native.get("builtin.features"))
        .unwrap_or_else(|e| format!("(unknown: {e})"));
    (version, features)
}

/// The security settings of a client, for errors and logs: the protocol and, with SASL,
/// the mechanism and user name. Never a password or a key.
pub fn security_of(config: &ClientConfig) -> String {
    let protocol = config.get("security.protocol").unwrap_or("plaintext");
    let mut shown = format!("security.protocol {protocol}");
    if protocol.to_ascii_lowercase().starts_with("sasl") {
        let mechanism = config
            .get("sasl.mechanism")
            .or_else(|| config.get("sasl.mechanisms"))
            .unwrap_or("GSSAPI");
        shown.push_str(&format!(", sasl.mechanism {mechanism}"));
        if let Some(user) = config.get("sasl.username") {
            shown.push_str(&format!(", sasl.username {user:?}"));
        }
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bundled librdkafka is built with OpenSSL (rdkafka's `ssl-vendored`): TLS and the
    /// SASL mechanisms that need it are there, not "OpenSSL not available at build time".
    #[test]
    fn librdkafka_has_tls_and_sasl_built_in() {
        let (version, features) = librdkafka_build();
        let features: Vec<&str> = features.split(',').collect();
        for needed in ["ssl", "sasl_plain", "sasl_scram", "sasl_oauthbearer"] {
            assert!(
                features.contains(&needed),
                "{needed} missing from {features:?} ({version})"
            );
        }
    }

    #[test]
    fn security_description_names_the_mechanism_never_the_password() {
        let mut c = ClientConfig::new();
        c.set("security.protocol", "SASL_SSL")
            .set("sasl.mechanism", "SCRAM-SHA-256")
            .set("sasl.username", "alice")
            .set("sasl.password", "hunter2");
        let shown = security_of(&c);
        assert_eq!(
            shown,
            "security.protocol SASL_SSL, sasl.mechanism SCRAM-SHA-256, sasl.username \"alice\""
        );
        assert_eq!(
            security_of(&ClientConfig::new()),
            "security.protocol plaintext"
        );
    }
}
