//! A window's groups evaluated on rayon's pool: at 10⁵ groups the per-group tests and
//! estimates, not the fold, bound a grouped job, and the engine spawns no threads of its
//! own. `batch --threads N` sizes the same pool.

use ldpstream_engine::record::TestRecord;
use ldpstream_engine::stream::{GroupMap, GroupTask, StreamError};
use rayon::prelude::*;

/// Evaluates the groups in parallel and returns exactly what evaluating them in order
/// would: the records in key order, or the first group's error in key order (not the
/// first to fail in time), so the output and its error message do not depend on timing.
pub struct RayonGroups;

impl GroupMap for RayonGroups {
    fn map(&self, len: usize, task: &GroupTask<'_>) -> Result<Vec<TestRecord>, StreamError> {
        let results: Vec<Result<TestRecord, StreamError>> =
            (0..len).into_par_iter().map(task).collect();
        results.into_iter().collect()
    }
}
