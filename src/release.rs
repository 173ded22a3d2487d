//! Releasing records of curator-model (private) tests, in the one order that keeps the
//! privacy budget honest: the ledger with the new spends is saved (written atomically,
//! fsynced) before any record that used them leaves the process. A crash between the two
//! then loses records, which can be computed again, never spends, which would give budget
//! back. `batch`, `merge` and `serve` all release through here.

use std::path::Path;

use ldpstream_engine::record::TestRecord;
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::error::Error;
use crate::ledger_file::LedgerBook;
use crate::output::write_records;

/// Where the records of curator-model tests spend, and the noise they draw.
pub struct Release<'a> {
    pub ledgers: &'a mut LedgerBook,
    /// The streams whose ledgers start afresh.
    pub reset: &'a [String],
    /// The ledger file, named in errors.
    pub origin: &'a str,
    pub noise: &'a mut StdRng,
}

/// How a bounded job (`batch`, `merge`) releases its records.
pub struct ReleaseOptions<'a> {
    /// The privacy-budget ledger file; created if missing.
    pub ledger: &'a Path,
    /// Streams whose ledgers start afresh.
    pub reset: &'a [String],
    /// Seeded, reproducible noise: NOT private, for tests only.
    pub insecure_seed: Option<u64>,
    /// Where the JSON lines go; "-" for stdout.
    pub output: &'a str,
}

/// Loads the ledger, sets up the noise, lets `compute` make the records (spending from
/// the ledger), then saves the spends and only then writes the records. Returns them.
pub fn release_records<E: From<Error>>(
    options: &ReleaseOptions<'_>,
    compute: impl FnOnce(Release<'_>) -> Result<Vec<TestRecord>, E>,
) -> Result<Vec<TestRecord>, E> {
    let mut ledgers = LedgerBook::load(options.ledger)?;
    let mut noise = match options.insecure_seed {
        Some(seed) => {
            tracing::warn!(
                seed,
                "--insecure-seed: private releases use seeded, reproducible noise"
            );
            StdRng::seed_from_u64(seed)
        }
        None => ldpstream_engine::curator::secure_rng(),
    };
    let origin = options.ledger.display().to_string();
    let records = compute(Release {
        ledgers: &mut ledgers,
        reset: options.reset,
        origin: &origin,
        noise: &mut noise,
    })?;
    // A job without curator-model streams leaves no ledger file behind.
    let spends = (!ledgers.streams.is_empty()).then_some((&ledgers, options.ledger));
    spend_then_publish(spends, || write_records(options.output, &records))?;
    Ok(records)
}

/// Saves `spends` (the book and its file), then runs `publish`: the rule every release
/// follows. Nothing is published when the spends cannot be saved.
pub fn spend_then_publish<T>(
    spends: Option<(&LedgerBook, &Path)>,
    publish: impl FnOnce() -> Result<T, Error>,
) -> Result<T, Error> {
    if let Some((book, path)) = spends {
        book.save(path)?;
    }
    publish()
}
