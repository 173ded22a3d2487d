use ldpstream_config::WindowConfig;

/// Pane width when no test of a stream has a tumbling or sliding window: panes then only
/// bound how much state waits for the watermark before it is retired.
pub const DEFAULT_PANE_MS: i64 = 60_000;

/// A half-open interval of event time `[start, end)` in milliseconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bounds {
    pub start: i64,
    pub end: i64,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The pane width of a stream: the gcd of every size and slide of its bounded windows, so
/// that each window is a whole number of panes.
pub fn pane_width<'a>(windows: impl IntoIterator<Item = &'a WindowConfig>) -> i64 {
    pane_width_with_looks(windows, std::iter::empty())
}

/// [`pane_width`], also dividing every `looks` interval (in ms): a look merges the panes
/// before it, so each look time must be a pane boundary.
pub fn pane_width_with_looks<'a>(
    windows: impl IntoIterator<Item = &'a WindowConfig>,
    looks: impl IntoIterator<Item = u64>,
) -> i64 {
    let g = windows
        .into_iter()
        .flat_map(|w| match *w {
            WindowConfig::Tumbling { size } => [size.millis(), 0],
            WindowConfig::Sliding { size, slide } => [size.millis(), slide.millis()],
            WindowConfig::Global | WindowConfig::Cumulative => [0, 0],
        })
        .chain(looks)
        .fold(0, gcd);
    if g == 0 {
        DEFAULT_PANE_MS
    } else {
        i64::try_from(g).unwrap_or(DEFAULT_PANE_MS)
    }
}

/// The event times a window can hold: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z, in
/// ms. A report stamped outside them is counted as late, never placed: one report at
/// `i64::MAX` would otherwise move the watermark past every later report. A checkpoint
/// holding a time outside them was not written by ldpstream.
pub const EVENT_TIME_MS: std::ops::RangeInclusive<i64> = -62_135_596_800_000..=253_402_300_799_999;

/// The start of the pane holding event time `ts_ms` (floor, also for times before 1970).
pub fn pane_start(ts_ms: i64, width: i64) -> i64 {
    ts_ms.div_euclid(width) * width
}

/// The bounded windows of kind `window` that contain the pane starting at `pane`, oldest
/// first. Global and cumulative windows are unbounded and have none.
pub fn windows_of_pane(window: &WindowConfig, pane: i64) -> Vec<Bounds> {
    match *window {
        WindowConfig::Tumbling { size } => {
            let size = size.millis() as i64;
            let start = pane_start(pane, size);
            vec![Bounds {
                start,
                end: start + size,
            }]
        }
        WindowConfig::Sliding { size, slide } => {
            let (size, slide) = (size.millis() as i64, slide.millis() as i64);
            let last = pane_start(pane, slide);
            let mut out = Vec::with_capacity((size / slide) as usize);
            let mut start = last - size + slide;
            while start <= last {
                out.push(Bounds {
                    start,
                    end: start + size,
                });
                start += slide;
            }
            out
        }
        WindowConfig::Global | WindowConfig::Cumulative => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldpstream_config::DurationMs;

    const MIN: u64 = 60_000;

    fn tumbling(m: u64) -> WindowConfig {
        WindowConfig::Tumbling {
            size: DurationMs(m * MIN),
        }
    }

    fn sliding(size: u64, slide: u64) -> WindowConfig {
        WindowConfig::Sliding {
            size: DurationMs(size * MIN),
            slide: DurationMs(slide * MIN),
        }
    }

    #[test]
    fn pane_width_is_the_gcd() {
        assert_eq!(pane_width(&[tumbling(60), sliding(60, 5)]), 5 * MIN as i64);
        assert_eq!(pane_width(&[tumbling(6), tumbling(4)]), 2 * MIN as i64);
        assert_eq!(pane_width(&[WindowConfig::Cumulative]), DEFAULT_PANE_MS);
        assert_eq!(pane_width(&[WindowConfig::Global, tumbling(1)]), MIN as i64);
    }

    #[test]
    fn panes_floor_also_before_the_epoch() {
        assert_eq!(pane_start(0, 1000), 0);
        assert_eq!(pane_start(999, 1000), 0);
        assert_eq!(pane_start(1000, 1000), 1000);
        assert_eq!(pane_start(-1, 1000), -1000);
    }

    #[test]
    fn tumbling_window_of_a_pane() {
        let m = MIN as i64;
        assert_eq!(
            windows_of_pane(&tumbling(10), 23 * m),
            vec![Bounds {
                start: 20 * m,
                end: 30 * m
            }]
        );
    }

    #[test]
    fn sliding_windows_of_a_pane() {
        let m = MIN as i64;
        let w = windows_of_pane(&sliding(15, 5), 12 * m);
        assert_eq!(
            w,
            vec![
                Bounds {
                    start: 0,
                    end: 15 * m
                },
                Bounds {
                    start: 5 * m,
                    end: 20 * m
                },
                Bounds {
                    start: 10 * m,
                    end: 25 * m
                },
            ]
        );
        for b in &w {
            assert!(b.start <= 12 * m && 12 * m < b.end);
        }
        assert!(windows_of_pane(&WindowConfig::Cumulative, 0).is_empty());
    }
}
