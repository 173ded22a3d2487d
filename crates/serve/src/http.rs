//! The HTTP endpoint: `/` (the status page), `/metrics` (Prometheus text format),
//! `/healthz` (the process lives), `/readyz` (checkpoint restored, every source started
//! and connected), `/api/v1/results` (newest result per stream, test and group),
//! `/api/v1/history` (the last hour of p-values per stream, test and group) and
//! `/api/v1/streams` (each stream's counters and its tests' nulls).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use subtle::ConstantTimeEq;

use super::metrics::StreamCounts;
use super::shared::{Shared, StreamInfo};

/// One page, its CSS and script inline, so the binary serves it with no other asset.
const STATUS_PAGE: &str = include_str!("status.html");

/// The routes. With `token`, every route but the probes (`/healthz`, `/readyz`: a
/// Kubernetes kubelet sends no token) needs `Authorization: Bearer <token>`.
pub fn router(shared: Arc<Shared>, token: Option<String>) -> Router {
    let mut guarded = Router::new()
        .route("/", get(|| async { Html(STATUS_PAGE) }))
        .route("/metrics", get(metrics))
        .route("/api/v1/results", get(results))
        .route("/api/v1/history", get(history))
        .route("/api/v1/streams", get(streams));
    if let Some(token) = token {
        let token: Arc<[u8; 32]> = Arc::new(openssl::sha::sha256(token.as_bytes()));
        guarded = guarded.route_layer(middleware::from_fn(move |request, next| {
            require_token(token.clone(), request, next)
        }));
    }
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .merge(guarded)
        .with_state(shared)
}

/// The credentials of an `Authorization: Bearer <token>` header. The scheme is matched
/// case-insensitively (RFC 7235 §2.1), so `bearer` and `BEARER` work as well.
fn bearer_credentials(value: &[u8]) -> Option<&[u8]> {
    let space = value.iter().position(|&b| b == b' ')?;
    let (scheme, rest) = value.split_at(space);
    scheme
        .eq_ignore_ascii_case(b"bearer")
        .then(|| rest.trim_ascii_start())
}

/// 401 with no detail unless the request carries the bearer token. The SHA-256 digests are
/// compared, in constant time: a wrong guess's timing tells neither how much of it was
/// right nor how long the token is.
async fn require_token(token_digest: Arc<[u8; 32]>, request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| bearer_credentials(v.as_bytes()));
    let ok =
        presented.is_some_and(|p| bool::from(openssl::sha::sha256(p).ct_eq(&token_digest[..])));
    if ok {
        next.run(request).await
    } else {
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "unauthorized\n",
        )
            .into_response()
    }
}

async fn metrics(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        shared.metrics.render(),
    )
}

async fn readyz(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    if shared.is_ready() {
        (StatusCode::OK, "ready\n")
    } else if shared
        .unreachable
        .load(std::sync::atomic::Ordering::Acquire)
        > 0
    {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "Kafka brokers unreachable\n",
        )
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "starting\n")
    }
}

async fn results(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    let latest: Vec<_> = match shared.results.lock() {
        Ok(map) => map.values().cloned().collect(),
        Err(poisoned) => poisoned.into_inner().values().cloned().collect(),
    };
    Json(latest)
}

async fn history(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    // Serialized under the lock rather than copied out first: a copy of up to
    // MAX_SERIES × MAX_POINTS_PER_SERIES points would take as long and twice the memory.
    let history = shared.history.lock().unwrap_or_else(|p| p.into_inner());
    match serde_json::to_vec(&history.view()) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

#[derive(Serialize)]
struct StreamStatus {
    #[serde(flatten)]
    info: StreamInfo,
    #[serde(flatten)]
    counts: StreamCounts,
    /// Reports per second over the last 30 s of snapshot ticks; null until two ticks.
    reports_per_second: Option<f64>,
}

async fn streams(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    let infos = shared
        .streams
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let body: Vec<StreamStatus> = infos
        .into_iter()
        .map(|info| StreamStatus {
            counts: shared.metrics.stream_counts(&info.name),
            reports_per_second: shared
                .rates
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .per_second(&info.name),
            info,
        })
        .collect();
    Json(body)
}

#[cfg(test)]
mod tests {
    use super::bearer_credentials;

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for header in [&b"Bearer abc"[..], b"bearer abc", b"BEARER  abc"] {
            assert_eq!(bearer_credentials(header), Some(&b"abc"[..]));
        }
        assert_eq!(bearer_credentials(b"Basic abc"), None);
        assert_eq!(bearer_credentials(b"Bearerabc"), None);
    }
}
