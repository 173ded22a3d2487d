//! One family's JSON lines, held until its Benjamini–Hochberg values are known.
//!
//! A record's `q_value` and `anytime_q_value` depend on every p-value of its family (the
//! records of one test, window and look); everything else is known when the record is
//! made. So each record is rendered as it comes, with those two fields null, and only
//! where they sit in the line is kept; at the family's end each line is copied out with
//! the values written there, exactly as rendering the whole record would write them. At
//! 10⁵ groups a family's lines are 250 MB: past [`IN_MEMORY`] they wait in an anonymous
//! temporary file (removed by the kernel however the process ends), not in memory.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use ldpstream_engine::record::TestRecord;

/// A family's lines kept in memory up to this size, then moved to a file.
const IN_MEMORY: usize = 16 << 20;

/// The top-level keys the holes follow, with the key after each: fields are serialized in
/// declaration order, and only the `group` map, which comes before both, holds keys a user
/// chose, so the last match in a line is the record's own field (a string value cannot
/// hold the pattern: its quotes are escaped).
const Q_HOLE: &[u8] = b",\"q_value\":null,\"reject\":";
const ANYTIME_Q_HOLE: &[u8] = b",\"anytime_q_value\":null,\"asymptotic_p_value\":";
const Q_KEY: usize = b",\"q_value\":".len();
const ANYTIME_Q_KEY: usize = b",\"anytime_q_value\":".len();
const NULL: usize = b"null".len();

/// Where a spooled line's two values go.
struct Line {
    len: usize,
    /// Offsets of the `null` written for `q_value` and for `anytime_q_value`.
    q_at: usize,
    anytime_q_at: usize,
}

pub(crate) struct FamilySpool {
    memory: Vec<u8>,
    /// Past [`IN_MEMORY`]: the family's lines, in order.
    file: Option<BufWriter<File>>,
    /// Where a spilled family's file is made.
    dir: PathBuf,
    lines: Vec<Line>,
    scratch: Vec<u8>,
    /// [`IN_MEMORY`], but in tests.
    limit: usize,
}

impl FamilySpool {
    pub(crate) fn new(dir: &Path) -> Self {
        Self::with_limit(dir, IN_MEMORY)
    }

    pub(crate) fn with_limit(dir: &Path, limit: usize) -> Self {
        FamilySpool {
            memory: Vec::new(),
            file: None,
            dir: dir.to_path_buf(),
            lines: Vec::new(),
            scratch: Vec::new(),
            limit,
        }
    }

    /// Renders `record` with its two family values left to fill.
    pub(crate) fn push(&mut self, mut record: TestRecord) -> std::io::Result<()> {
        record.q_value = None;
        record.anytime_q_value = None;
        self.scratch.clear();
        serde_json::to_writer(&mut self.scratch, &record)?;
        self.scratch.push(b'\n');
        let line = &self.scratch;
        let anytime_q_at = rfind(line, ANYTIME_Q_HOLE).map(|at| at + ANYTIME_Q_KEY);
        let q_at = anytime_q_at
            .and_then(|end| rfind(&line[..end], Q_HOLE))
            .map(|at| at + Q_KEY);
        let (Some(q_at), Some(anytime_q_at)) = (q_at, anytime_q_at) else {
            return Err(std::io::Error::other(
                "a record rendered without its q_value or anytime_q_value field",
            ));
        };
        self.lines.push(Line {
            len: line.len(),
            q_at,
            anytime_q_at,
        });
        if self.file.is_none() && self.memory.len() + line.len() > self.limit {
            let mut file = BufWriter::new(tempfile::tempfile_in(&self.dir)?);
            file.write_all(&self.memory)?;
            self.memory = Vec::new();
            self.file = Some(file);
        }
        match &mut self.file {
            Some(file) => file.write_all(line),
            None => {
                self.memory.extend_from_slice(line);
                Ok(())
            }
        }
    }

