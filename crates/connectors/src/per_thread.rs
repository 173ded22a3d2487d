//! A parallel fold with one accumulator per thread of the current rayon pool, each taking
//! the next work item as it finishes one. A rayon `try_fold` keeps one accumulator per
//! split of the work, and the finished ones wait for their siblings to be merged: for a
//! grouped fold of 10⁵ groups each held a full (group × cell) table, eight of them at once
//! over ten row groups. Here there are never more accumulators than threads.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Folds `items` on the current rayon pool: every thread starts from `init()` and folds
/// the items it takes with `fold`, and the threads' results are combined with `merge`,
/// which must be exact and order-free (which thread took which item is not fixed). The
/// first error stops the threads from taking more items and is returned.
pub fn fold_per_thread<I: Sync, T: Send, E: Send>(
    items: &[I],
    init: impl Fn() -> T + Sync,
    fold: impl Fn(&mut T, &I) -> Result<(), E> + Sync,
    merge: impl Fn(T, T) -> Result<T, E>,
) -> Result<T, E> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results = rayon::broadcast(|_| {
        let mut acc = init();
        while !failed.load(Ordering::Relaxed) {
            let Some(item) = items.get(next.fetch_add(1, Ordering::Relaxed)) else {
                break;
            };
            if let Err(e) = fold(&mut acc, item) {
                failed.store(true, Ordering::Relaxed);
                return Err(e);
            }
        }
        Ok(acc)
    });
    let mut out: Option<T> = None;
    for result in results {
        let acc = result?;
        out = Some(match out {
            None => acc,
            Some(so_far) => merge(so_far, acc)?,
        });
    }
    Ok(out.unwrap_or_else(init))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_is_folded_once_on_any_pool() {
        for threads in [1, 2, 5] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let items: Vec<u64> = (1..=1000).collect();
            let sum = pool
                .install(|| {
                    fold_per_thread(
                        &items,
                        Vec::new,
                        |acc: &mut Vec<u64>, &x| {
                            acc.push(x);
                            Ok::<_, ()>(())
                        },
                        |mut a, b| {
                            a.extend(b);
                            Ok(a)
                        },
                    )
                })
                .unwrap();
            let mut seen = sum.clone();
            seen.sort_unstable();
            assert_eq!(seen, items, "{threads} threads");
        }
    }

    #[test]
    fn an_error_is_returned() {
        let items: Vec<u32> = (0..100).collect();
        let result = fold_per_thread(
            &items,
            || 0u32,
            |acc, &x| {
                if x == 37 {
                    Err(x)
                } else {
                    *acc += x;
                    Ok(())
                }
            },
            |a, b| Ok(a + b),
        );
        assert_eq!(result, Err(37));
    }
}
