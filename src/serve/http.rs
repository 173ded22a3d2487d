//! The HTTP endpoint: `/metrics` (Prometheus text format), `/healthz` (the process lives),
//! `/readyz` (checkpoint restored, every source started and connected), `/api/v1/results` (newest result per stream, test and
//! group).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};

use super::shared::Shared;

pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/api/v1/results", get(results))
        .with_state(shared)
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
