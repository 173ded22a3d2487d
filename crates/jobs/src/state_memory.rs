//! The state every stream of a config will hold, against `max_state_memory`: printed by
//! `ldpstream check`, and enforced by `batch` and `serve` before they read anything.

use std::collections::BTreeMap;

use bytesize::ByteSize;
use ldpstream_config::{Config, StreamConfig};
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::stream::StateEstimate;

use crate::error::Error;

/// The limit when the config sets none: half the machine's memory, so that the state,
/// Arrow's decode buffers and the allocator's slack still fit. None where the total
/// memory cannot be read (outside Linux): then only an explicit limit is enforced.
pub fn default_limit() -> Option<ByteSize> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(ByteSize::b(kib.saturating_mul(1024) / 2))
}

/// The limit in force: the config's, else [`default_limit`].
pub fn limit(config: &Config) -> Option<ByteSize> {
    config.max_state_memory.or_else(default_limit)
}

/// Every stream's estimate, folding batches of at most `batch_rows` rows (Parquet sources
/// read fixed-size batches; `serve` cuts at each stream's `max_batch_rows`), with the
/// reports of each stream's input where known (`batch`: from the Parquet footers).
pub fn estimates(
    config: &Config,
    batch_rows: Option<usize>,
    reports: &BTreeMap<String, u64>,
) -> Result<Vec<StateEstimate>, Error> {
    config
        .streams
        .iter()
        .map(|s| estimate(s, batch_rows, reports))
        .collect()
}

/// One stream's estimate (see [`estimates`]).
pub fn estimate(
    stream: &StreamConfig,
    batch_rows: Option<usize>,
    reports: &BTreeMap<String, u64>,
) -> Result<StateEstimate, Error> {
    let m = Mechanism::from_config(&stream.mechanism)?;
    Ok(StateEstimate::of(
        stream,
        &m,
        batch_rows.unwrap_or(stream.max_batch_rows),
        reports.get(&stream.name).copied(),
    ))
}

/// Refuses a config whose streams together would hold more than the limit, naming the
/// stream with the largest estimate and its largest term.
pub fn enforce(
    config: &Config,
    batch_rows: Option<usize>,
    reports: &BTreeMap<String, u64>,
) -> Result<(), Error> {
    let Some(limit) = limit(config) else {
        return Ok(());
    };
    let estimates = estimates(config, batch_rows, reports)?;
    let total = estimates
        .iter()
        .fold(0u64, |sum, e| sum.saturating_add(e.total()));
    if total <= limit.as_u64() {
        return Ok(());
    }
    let worst = estimates.iter().max_by_key(|e| e.total());
    let (stream, term) = match worst.and_then(|e| e.largest().map(|t| (e, t))) {
        Some((e, t)) => (
            e.stream.clone(),
            format!("{}: {} ({})", t.what, ByteSize::b(t.bytes), t.how),
        ),
        None => (String::new(), String::new()),
    };
    Err(Error::StateMemory {
        total: ByteSize::b(total),
        limit,
        stream,
        term,
    })
}
