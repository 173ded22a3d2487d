//! The rayon pool the package's jobs run on: one per process.
//!
//! A child of `os.fork()` (multiprocessing's default start method on Linux, PySpark's
//! worker daemon) inherits its parent's rayon pool without the pool's threads, so work
//! sent to rayon's global pool in the child waits forever (the per-thread fold's
//! broadcast did, in the fork tests). The pool here remembers the process that built it,
//! and a forked child builds its own on its first job.

use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::PyErr;
use rayon::{ThreadPool, ThreadPoolBuilder};

use crate::errors::{contained, internal_error};

/// The pool and the id of the process whose threads it has.
type Owned = Option<(u32, Arc<ThreadPool>)>;

static POOL: Mutex<Owned> = Mutex::new(None);

/// Runs `f` on this process's pool, where every rayon call inside it (the per-thread
/// fold, the row digest, the groups' evaluation) finds live threads.
fn in_process_pool<T: Send>(f: impl FnOnce() -> T + Send) -> Result<T, PyErr> {
    Ok(process_pool()?.install(f))
}

fn process_pool() -> Result<Arc<ThreadPool>, PyErr> {
    let pid = std::process::id();
    // A fork while another thread held the lock leaves it held in the child for good:
    // the child then builds a pool of its own for this call rather than wait on it.
    let Some(mut slot) = lock_briefly() else {
        return build().map(Arc::new);
    };
    if let Some((owner, pool)) = slot.as_ref() {
        if *owner == pid {
            return Ok(pool.clone());
        }
        // The parent's pool: its threads are not in this process. Dropping it would
        // signal threads that do not exist, so it is leaked (one per fork, a few bytes).
        if let Some((_, stale)) = slot.take() {
            std::mem::forget(stale);
        }
    }
    let pool = Arc::new(build()?);
    *slot = Some((pid, pool.clone()));
    Ok(pool)
}

/// The lock, if no other thread of this process holds it for more than about a second.
fn lock_briefly() -> Option<MutexGuard<'static, Owned>> {
    for _ in 0..1000 {
        match POOL.try_lock() {
            Ok(slot) => return Some(slot),
            Err(std::sync::TryLockError::Poisoned(p)) => return Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => {
                std::thread::sleep(std::time::Duration::from_millis(1))
            }
        }
    }
    None
}

fn build() -> Result<ThreadPool, PyErr> {
    ThreadPoolBuilder::new()
        .thread_name(|i| format!("ldpstream-{i}"))
        .build()
        .map_err(|e| internal_error(format!("ldpstream cannot start its worker threads: {e}")))
}

/// [`contained`] on this process's pool: the jobs' entry points (fold, evaluate, merge).
pub fn contained_in_pool<T: Send>(
    what: &str,
    f: impl FnOnce() -> Result<T, PyErr> + Send,
) -> Result<T, PyErr> {
    in_process_pool(|| contained(what, f))?
}
