//! The endpoint's accept loop, for plain HTTP and for HTTPS (`serve.tls`): hyper with the
//! axum router of [`super::http`].
//!
//! A client that opens connections and never finishes a request must not starve the
//! service (the probe's idle_connections_exhaust_fds: held connections reached the
//! descriptor limit, `/healthz` stopped answering and every checkpoint failed with EMFILE).
//! So every connection must send its request headers within [`HEADER_TIMEOUT`] (hyper
//! also applies it while a kept-alive connection waits for its next request, so idle
//! connections are closed too), a TLS handshake must finish within [`HEADER_TIMEOUT`],
//! and at most [`MAX_CONNECTIONS`] are open at once: further clients wait in the listen
//! backlog, and the descriptors beyond stay free for checkpoints, sinks and Kafka.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use openssl::ssl::{Ssl, SslAcceptor};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_openssl::SslStream;
use tracing::debug;

/// How long a connection may take to send a request's headers (and to finish its TLS
/// handshake), and how long a kept-alive connection may sit idle.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections open at once. A Prometheus server, a few dashboards and probes need a
/// handful; the default descriptor limit of 1024 keeps three quarters free.
pub const MAX_CONNECTIONS: usize = 256;

/// Serves `app` until `stop` resolves, over TLS when `tls` is given.
pub async fn serve(
    listener: TcpListener,
    tls: Option<Arc<SslAcceptor>>,
    app: Router,
    stop: impl std::future::Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    tokio::pin!(stop);
    loop {
        let permit = tokio::select! {
            _ = &mut stop => return,
            permit = slots.clone().acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => return,
            },
        };
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
        let (tls, app) = (tls.clone(), app.clone());
        tokio::spawn(async move {
            match tls {
                Some(acceptor) => {
                    if let Some(stream) = handshake(&acceptor, tcp, peer).await {
                        serve_connection(stream, app, peer).await;
                    }
                }
                None => serve_connection(tcp, app, peer).await,
            }
            drop(permit);
        });
    }
}

/// The TLS handshake, bounded by [`HEADER_TIMEOUT`]; a failure (a plain-HTTP client, a
/// scanner) is logged at debug and costs only its own connection.
async fn handshake(
    acceptor: &SslAcceptor,
    tcp: TcpStream,
    peer: std::net::SocketAddr,
) -> Option<SslStream<TcpStream>> {
    let mut stream = match Ssl::new(acceptor.context()).and_then(|ssl| SslStream::new(ssl, tcp)) {
        Ok(s) => s,
        Err(e) => {
            debug!(%peer, error = %e, "TLS session setup failed");
            return None;
        }
    };
    match tokio::time::timeout(HEADER_TIMEOUT, Pin::new(&mut stream).accept()).await {
        Ok(Ok(())) => Some(stream),
        Ok(Err(e)) => {
            debug!(%peer, error = %e, "TLS handshake failed");
            None
        }
        Err(_) => {
            debug!(%peer, "TLS handshake timed out");
            None
        }
    }
}

async fn serve_connection<S>(stream: S, app: Router, peer: std::net::SocketAddr)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let served = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(TokioIo::new(stream), TowerToHyperService::new(app))
        .await;
    if let Err(e) = served {
        debug!(%peer, error = %e, "HTTP connection ended with an error");
    }
}