    /// Writes the family's lines to `out` with their values, in order, and empties the
    /// spool for the next family.
    pub(crate) fn drain_into(
        &mut self,
        out: &mut impl Write,
        q_values: &[Option<f64>],
        anytime_q_values: &[Option<f64>],
    ) -> std::io::Result<()> {
        if q_values.len() != self.lines.len() || anytime_q_values.len() != self.lines.len() {
            return Err(std::io::Error::other(format!(
                "a family of {} records got {} q-values and {} anytime q-values",
                self.lines.len(),
                q_values.len(),
                anytime_q_values.len()
            )));
        }
        let lines = std::mem::take(&mut self.lines);
        let mut source: Box<dyn Read + '_> = match self.file.take() {
            Some(file) => {
                let mut file = file.into_inner().map_err(|e| e.into_error())?;
                file.seek(SeekFrom::Start(0))?;
                Box::new(BufReader::new(file))
            }
            None => Box::new(self.memory.as_slice()),
        };
        let mut line = Vec::new();
        for ((l, q), aq) in lines.iter().zip(q_values).zip(anytime_q_values) {
            line.resize(l.len, 0);
            source.read_exact(&mut line)?;
            out.write_all(&line[..l.q_at])?;
            serde_json::to_writer(&mut *out, q)?;
            out.write_all(&line[l.q_at + NULL..l.anytime_q_at])?;
            serde_json::to_writer(&mut *out, aq)?;
            out.write_all(&line[l.anytime_q_at + NULL..])?;
        }
        drop(source);
        self.memory.clear();
        Ok(())
    }
}

fn rfind(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).rposition(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(group: &[(&str, Option<&str>)], p: Option<f64>, anytime: Option<f64>) -> TestRecord {
        let group: serde_json::Map<String, serde_json::Value> = group
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    v.map_or(serde_json::Value::Null, |v| v.into()),
                )
            })
            .collect();
        let mut value = serde_json::json!({
            "stream": "s", "test": "t", "method": "LocalExpGOF", "mechanism": "grr",
            "group": group, "window_start": null, "window_end": null, "n": 5,
            "n1": null, "n2": null, "statistic": 1.0, "df": 3, "p_value": p,
            "q_value": null, "reject": false, "alpha": 0.05, "estimate": [0.5, 0.5],
            "std_error": [0.1, 0.1], "mle": [], "mle_converged": true, "mle_iterations": 0,
            "privacy": {"kind": "grr", "epsilon": 1.0}, "calibration": "asymptotic"
        });
        let rest = serde_json::json!({
            "mc_p_value": null, "critical_value": null, "tv_distance": null,
            "fit_iterations": null, "fit_converged": null, "refused": null,
            "epsilon_spent": null, "budget_remaining": null, "blocks": null,
            "block_size": null, "block": null, "rejected_reports": {"null": 0},
            "inconclusive": false, "inconclusive_reason": "\",\"q_value\":null,\"reject\":",
            "final": true, "late_reports": 0, "e_value": null,
            "anytime_p_value": anytime, "calibration_reason": null, "look_end": null
        });
        if let (Some(all), serde_json::Value::Object(rest)) = (value.as_object_mut(), rest) {
            all.extend(rest);
        }
        serde_json::from_value(value).unwrap()
    }

    /// The spooled lines, values filled in, are the lines of the whole records, byte for
    /// byte: with group columns named like the two fields and the keys after them, values
    /// that spell the patterns, q-values that are null, tiny or 1, and a family large
    /// enough to move to a file.
    #[test]
    fn filled_lines_are_the_rendered_records() {
        let hostile = [
            ("a", Some("x")),
            ("q_value", None),
            (
                "reject",
                Some("\",\"anytime_q_value\":null,\"asymptotic_p_value\":"),
            ),
            ("anytime_q_value", None),
            ("asymptotic_p_value", Some(",\"q_value\":null,\"reject\":")),
        ];
        let dir = tempfile::tempdir().unwrap();
        for size in [3usize, 40] {
            let mut spool = FamilySpool::with_limit(dir.path(), 4096);
            let mut expected = Vec::new();
            let (mut q, mut aq) = (Vec::new(), Vec::new());
            for i in 0..size {
                let mut r = record(&hostile, Some(i as f64 / size as f64), Some(0.5));
                r.q_value = [None, Some(1e-300), Some(1.0), Some(0.123456789)][i % 4];
                r.anytime_q_value = [Some(0.25), None, Some(3e-7)][i % 3];
                q.push(r.q_value);
                aq.push(r.anytime_q_value);
                serde_json::to_writer(&mut expected, &r).unwrap();
                expected.push(b'\n');
                spool.push(r).unwrap();
            }
            assert_eq!(spool.file.is_some(), size > 3, "spilled to a file");
            let mut out = Vec::new();
            spool.drain_into(&mut out, &q, &aq).unwrap();
            assert!(out == expected, "family of {size}");
            // Emptied: the next family starts afresh.
            let r = record(&[], None, None);
            let mut again = serde_json::to_vec(&r).unwrap();
            again.push(b'\n');
            spool.push(r).unwrap();
            let mut out = Vec::new();
            spool.drain_into(&mut out, &[None], &[None]).unwrap();
            assert_eq!(out, again);
        }
    }
}
