use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// A span of time written as an integer and a unit: `"250ms"`, `"30s"`, `"5m"`, `"1h"`,
/// `"1d"`. Stored in milliseconds, the resolution of event-time columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct DurationMs(pub u64);

impl DurationMs {
    pub const ZERO: DurationMs = DurationMs(0);

    pub fn millis(self) -> u64 {
        self.0
    }

    pub fn as_std(self) -> std::time::Duration {
        std::time::Duration::from_millis(self.0)
    }

    /// Parses `"<integer><unit>"` with unit `ms`, `s`, `m`, `h` or `d`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim();
        let digits = t.bytes().take_while(u8::is_ascii_digit).count();
        let (number, unit) = t.split_at(digits);
        let scale: u64 = match unit {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(Self::expected(text)),
        };
        let n: u64 = number.parse().map_err(|_| Self::expected(text))?;
        n.checked_mul(scale)
            .map(DurationMs)
            .ok_or_else(|| format!("duration {text:?} is too long"))
    }

    fn expected(text: &str) -> String {
        format!(
            "invalid duration {text:?}: expected an integer followed by ms, s, m, h or d, e.g. \"30s\" or \"5m\""
        )
    }
}

impl std::fmt::Display for DurationMs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = self.0;
        let units = [
            (86_400_000, "d"),
            (3_600_000, "h"),
            (60_000, "m"),
            (1_000, "s"),
        ];
        for (scale, unit) in units {
            if ms != 0 && ms.is_multiple_of(scale) {
                return write!(f, "\"{}{unit}\"", ms / scale);
            }
        }
        write!(f, "\"{ms}ms\"")
    }
}

impl<'de> Deserialize<'de> for DurationMs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DurationVisitor;
        impl Visitor<'_> for DurationVisitor {
            type Value = DurationMs;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a duration string such as \"30s\", \"5m\" or \"1h\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<DurationMs, E> {
                DurationMs::parse(v).map_err(E::custom)
            }
        }
        deserializer.deserialize_str(DurationVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(DurationMs::parse("250ms"), Ok(DurationMs(250)));
        assert_eq!(DurationMs::parse("30s"), Ok(DurationMs(30_000)));
        assert_eq!(DurationMs::parse("5m"), Ok(DurationMs(300_000)));
        assert_eq!(DurationMs::parse("1h"), Ok(DurationMs(3_600_000)));
        assert_eq!(DurationMs::parse("2d"), Ok(DurationMs(172_800_000)));
        assert_eq!(DurationMs::parse("0s"), Ok(DurationMs(0)));
    }

    #[test]
    fn rejects_garbage_naming_it() {
        for bad in ["", "5", "m", "5 x", "-5s", "1.5h", "5min"] {
            let e = DurationMs::parse(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }

    #[test]
    fn displays_in_the_largest_exact_unit() {
        assert_eq!(DurationMs(300_000).to_string(), "\"5m\"");
        assert_eq!(DurationMs(1_500).to_string(), "\"1500ms\"");
    }
}
