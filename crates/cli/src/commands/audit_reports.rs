//! `ldpstream audit --reports FILE`: the audit's statistics over (input, output) pairs that
//! any client wrote, so that a third-party randomizer is audited by the same bound as the
//! engine's own (conformance/README.md).

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;

use anyhow::{anyhow, Context, Result};
use ldpstream_engine::audit::{audit_sampler, AuditReport};
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::EngineError;
use rand::SeedableRng;

/// Per input, how often each output index occurred.
type Tallies = Vec<HashMap<usize, u64>>;

/// Reads `input,output` lines (output = the audit's index of the report: grr, matrix: the
/// category; bitflip: the packed bits as an integer, byte i at bits 8i..8i+7; subset: the
/// sorted items numbered Σ_i C(s_i, i+1); hadamard, cohort: 2·index + (report < 0)). Blank lines and lines starting with `#` are skipped.
fn read_pairs(path: &Path, domain: usize) -> Result<Tallies> {
    let file = std::fs::File::open(path)
        .with_context(|| format!("opening the reports file {}", path.display()))?;
    let mut tallies: Tallies = vec![HashMap::new(); domain];
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("reading {}", path.display()))?;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = || format!("{} line {}: {line:?}", path.display(), i + 1);
        let (x, s) = line
            .split_once(',')
            .ok_or_else(|| anyhow!("{}: expected \"input,output\"", at()))?;
        let x: usize = x
            .trim()
            .parse()
            .map_err(|_| anyhow!("{}: the input is not an integer", at()))?;
        let s: usize = s
            .trim()
            .parse()
            .map_err(|_| anyhow!("{}: the output is not an integer", at()))?;
        let slot = tallies
            .get_mut(x)
            .ok_or_else(|| anyhow!("{}: input {x} is outside the domain (d = {domain})", at()))?;
        *slot.entry(s).or_insert(0) += 1;
    }
    Ok(tallies)
}

/// The audit's bound needs the same number of reports of every input: it compares
/// proportions with one-sided Clopper–Pearson bounds at a common n.
fn common_count(tallies: &Tallies, path: &Path) -> Result<u64> {
    let totals: Vec<u64> = tallies.iter().map(|t| t.values().sum()).collect();
    let n = totals.first().copied().unwrap_or(0);
    if n == 0 || totals.iter().any(|&t| t != n) {
        return Err(anyhow!(
            "{}: every input needs the same number of reports, at least 1 (found {:?} for inputs 0..{})",
            path.display(),
            totals,
            totals.len()
        ));
    }
    Ok(n)
}

/// Audits the pairs in `path` as reports of `mechanism`, at simultaneous `confidence`.
pub fn audit_file(mechanism: &Mechanism, path: &Path, confidence: f64) -> Result<AuditReport> {
    let tallies = read_pairs(path, mechanism.domain())?;
    let n = common_count(&tallies, path)?;
    // The sampler is asked for n outputs of each input in turn; it gets the file's, in
    // any order (the bound depends on the counts only).
    let mut queue: Vec<(usize, u64)> = Vec::new();
    let mut current = u32::MAX;
    let mut unused = rand::rngs::StdRng::seed_from_u64(0);
    audit_sampler(mechanism, n, confidence, &mut unused, |x, _| {
        if x != current {
            current = x;
            queue = tallies[x as usize].iter().map(|(&s, &k)| (s, k)).collect();
        }
        let (s, left) = queue.last_mut().ok_or(EngineError::InvalidParameter {
            name: "reports",
            value: format!("input {x}"),
            allowed: "the same number of reports of every input",
        })?;
        let s = *s;
        *left -= 1;
        if *left == 0 {
            queue.pop();
        }
        Ok(s)
    })
    .map_err(|e| anyhow!("{}: {e}", path.display()))
}
