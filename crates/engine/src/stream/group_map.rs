//! How the groups of one (test, window) are evaluated. The engine spawns no threads, so
//! it evaluates them one after another unless its caller hands it a [`GroupMap`] that
//! runs them on the caller's thread pool (the jobs do, with rayon). At 10⁵ groups the
//! per-group tests and estimates, not the fold, bound a grouped `batch`.

use super::error::StreamError;
use crate::record::TestRecord;

/// One group's record, by the group's index in the window's key order.
pub type GroupTask<'a> = dyn Fn(usize) -> Result<TestRecord, StreamError> + Sync + 'a;

/// Runs `task(0..len)` and returns the records in index order. An implementation may run
/// the tasks in any order and on any threads, but must return exactly what running them
/// in order would: the records in index order, or the error of the lowest failing index.
/// Each task is a pure function of its index (every Monte Carlo seed is keyed by the
/// group), so the records' bytes do not depend on the implementation.
pub trait GroupMap: Sync {
    fn map(&self, len: usize, task: &GroupTask<'_>) -> Result<Vec<TestRecord>, StreamError>;
}

/// One group after another, on the calling thread.
pub struct Sequential;

impl GroupMap for Sequential {
    fn map(&self, len: usize, task: &GroupTask<'_>) -> Result<Vec<TestRecord>, StreamError> {
        (0..len).map(task).collect()
    }
}
