//! Releasing records of curator-model (private) tests, in the one order that keeps the
//! privacy budget honest: the records are rendered and staged first (so a release whose
//! records cannot be written spends nothing; `batch` and `merge` render each one as it is
//! made, into a file no one else can open, `record_output`), then the ledger with the new spends is saved
//! (written atomically, fsynced), and only then does any record that used them leave the
//! process. A crash between the save and the publication loses records, which can be
//! computed again, never spends, which would give budget back. The spends are made on the ledger as read under its lock
//! ([`crate::ledger::store`]), held until they are saved, so that another process spending
//! from the same file meanwhile loses nothing. `batch`, `merge` and `serve` all release
//! through here.

use ldpstream_engine::record::TestRecord;
use ldpstream_engine::stream::RecordSink;
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::error::Error;
use crate::ledger::store::{LedgerFile, LockedLedger};
use crate::record_output::{RecordWriter, Summary};

/// Where the records of curator-model tests spend, and the noise they draw.
pub struct Release<'a> {
    /// The deployment's ledger file; None when no stream has a budget.
    pub ledger: Option<&'a LedgerFile>,
    /// The streams whose ledgers start afresh.
    pub reset: &'a [String],
    pub noise: &'a mut StdRng,
}

/// What a bounded job computed: its records, and the ledger (still locked) they spent
/// from, to be saved before the records are written.
pub struct Released {
    pub records: Vec<TestRecord>,
    pub spends: Option<LockedLedger>,
}

/// How a bounded job (`batch`, `merge`) releases its records.
pub struct ReleaseOptions<'a> {
    /// The privacy-budget ledger file; created if missing.
    pub ledger: Option<&'a LedgerFile>,
    /// Streams whose ledgers start afresh.
    pub reset: &'a [String],
    /// Seeded, reproducible noise: NOT private, for tests only.
    pub insecure_seed: Option<u64>,
    /// Where the JSON lines go; "-" for stdout.
    pub output: &'a str,
}

/// Sets up the noise, lets `compute` make the records into a [`RecordWriter`] for the
/// output (spending from the ledger, which it locks and hands back), stages the records'
/// output, then saves the spends and only then publishes the records. When the output
/// cannot be written or staged the ledger is left unsaved: no spend. Returns what was
/// released, counted.
pub fn release_records<E: From<Error>>(
    options: &ReleaseOptions<'_>,
    compute: impl FnOnce(Release<'_>, &mut dyn RecordSink) -> Result<Option<LockedLedger>, E>,
) -> Result<Summary, E> {
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
    let mut writer = RecordWriter::open(options.output)?;
    let spends = compute(
        Release {
            ledger: options.ledger,
            reset: options.reset,
            noise: &mut noise,
        },
        &mut writer,
    )?;
    // Dropped unsaved on an error here: the lock goes, and nothing was spent.
    let (prepared, summary) = writer.finish()?;
    spend_then_publish(spends, || prepared.commit())?;
    Ok(summary)
}

/// Saves `spends` (and so unlocks the ledger), then runs `publish`: the rule every release
/// follows. Nothing is published when the spends cannot be saved.
pub fn spend_then_publish<T>(
    spends: Option<LockedLedger>,
    publish: impl FnOnce() -> Result<T, Error>,
) -> Result<T, Error> {
    if let Some(locked) = spends {
        locked.save()?;
    }
    publish()
}
