//! Moving the privacy ledgers an older `serve` kept in its state directory (in every
//! checkpoint, and in the journal `ledgers.json`) into the deployment's ledger file.
//!
//! The state directory is recoverable state that an operator may move aside to start
//! fresh; a ledger there went with it, and gave the budget back. Its spends are added to
//! the ledger file once (the book records the directory as imported, so a restart, or the
//! previous checkpoint that still carries them, cannot add them again), and the journal is
//! removed after the ledger file is saved. Spends are never dropped: a stream the ledger
//! file already has keeps its spends and gains the imported ones.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tracing::{info, warn};

use crate::error::Error;
use crate::ledger::file::{LedgerBook, LedgerEntry};
use crate::ledger::rules::canonical;
use crate::state_codec::StreamCheckpoint;

/// The journal of older versions, written before every private release.
pub const OLD_JOURNAL: &str = "ledgers.json";

/// The ledgers a state directory holds, not yet imported.
pub struct OldLedgers {
    /// The directory's name in the book's `imported`.
    key: String,
    journal: PathBuf,
    pub streams: BTreeMap<String, LedgerEntry>,
}

/// What `dir` holds: the checkpoint's ledgers and the journal's, the newer of the two per
/// stream (the journal is written before every release, the checkpoint only every
/// checkpoint_interval, and both grow by appending spends, so the longer is the newer).
pub fn read_old(
    dir: &Path,
    checkpointed: &BTreeMap<String, StreamCheckpoint>,
) -> Result<OldLedgers, Error> {
    let journal = dir.join(OLD_JOURNAL);
    let mut streams: BTreeMap<String, LedgerEntry> = checkpointed
        .iter()
        .filter_map(|(name, ck)| Some((name.clone(), ck.ledger.clone()?)))
        .collect();
    for (name, entry) in LedgerBook::load(&journal)?.streams {
        let newer = streams
            .get(&name)
            .is_none_or(|k| k.ledger.spends.len() < entry.ledger.spends.len());
        if newer {
            streams.insert(name, entry);
        }
    }
    Ok(OldLedgers {
        key: format!("serve state {}", canonical(dir)),
        journal,
        streams,
    })
}

impl OldLedgers {
    /// Whether there is anything `book` has not imported yet.
    pub fn pending(&self, book: &LedgerBook) -> bool {
        !self.streams.is_empty() && !book.imported.contains(&self.key)
    }

    /// The names of the streams, for messages.
    pub fn names(&self) -> String {
        let names: Vec<String> = self.streams.keys().map(|n| format!("{n:?}")).collect();
        names.join(", ")
    }

    /// Adds the ledgers to `book` (unless it has them already). Returns whether it did.
    pub fn add_to(&self, book: &mut LedgerBook, ledger_path: &Path) -> bool {
        if !self.pending(book) {
            return false;
        }
        for (name, old) in &self.streams {
            match book.streams.get_mut(name) {
                None => {
                    book.streams.insert(name.clone(), old.clone());
                }
                Some(kept) => {
                    if kept.ledger.budget != old.ledger.budget {
                        warn!(stream = %name, kept_budget = kept.ledger.budget, imported_budget = old.ledger.budget, "the imported ledger had another budget; the ledger file's is kept");
                    }
                    kept.ledger.spends.extend(old.ledger.spends.iter().cloned());
                    for input in &old.inputs {
                        if !kept.inputs.contains(input) {
                            kept.inputs.push(input.clone());
                        }
                    }
                }
            }
            info!(
                stream = %name,
                spends = old.ledger.spends.len(),
                from = %self.key,
                ledger = %ledger_path.display(),
                "privacy ledger moved out of the state directory into the ledger file"
            );
        }
        book.imported.insert(self.key.clone());
        true
    }

    /// Removes the journal, once the ledger file that holds its spends is saved.
    pub fn remove_journal(&self) {
        match std::fs::remove_file(&self.journal) {
            Ok(()) => {
                info!(journal = %self.journal.display(), "removed the old ledger journal from the state directory")
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                warn!(journal = %self.journal.display(), error = %e, "could not remove the old ledger journal (its spends are in the ledger file, which will not import it again)")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use ldpstream_engine::curator::ledger::PrivacyLedger;

    use super::*;

    fn entry(spends: &[f64]) -> LedgerEntry {
        let mut ledger = PrivacyLedger::new(1.0);
        for (i, e) in spends.iter().enumerate() {
            ledger.try_spend(None, None, *e, &format!("s/{i}")).unwrap();
        }
        LedgerEntry {
            ledger,
            inputs: vec!["in".into()],
        }
    }

    /// The journal's longer ledger wins over the checkpoint's; importing adds its spends
    /// to the ledger file's own once, and a second import adds nothing.
    #[test]
    fn imports_once_and_keeps_every_spend() {
        let dir = tempfile::tempdir().unwrap();
        let mut journal = LedgerBook::empty();
        journal.streams.insert("r".into(), entry(&[0.25, 0.25]));
        journal.save(&dir.path().join(OLD_JOURNAL)).unwrap();
        let old = read_old(dir.path(), &BTreeMap::new()).unwrap();
        let mut book = LedgerBook::empty();
        book.streams.insert("r".into(), entry(&[0.25]));
        assert!(old.pending(&book));
        assert!(old.add_to(&mut book, Path::new("/l.json")));
        assert_eq!(book.streams["r"].ledger.spends.len(), 3);
        assert!(!old.add_to(&mut book, Path::new("/l.json")));
        assert_eq!(book.streams["r"].ledger.spends.len(), 3);
        old.remove_journal();
        assert!(!dir.path().join(OLD_JOURNAL).exists());
    }
}
