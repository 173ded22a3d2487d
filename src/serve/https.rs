//! HTTPS for the endpoint (`serve.tls`): the acceptor built from the configured files.
//! The accept loop that uses it is [`super::http_server`]'s, shared with plain HTTP. It
//! uses the vendored OpenSSL that librdkafka already links (the Kafka TLS tests use it
//! too), so the binary carries one TLS stack.

use std::sync::Arc;

use ldpstream_config::HttpTlsConfig;
use openssl::pkey::PKey;
use openssl::ssl::{SslAcceptor, SslMethod};

use crate::error::Error;

/// Loads the certificate chain and key, checks that they belong together, and builds an
/// acceptor with Mozilla's "intermediate" settings (TLS 1.2 and 1.3).
pub fn acceptor(tls: &HttpTlsConfig) -> Result<Arc<SslAcceptor>, Error> {
    let fail = |key: &'static str, path: &str, e: &dyn std::fmt::Display| Error::HttpTls {
        key,
        path: path.to_string(),
        message: e.to_string(),
    };
    // OpenSSL's own messages for a missing file are "system library" codes; say it plainly.
    for (key, path) in [("cert", &tls.cert), ("key", &tls.key)] {
        if let Err(e) = std::fs::metadata(path) {
            return Err(fail(key, path, &e));
        }
    }
    let mut builder = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server())
        .map_err(|e| fail("cert", &tls.cert, &e))?;
    builder.set_certificate_chain_file(&tls.cert).map_err(|e| {
        fail(
            "cert",
            &tls.cert,
            &format!("not a PEM certificate chain ({e})"),
        )
    })?;
    let pem = std::fs::read(&tls.key).map_err(|e| fail("key", &tls.key, &e))?;
    let key = PKey::private_key_from_pem(&pem).map_err(|e| {
        fail(
            "key",
            &tls.key,
            &format!("not an unencrypted PEM private key ({e})"),
        )
    })?;
    // Parsed apart from the pairing check, so that a key for another certificate is told
    // from a file that is no key at all.
    builder.set_private_key(&key).map_err(|e| {
        fail(
            "key",
            &tls.key,
            &format!("does not match the certificate {} ({e})", tls.cert),
        )
    })?;
    builder.check_private_key().map_err(|e| {
        fail(
            "key",
            &tls.key,
            &format!("does not match the certificate {} ({e})", tls.cert),
        )
    })?;
    Ok(Arc::new(builder.build()))
}
