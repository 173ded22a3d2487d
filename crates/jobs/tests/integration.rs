//! The jobs crate against whole inputs: the in-memory fold however its table is chunked.
//! One test binary, one module per area.

mod memory_fold_slices;
