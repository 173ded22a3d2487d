//! The window a test result covers.

use serde::Deserialize;

use crate::duration::DurationMs;

/// The window a test result covers. Windows are aligned to the Unix epoch (UTC).
// Parsed through `RawWindow`: serde ignores `deny_unknown_fields` on the unit variants of
// an internally tagged enum, so `{ kind = "global", size = "1h" }` used to pass silently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "RawWindow")]
pub enum WindowConfig {
    /// Every report the source delivers, in one result (null window bounds).
    #[default]
    Global,
    /// Disjoint windows `[k·size, (k+1)·size)`.
    Tumbling { size: DurationMs },
    /// Windows `[j·slide, j·slide + size)`; size must be a multiple of slide.
    Sliding { size: DurationMs, slide: DurationMs },
    /// Everything since the first report, with bounds: the first pane's start to the
    /// latest pane's end.
    Cumulative,
}

/// Every key any window kind takes; `TryFrom` checks which ones this kind allows.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWindow {
    kind: String,
    #[serde(default)]
    size: Option<DurationMs>,
    #[serde(default)]
    slide: Option<DurationMs>,
    #[serde(default)]
    looks: Option<DurationMs>,
}

/// A test's `window` table: the window, and how often in event time a monitor looks at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "RawWindow")]
pub(crate) struct WindowTable {
    pub(crate) window: WindowConfig,
    pub(crate) looks: Option<DurationMs>,
}

impl TryFrom<RawWindow> for WindowTable {
    type Error = String;

    fn try_from(mut raw: RawWindow) -> Result<Self, String> {
        let looks = raw.looks.take();
        Ok(WindowTable {
            window: WindowConfig::try_from(raw)?,
            looks,
        })
    }
}

impl TryFrom<RawWindow> for WindowConfig {
    type Error = String;

    fn try_from(raw: RawWindow) -> Result<Self, String> {
        if let Some(looks) = raw.looks {
            return Err(format!(
                "`looks` (found looks = {looks}) belongs in a test's window table"
            ));
        }
        let unexpected = |key: &str, value: DurationMs| {
            Err(format!(
                "window kind {:?} takes no `{key}` key (found {key} = {value}): only tumbling \
                 windows take `size`, and only sliding windows take `size` and `slide`",
                raw.kind
            ))
        };
        let missing = |key: &str| Err(format!("window kind {:?} needs `{key}`", raw.kind));
        match (raw.kind.as_str(), raw.size, raw.slide) {
            ("global" | "cumulative", Some(size), _) => unexpected("size", size),
            ("global" | "cumulative" | "tumbling", _, Some(slide)) => unexpected("slide", slide),
            ("global", None, None) => Ok(WindowConfig::Global),
            ("cumulative", None, None) => Ok(WindowConfig::Cumulative),
            ("tumbling", Some(size), None) => Ok(WindowConfig::Tumbling { size }),
            ("sliding", Some(size), Some(slide)) => Ok(WindowConfig::Sliding { size, slide }),
            ("tumbling" | "sliding", None, _) => missing("size"),
            ("sliding", Some(_), None) => missing("slide"),
            (other, _, _) => Err(format!(
                "unknown window kind {other:?}, expected one of `global`, `tumbling`, `sliding`, \
                 `cumulative`"
            )),
        }
    }
}
