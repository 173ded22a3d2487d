//! Shutdown: the sources stopped, each fold thread's in-flight batch finished, a last
//! round of results, the sinks closed, a last checkpoint, and the HTTP server given a
//! short grace to finish its requests.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ldpstream_connectors::Sinks;
use tracing::warn;

use super::scheduler::{snapshot_round, write_checkpoint};
use super::startup::Http;
use super::{Running, Shared};
use crate::error::Error;

/// How long open HTTP connections may delay the exit once the service stops.
const HTTP_SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// Stops everything `running` started and publishes what the folds had counted. After a
/// stream failure no checkpoint is written (the last good one stays) and the failure is
/// returned.
pub(super) async fn shut_down(
    running: Running,
    shared: &Arc<Shared>,
    mut sinks: Sinks,
    http: Http,
    failure: Option<Error>,
) -> Result<(), Error> {
    let Running {
        runtimes,
        threads,
        stop,
        files,
        ..
    } = running;
    stop.store(true, Ordering::Release);
    let joined = tokio::task::spawn_blocking(move || {
        for t in threads {
            if t.join().is_err() {
                warn!("a source or fold thread panicked");
            }
        }
    })
    .await;
    if joined.is_err() {
        warn!("joining the stream threads failed");
    }
    snapshot_round(&runtimes, shared, &mut sinks, true, files.ledger.as_ref()).await?;
    sinks.close()?;
    if let Some(dir) = &files.dir {
        if failure.is_none() {
            write_checkpoint(&runtimes, dir).await?;
        }
    }
    stop_http(http).await;
    match failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Graceful shutdown waits for open connections; a client that never finishes its request
/// must not keep the service alive past SIGTERM or --duration.
async fn stop_http(http: Http) {
    let _ = http.stop.send(());
    let abort = http.task.abort_handle();
    if tokio::time::timeout(HTTP_SHUTDOWN_GRACE, http.task)
        .await
        .is_err()
    {
        warn!(
            grace = ?HTTP_SHUTDOWN_GRACE,
            "HTTP connections still open after the shutdown grace period; closing them"
        );
        abort.abort();
    }
}
