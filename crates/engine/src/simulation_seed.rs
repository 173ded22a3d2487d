//! The seed of one record's simulations (docs/STATISTICS.md §6).
//!
//! A Monte Carlo p-value is exact on average over its reference set, not for one fixed
//! set: with the test's `seed` used directly, every group of every window compared its
//! statistic with the same simulated critical value, and for an unlucky seed every group
//! was over-rejected at once (raw d = 10, n = 6, seed 0: 0.0568 at α = 0.05). Each record
//! therefore draws from its own stream: the test's seed keyed with where the record sits
//! (stream, test, group, window start), through XXH3-128, whose output its specification
//! freezes, so any run, path (`batch`, `serve`, `merge`, Python, Spark, Ray) or split of
//! the input reproduces it. Looks of one window share its window's seed.
//!
//! The key holds only what the record itself publishes (names, group values, window
//! start), never a count, so a curator test's null still depends on public parameters
//! only. The released noise of curator tests is not simulated: it draws from the OS.

use ldpstream_config::{StreamConfig, TestConfig, WindowConfig};
use twox_hash::xxhash3_128::Hasher;

use crate::scope::Scope;

/// Bumped if the key's layout ever changes: old and new seeds then differ everywhere
/// instead of colliding by accident.
const KEY_VERSION: &[u8] = b"ldpstream simulation seed v1";

/// The length-prefixed encoding of the key: no two different keys share bytes, whatever
/// their strings hold (a group value `"a\0b"` cannot pass for two values).
struct Key(Vec<u8>);

impl Key {
    fn put(&mut self, bytes: &[u8]) {
        self.0
            .extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        self.0.extend_from_slice(bytes);
    }

    fn put_optional(&mut self, value: Option<&str>) {
        match value {
            None => self.put(&[0]),
            Some(v) => {
                self.put(&[1]);
                self.put(v.as_bytes());
            }
        }
    }
}

/// The seed of the simulations behind the record of `test` at `scope`: the test's `seed`
/// keyed with the stream's and test's names, the group (column by column, in column
/// order) and the window's start. A cumulative or global window leaves its start out, as
/// the sequential latches do: its start moves earlier when a late report opens an earlier
/// pane, and it is still the same window.
pub fn simulation_seed(stream: &StreamConfig, test: &TestConfig, scope: &Scope) -> u64 {
    let mut key = Key(Vec::with_capacity(128));
    key.put(KEY_VERSION);
    key.put(stream.name.as_bytes());
    key.put(test.name.as_bytes());
    match &scope.group {
        None => key.put(&[0]),
        Some(group) => {
            key.put(&[1]);
            key.put(&(group.len() as u64).to_le_bytes());
            for (column, value) in group {
                key.put(column.as_bytes());
                key.put_optional(value.as_deref());
            }
        }
    }
    let open_ended = matches!(test.window, WindowConfig::Cumulative | WindowConfig::Global);
    key.put_optional(scope.window_start.as_deref().filter(|_| !open_ended));
    // The low 64 bits: XXH3-128's halves are each well mixed.
    Hasher::oneshot_with_seed(test.seed, &key.0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn config(window: &str) -> StreamConfig {
        let toml = format!(
            "[[stream]]\nname = \"s\"\nsource = {{ kind = \"parquet\", paths = [\"x.parquet\"] }}\n\
             columns = {{ report = \"r\", group_by = [\"g\", \"h\"] }}\n\
             mechanism = {{ kind = \"raw\", domain = 4 }}\n\
             [[stream.test]]\nname = \"t\"\nkind = \"gof\"\nnull = \"uniform\"\n\
             window = {window}\n"
        );
        ldpstream_config::Config::from_toml_str(&toml, "t")
            .unwrap()
            .streams
            .remove(0)
    }

    fn scope(g: Option<&str>, h: Option<&str>, start: Option<&str>) -> Scope {
        let group: BTreeMap<String, Option<String>> = [
            ("g".to_string(), g.map(str::to_string)),
            ("h".to_string(), h.map(str::to_string)),
        ]
        .into();
        Scope {
            group: Some(group),
            window_start: start.map(str::to_string),
            window_end: None,
            look: false,
        }
    }

    /// Groups, windows and tests each get their own seed; the same record's key gives the
    /// same seed; a null value is not the empty string; values cannot pass for one another
    /// across columns; a cumulative window's start is left out.
    #[test]
    fn the_key_separates_records() {
        let s = config("{ kind = \"tumbling\", size = \"1h\" }");
        let t = &s.tests[0];
        let seed = |sc: &Scope| simulation_seed(&s, t, sc);
        let a = seed(&scope(Some("x"), Some("y"), Some("2024-01-01T00:00:00Z")));
        assert_eq!(
            a,
            seed(&scope(Some("x"), Some("y"), Some("2024-01-01T00:00:00Z")))
        );
        let others = [
            seed(&scope(Some("x"), Some("z"), Some("2024-01-01T00:00:00Z"))),
            seed(&scope(Some("x"), Some("y"), Some("2024-01-01T01:00:00Z"))),
            seed(&scope(Some("x"), None, Some("2024-01-01T00:00:00Z"))),
            seed(&scope(Some("x"), Some(""), Some("2024-01-01T00:00:00Z"))),
            seed(&scope(Some("xy"), Some(""), Some("2024-01-01T00:00:00Z"))),
            seed(&scope(Some("x"), Some("y"), None)),
        ];
        for (k, o) in others.iter().enumerate() {
            assert_ne!(a, *o, "key {k}");
        }
        let mut reseeded = t.clone();
        reseeded.seed += 1;
        assert_ne!(
            a,
            simulation_seed(
                &s,
                &reseeded,
                &scope(Some("x"), Some("y"), Some("2024-01-01T00:00:00Z"))
            )
        );
        let c = config("{ kind = \"cumulative\" }");
        let early = simulation_seed(
            &c,
            &c.tests[0],
            &scope(Some("x"), None, Some("2024-01-01T00:00:00Z")),
        );
        let later = simulation_seed(
            &c,
            &c.tests[0],
            &scope(Some("x"), None, Some("2024-01-02T00:00:00Z")),
        );
        assert_eq!(early, later);
    }

    /// The derivation, pinned: records must keep their p-values across builds (XXH3's
    /// output is fixed by its specification since 0.8.0). Computed independently with
    /// Python's `xxhash` 3: `xxh3_128_intdigest(key, seed=0) & (2**64 - 1)` of the
    /// length-prefixed key above.
    #[test]
    fn the_seed_is_pinned() {
        let s = config("{ kind = \"global\" }");
        let got = simulation_seed(&s, &s.tests[0], &scope(Some("x"), None, None));
        assert_eq!(got, PINNED, "{got:#x}");
    }

    const PINNED: u64 = 0x8bdf_d875_7f96_a11e;
}
