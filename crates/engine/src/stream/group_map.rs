//! How the groups of one (test, window) are evaluated. The engine spawns no threads, so
//! it evaluates them one after another unless its caller hands it a [`GroupMap`] that
//! runs them on the caller's thread pool (the jobs do, with rayon, and so does `serve`).
//! At 10⁵ groups the per-group tests and estimates, not the fold, bound a grouped `batch`.

use super::error::StreamError;
use crate::record::TestRecord;

/// One group's record, by the group's index in the window's key order.
pub type GroupTask<'a> = dyn Fn(usize) -> Result<TestRecord, StreamError> + Sync + 'a;

/// Where a map hands the records, in index order.
pub type GroupEmit<'a> = dyn FnMut(TestRecord) -> Result<(), StreamError> + 'a;

/// Runs `task(0..len)` and hands the records to `emit` in index order. An implementation
/// may run the tasks in any order and on any threads, but must hand on exactly what
/// running them in order would: the records in index order, stopping at the first error
/// in index order (a task's or `emit`'s), which it returns, and never one that a task
/// after it met first in time. Each task is a pure function of its index (every Monte
/// Carlo seed is keyed by the group), so the records' bytes do not depend on the
/// implementation. It should hold few records at a time: `emit` may write each one out.
pub trait GroupMap: Sync {
    fn map(
        &self,
        len: usize,
        task: &GroupTask<'_>,
        emit: &mut GroupEmit<'_>,
    ) -> Result<(), StreamError>;
}

/// One group after another, on the calling thread.
pub struct Sequential;

impl GroupMap for Sequential {
    fn map(
        &self,
        len: usize,
        task: &GroupTask<'_>,
        emit: &mut GroupEmit<'_>,
    ) -> Result<(), StreamError> {
        for i in 0..len {
            emit(task(i)?)?;
        }
        Ok(())
    }
}

/// Every record of a map, in index order: for callers that keep them all.
pub fn map_all(
    groups: &dyn GroupMap,
    len: usize,
    task: &GroupTask<'_>,
) -> Result<Vec<TestRecord>, StreamError> {
    let mut out = Vec::with_capacity(len);
    groups.map(len, task, &mut |r| {
        out.push(r);
        Ok(())
    })?;
    Ok(out)
}
