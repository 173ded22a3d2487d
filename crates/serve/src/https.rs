//! HTTPS for the endpoint (`serve.tls`): the acceptor built from the configured files.
//! The accept loop that uses it is [`super::http_server`]'s, shared with plain HTTP. It
//! uses the vendored OpenSSL that librdkafka already links (the Kafka TLS tests use it
//! too), so the binary carries one TLS stack.

use std::sync::Arc;

use ldpstream_config::HttpTlsConfig;
use openssl::asn1::Asn1Time;
use openssl::pkey::PKey;
use openssl::ssl::{SslAcceptor, SslMethod};
use openssl::x509::X509;
use tracing::warn;

use crate::error::Error;

/// Warnings that do not stop the service: a key file others can read, a certificate that
/// has expired or is not yet valid (clients will refuse it).
fn warn_about_files(tls: &HttpTlsConfig) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(&tls.key) {
        if meta.permissions().mode() & 0o004 != 0 {
            warn!(key = %tls.key, "serve.tls.key is readable by every user of this machine; chmod 600 it");
        }
    }
    let Ok(pem) = std::fs::read(&tls.cert) else {
        return;
    };
    let Ok(cert) = X509::from_pem(&pem) else {
        return;
    };
    let Ok(now) = Asn1Time::days_from_now(0) else {
        return;
    };
    if cert.not_after() < now {
        warn!(cert = %tls.cert, not_after = %cert.not_after(), "serve.tls.cert has expired: clients will refuse it");
    } else if cert.not_before() > now {
        warn!(cert = %tls.cert, not_before = %cert.not_before(), "serve.tls.cert is not valid yet: clients will refuse it");
    }
}

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
    // OpenSSL's default for an encrypted key is to prompt on the terminal, which hangs a
    // service; a callback that supplies no pass phrase makes it an error instead.
    let key = PKey::private_key_from_pem_callback(&pem, |_| Ok(0)).map_err(|e| {
        let why = if pem.windows(9).any(|w| w == b"ENCRYPTED") {
            "an encrypted private key: serve takes an unencrypted one (decrypt it with \
             `openssl pkey -in KEY -out KEY.plain` and keep that file readable by serve only)"
                .to_string()
        } else {
            format!("not an unencrypted PEM private key ({e})")
        };
        fail("key", &tls.key, &why)
    })?;
    warn_about_files(tls);
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
