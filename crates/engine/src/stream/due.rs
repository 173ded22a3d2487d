//! Which windows of a stream are due a result: shared by `batch` (every window final once
//! the input is exhausted) and `serve` (provisional results for open windows on every tick,
//! one final result when a window closes).

use std::borrow::Cow;

use chrono::{DateTime, SecondsFormat};
use ldpstream_config::{StreamConfig, WindowConfig};

use crate::window::{pane_width_with_looks, Bounds, Grouped, PaneStore};
use crate::EngineError;

/// A snapshot of one window of one test, taken from a [`PaneStore`]. An owned one
/// (`'static`, as `serve` takes them) needs no access to the store, so the store's lock is
/// held only while copying; `batch` evaluates borrowed ones one at a time.
#[derive(Debug)]
pub struct WindowSnapshot<'a> {
    pub test: usize,
    pub bounds: Option<Bounds>,
    pub is_final: bool,
    pub late: u64,
    pub sketches: Cow<'a, Grouped>,
}

impl WindowSnapshot<'_> {
    pub fn into_owned(self) -> WindowSnapshot<'static> {
        WindowSnapshot {
            test: self.test,
            bounds: self.bounds,
            is_final: self.is_final,
            late: self.late,
            sketches: Cow::Owned(self.sketches.into_owned()),
        }
    }
}

/// The pane width of a stream: gcd of its tests' window sizes and slides.
pub fn stream_pane_width(stream: &StreamConfig) -> i64 {
    pane_width_with_looks(
        stream.tests.iter().map(|t| &t.window),
        stream
            .tests
            .iter()
            .filter_map(|t| t.looks)
            .map(|l| l.millis()),
    )
}

/// The longest bounded window of a stream: panes older than that are retired.
pub fn longest_window(stream: &StreamConfig) -> i64 {
    stream
        .tests
        .iter()
        .map(|t| match t.window {
            WindowConfig::Tumbling { size } | WindowConfig::Sliding { size, .. } => {
                size.millis() as i64
            }
            WindowConfig::Global | WindowConfig::Cumulative => 0,
        })
        .max()
        .unwrap_or(0)
}

/// Copies the windows due a result: windows that closed since the last call (final), and,
/// when `provisional`, every open window. Unbounded windows (global, cumulative) are final
/// only once the input has ended. Marks the closed windows as finalized and retires panes
/// no bounded window needs.
pub fn take_due(
    stream: &StreamConfig,
    store: &mut PaneStore,
    provisional: bool,
) -> Result<Vec<WindowSnapshot<'static>>, EngineError> {
    let mut out = Vec::new();
    for_each_due(stream, store, provisional, |snapshot| {
        out.push(snapshot.into_owned());
        Ok::<(), EngineError>(())
    })?;
    Ok(out)
}

/// [`take_due`] one window at a time: `each` gets every due window, borrowed from the store
/// where no merge is needed, and is done with it before the next is built, so at most one
/// window's copy is held (`batch`, which owns its store and need not copy under a lock).
pub fn for_each_due<E: From<EngineError>>(
    stream: &StreamConfig,
    store: &mut PaneStore,
    provisional: bool,
    mut each: impl FnMut(WindowSnapshot<'_>) -> Result<(), E>,
) -> Result<(), E> {
    let ended = store.watermark() == Some(i64::MAX);
    if store.finalized_through() == Some(i64::MAX) {
        // Every window, bounded or not, already had its final result.
        return Ok(());
    }
    {
        let store: &PaneStore = store;
        let timed = store.first_pane().is_some();
        let late = store.late();
        for (t, test) in stream.tests.iter().enumerate() {
            let bounded = matches!(
                test.window,
                WindowConfig::Tumbling { .. } | WindowConfig::Sliding { .. }
            );
            if bounded && timed {
                for bounds in store.windows(&test.window) {
                    let is_final = store.awaits_final(bounds);
                    if is_final || (provisional && !store.is_closed(bounds)) {
                        each(WindowSnapshot {
                            test: t,
                            bounds: Some(bounds),
                            is_final,
                            late,
                            sketches: store.window(bounds)?,
                        })?;
                    }
                }
                continue;
            }
            // Global, cumulative, and bounded windows of a stream without event time
            // (which is one global window).
            if ended || provisional {
                let bounds = match test.window {
                    WindowConfig::Cumulative => store.cumulative_bounds(),
                    _ => None,
                };
                each(WindowSnapshot {
                    test: t,
                    bounds,
                    is_final: ended,
                    late,
                    sketches: store.everything()?,
                })?;
            }
        }
    }
    store.mark_finalized(longest_window(stream))?;
    Ok(())
}

/// RFC 3339 in UTC, with milliseconds only when they are not zero.
pub fn rfc3339(ms: i64) -> String {
    DateTime::from_timestamp_millis(ms).map_or_else(
        || ms.to_string(),
        |t| t.to_rfc3339_opts(SecondsFormat::AutoSi, true),
    )
}
