//! Event-time looks (a test window's `looks` key): the provisional results a monitor would
//! have published at every multiple of `looks` in event time, so that `batch` can replay
//! history through it and `serve` reproduces the same records whatever its snapshot timer
//! does. A look at time t covers exactly the reports with event time before t (and, for
//! global and cumulative windows, the reports without event time folded so far).

use std::borrow::Cow;

use ldpstream_config::{StreamConfig, WindowConfig};

use crate::window::{merge_grouped, Bounds, PaneStore};
use crate::EngineError;

use super::due::WindowSnapshot;

/// The most looks one window may take in one call; more means a `looks` far too fine for
/// the span of the input (a month of history looked at every second is 2.6 million full
/// evaluations).
pub const MAX_LOOKS_PER_CALL: u64 = 100_000;

/// One look: the snapshot of a window at event time `end`.
#[derive(Debug)]
pub struct Look<'a> {
    pub end: i64,
    pub snapshot: WindowSnapshot<'a>,
}

impl Look<'_> {
    pub fn into_owned(self) -> Look<'static> {
        Look {
            end: self.end,
            snapshot: self.snapshot.into_owned(),
        }
    }
}

/// Looks of every test with `looks` at the look times in `(after, through]`, in order of
/// test, window and time. A look is taken only strictly inside its window (a look at a
/// bounded window's end is its final result) and, for global and cumulative windows, only
/// before the latest pane's end (what lies beyond is the final result's).
pub fn take_looks(
    stream: &StreamConfig,
    store: &PaneStore,
    after: Option<i64>,
    through: i64,
) -> Result<Vec<Look<'static>>, EngineError> {
    let mut out = Vec::new();
    for_each_look(stream, store, after, through, |look| {
        out.push(look.into_owned());
        Ok::<(), EngineError>(())
    })?;
    Ok(out)
}

/// [`take_looks`] one look at a time, each borrowed where it can be and done with before
/// the next is built: `batch` replaying a month at `looks = "1m"` holds one look's
/// sketches, not 43,200 copies.
pub fn for_each_look<E: From<EngineError>>(
    stream: &StreamConfig,
    store: &PaneStore,
    after: Option<i64>,
    through: i64,
    mut each: impl FnMut(Look<'_>) -> Result<(), E>,
) -> Result<(), E> {
    let (Some(first), Some(last)) = (store.first_pane(), store.panes().keys().next_back()) else {
        return Ok(());
    };
    let latest_end = last.saturating_add(store.width());
    for (t, test) in stream.tests.iter().enumerate() {
        let Some(looks) = test.looks else { continue };
        let every = i64::try_from(looks.millis()).unwrap_or(i64::MAX).max(1);
        match test.window {
            WindowConfig::Tumbling { .. } | WindowConfig::Sliding { .. } => {
                for bounds in store.windows(&test.window) {
                    for end in
                        look_times(&test.name, bounds.start, bounds.end, every, after, through)?
                    {
                        each(Look {
                            end,
                            snapshot: WindowSnapshot {
                                test: t,
                                bounds: Some(bounds),
                                is_final: false,
                                late: store.late(),
                                sketches: store.window(Bounds {
                                    start: bounds.start,
                                    end,
                                })?,
                            },
                        })?;
                    }
                }
            }
            WindowConfig::Global | WindowConfig::Cumulative => {
                let times = look_times(&test.name, first, latest_end, every, after, through)?;
                if times.is_empty() {
                    continue;
                }
                // One pass over the panes: each look adds the panes before its time.
                let mut sketches = store.retired().clone();
                let mut panes = store.panes().range(first..).peekable();
                for end in times {
                    while let Some((_, pane)) = panes.next_if(|(&start, _)| start < end) {
                        merge_grouped(&mut sketches, pane)?;
                    }
                    let bounds = match test.window {
                        WindowConfig::Cumulative => Some(Bounds { start: first, end }),
                        _ => None,
                    };
                    each(Look {
                        end,
                        snapshot: WindowSnapshot {
                            test: t,
                            bounds,
                            is_final: false,
                            late: store.late(),
                            sketches: Cow::Borrowed(&sketches),
                        },
                    })?;
                }
            }
        }
    }
    Ok(())
}

/// Multiples of `every` strictly inside `(start, end)` and in `(after, through]`.
fn look_times(
    test: &str,
    start: i64,
    end: i64,
    every: i64,
    after: Option<i64>,
    through: i64,
) -> Result<Vec<i64>, EngineError> {
    let low = after.map_or(start, |a| a.max(start));
    let high = through.min(end.saturating_sub(1));
    if high <= low {
        return Ok(Vec::new());
    }
    // The first multiple of `every` above `low`.
    let first = low
        .div_euclid(every)
        .saturating_add(1)
        .saturating_mul(every);
    if first > high {
        return Ok(Vec::new());
    }
    let count = (high - first) / every + 1;
    if count as u64 > MAX_LOOKS_PER_CALL {
        return Err(EngineError::invalid(
            "looks",
            format!(
                "{every} ms for test {test:?}, over {} ms of event time ({count} looks)",
                high - low
            ),
            "at most 100000 looks per window at once: use a coarser `looks`",
        ));
    }
    Ok((0..count).map(|k| first + k * every).collect())
}

#[cfg(test)]
mod tests {
    use super::look_times;

    #[test]
    fn look_times_are_multiples_strictly_inside_the_window() {
        assert_eq!(
            look_times("t", 0, 60, 20, None, i64::MAX).unwrap(),
            vec![20, 40]
        );
        assert_eq!(
            look_times("t", 0, 61, 20, None, i64::MAX).unwrap(),
            vec![20, 40, 60]
        );
        assert_eq!(
            look_times("t", 5, 60, 20, None, i64::MAX).unwrap(),
            vec![20, 40]
        );
        // Only those in (after, through]: what a later tick of serve takes.
        assert_eq!(
            look_times("t", 0, 100, 20, Some(20), 60).unwrap(),
            vec![40, 60]
        );
        assert_eq!(
            look_times("t", 0, 100, 20, Some(60), 60).unwrap(),
            Vec::<i64>::new()
        );
        assert_eq!(
            look_times("t", -60, 0, 20, None, i64::MAX).unwrap(),
            vec![-40, -20]
        );
        assert!(look_times("t", 0, i64::MAX, 1, None, i64::MAX).is_err());
    }
}
