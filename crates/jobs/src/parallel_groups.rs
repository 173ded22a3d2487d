//! A window's groups evaluated on rayon's pool: at 10⁵ groups the per-group tests and
//! estimates, not the fold, bound a grouped job, and the engine spawns no threads of its
//! own. `batch --threads N` sizes the same pool; `serve` evaluates on rayon's global pool.

use ldpstream_engine::stream::{GroupEmit, GroupMap, GroupTask, StreamError};
use rayon::prelude::*;

/// Groups evaluated at once: the records of one chunk are held until they are handed on
/// in key order, so a window of 10⁵ groups never holds all its records (a sink may write
/// each one out), while each chunk still keeps every thread of the pool busy.
const CHUNK: usize = 2048;

/// Evaluates the groups in parallel and hands on exactly what evaluating them in order
/// would: the records in key order, up to the first group's error in key order (not the
/// first to fail in time), so the output and its error message do not depend on timing.
pub struct RayonGroups;

impl GroupMap for RayonGroups {
    fn map(
        &self,
        len: usize,
        task: &GroupTask<'_>,
        emit: &mut GroupEmit<'_>,
    ) -> Result<(), StreamError> {
        for start in (0..len).step_by(CHUNK) {
            let end = len.min(start + CHUNK);
            let results: Vec<_> = (start..end).into_par_iter().map(task).collect();
            for record in results {
                emit(record?)?;
            }
        }
        Ok(())
    }
}
