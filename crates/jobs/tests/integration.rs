//! The jobs crate against whole inputs: the in-memory fold however its table is chunked,
//! and a window's groups evaluated on rayon's pool. One test binary, one module per area.

mod memory_fold_slices;
mod parallel_groups;
