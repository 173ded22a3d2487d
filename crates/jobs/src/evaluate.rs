//! Testing folded sketches as a bounded job does: every stream's sketches checked for
//! something to test, its ledgers opened (and checked before the fold, so a conflict fails
//! at once), its tests evaluated, and the spends handed back with the records to be saved
//! before any record is published. `batch` (over Parquet files), `merge` (over sketch
//! files) and the Python package (over in-memory Arrow data) all end here.

use ldpstream_config::{Config, StreamConfig, TestSpec};
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::sketch::Rejections;
use ldpstream_engine::stream::layout::fold_columns;
use ldpstream_engine::stream::{
    evaluate_stream_into, CollectRecords, PanedDelta, Private, RecordSink,
};

use crate::error::Error;
use crate::ledger::file::{check_reset_names, open_ledger, LedgerEntry};
pub use crate::ledger::release::{Release, Released};
use crate::ledger::store::{LedgerFile, LockedLedger};
use crate::parallel_groups::RayonGroups;

/// Tests every stream of `config` on the sketches `sketches_of` gives it (folded here, or
/// merged from partial sketch files). `fingerprints[i]` identifies stream i's input for
/// its privacy ledger.
///
/// Every stream is folded before the ledger is locked, so that a long fold never holds
/// up another process's spends; the ledgers are then opened on the file as read under
/// the lock, and the lock is handed back with the records, to be released by the save.
/// The ledgers are also checked once before the fold, so that a conflict fails at once.
pub fn test_streams(
    config: &Config,
    fingerprints: &[String],
    release: Release<'_>,
    sketches_of: impl FnMut(&StreamConfig, &Mechanism) -> Result<PanedDelta, Error>,
) -> Result<Released, Error> {
    let mut all = CollectRecords::default();
    let spends = test_streams_into(config, fingerprints, release, &mut all, sketches_of)?;
    Ok(Released {
        records: all.records,
        spends,
    })
}

/// [`test_streams`], handing each record to `sink` as it is made (a window's family at a
/// time) instead of keeping them: `batch` and `merge` write them out as they come
/// (`record_output`). Returns the ledger, still locked, with the spends to save before
/// any record is published.
pub fn test_streams_into(
    config: &Config,
    fingerprints: &[String],
    release: Release<'_>,
    sink: &mut dyn RecordSink,
    mut sketches_of: impl FnMut(&StreamConfig, &Mechanism) -> Result<PanedDelta, Error>,
) -> Result<Option<LockedLedger>, Error> {
    let Release {
        ledger,
        reset,
        noise,
    } = release;
    check_reset_names(config, reset)?;
    if let Some(file) = ledger {
        // Reset streams cannot conflict; leaving them out logs each reset once.
        let before = file.lock()?;
        let origin = before.path().display().to_string();
        for (stream, fingerprint) in config.streams.iter().zip(fingerprints) {
            if !reset.contains(&stream.name) {
                open_ledger(&before.book.streams, stream, fingerprint, &[], &origin)?;
            }
        }
    }
    let mut folded = Vec::new();
    for stream in &config.streams {
        let mechanism = Mechanism::from_config(&stream.mechanism)?;
        let sketches = sketches_of(stream, &mechanism)?;
        check_testable(stream, &sketches)?;
        folded.push((mechanism, sketches));
    }
    let mut locked = ledger.map(LedgerFile::lock).transpose()?;
    let mut opened = match &locked {
        Some(l) => open_ledgers(config, fingerprints, l, reset)?,
        None => vec![None; config.streams.len()],
    };
    for ((stream, (mechanism, sketches)), ledger) in
        config.streams.iter().zip(folded).zip(&mut opened)
    {
        let mut private = Private {
            ledger: ledger.as_mut().map(|e| &mut e.ledger),
            noise: &mut *noise,
        };
        evaluate_stream_into(
            stream,
            &mechanism,
            sketches,
            &mut private,
            &RayonGroups,
            &mut *sink,
        )?;
    }
    if let Some(l) = &mut locked {
        for (stream, entry) in config.streams.iter().zip(opened) {
            if let Some(entry) = entry {
                l.book.streams.insert(stream.name.clone(), entry);
            }
        }
    }
    Ok(locked)
}

/// Every stream's ledger as opened on `locked` (None for a stream without a budget).
/// Conflicts are judged against the ledgers as they were before this run.
fn open_ledgers(
    config: &Config,
    fingerprints: &[String],
    locked: &LockedLedger,
    reset: &[String],
) -> Result<Vec<Option<LedgerEntry>>, Error> {
    let origin = locked.path().display().to_string();
    config
        .streams
        .iter()
        .zip(fingerprints)
        .map(|(stream, fingerprint)| {
            open_ledger(&locked.book.streams, stream, fingerprint, reset, &origin)
        })
        .collect()
}

/// Fails a bounded job whose input leaves nothing to test: every report rejected (or no
/// report at all), or a two-sample test whose `a` or `b` value never occurs in its `by`
/// column. Checked after the fold and before any test runs, so that no curator budget is
/// spent; otherwise such input would give empty or inconclusive records and exit 0, and a
/// typo in a sample label or a producer writing the wrong width would go unnoticed.
fn check_testable(stream: &StreamConfig, sketches: &PanedDelta) -> Result<(), Error> {
    let all = || {
        sketches
            .untimed
            .iter()
            .chain(sketches.panes.values().flatten())
    };
    let valid: u64 = all().map(|(_, s)| s.n()).sum();
    if valid == 0 {
        let mut rejected = Rejections::default();
        for (_, s) in all() {
            rejected.merge(s.rejected());
        }
        let reasons: Vec<String> = rejected
            .to_map()
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| format!("{r}: {n}"))
            .collect();
        let message =
            if reasons.is_empty() && sketches.late == 0 {
                "the input has no reports".to_string()
            } else {
                format!(
                "no report of the input is valid (rejected: {}; without event time or late: {})",
                if reasons.is_empty() { "none".to_string() } else { reasons.join(", ") },
                sketches.late
            )
            };
        return Err(Error::NothingToTest {
            stream: stream.name.clone(),
            message,
        });
    }
    let fold_columns = fold_columns(stream);
    for test in &stream.tests {
        let TestSpec::TwoSample { by, a, b } = &test.spec else {
            continue;
        };
        let Some(i) = fold_columns.iter().position(|c| c == by) else {
            continue;
        };
        let has = |label: &String| {
            all().any(|(key, s)| s.n() > 0 && key.get(i).is_some_and(|v| v.as_ref() == Some(label)))
        };
        for (side, label) in [("a", a), ("b", b)] {
            if !has(label) {
                return Err(Error::NothingToTest {
                    stream: stream.name.clone(),
                    message: format!(
                        "test {:?}: sample {side} = {label:?} has no valid report in column {by:?}",
                        test.name
                    ),
                });
            }
        }
    }
    Ok(())
}
