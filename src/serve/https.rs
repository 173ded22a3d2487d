//! HTTPS for the endpoint (`serve.tls`): an accept loop that completes a TLS handshake per
//! connection and hands the decrypted stream to hyper with the same axum router as plain
//! HTTP. It uses the vendored OpenSSL that librdkafka already links (the Kafka TLS tests
//! use it too), so the binary carries one TLS stack.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use ldpstream_config::HttpTlsConfig;
use openssl::pkey::PKey;
use openssl::ssl::{Ssl, SslAcceptor, SslMethod};
use tokio::net::TcpListener;
use tokio_openssl::SslStream;
use tracing::debug;

use crate::error::Error;

/// A client that opens a connection and never finishes its handshake must not hold a task
/// forever.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

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

/// Serves `app` over TLS until `stop` resolves. A failed handshake (a plain-HTTP client,
/// a scanner) is logged at debug and costs only its own connection.
pub async fn serve(
    listener: TcpListener,
    acceptor: Arc<SslAcceptor>,
    app: Router,
    stop: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(stop);
    loop {
        let (tcp, peer) = tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // EMFILE and the like: back off instead of spinning.
                    debug!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let acceptor = acceptor.clone();
        let app = app.clone();
        tokio::spawn(async move {
            let stream = match Ssl::new(acceptor.context()).and_then(|ssl| SslStream::new(ssl, tcp))
            {
                Ok(s) => s,
                Err(e) => {
                    debug!(%peer, error = %e, "TLS session setup failed");
                    return;
                }
            };
            let mut stream = stream;
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, Pin::new(&mut stream).accept()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    debug!(%peer, "TLS handshake timed out");
                    return;
                }
            }
            let served = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), TowerToHyperService::new(app))
                .await;
            if let Err(e) = served {
                debug!(%peer, error = %e, "HTTPS connection ended with an error");
            }
        });
    }
}
