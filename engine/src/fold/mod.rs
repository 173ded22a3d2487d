//! Batch fold kernels: one call per Arrow array, a tight loop per kernel, no per-row
//! dispatch or allocation (ARCHITECTURE.md rule 2).

mod categories;

pub use categories::{count_categories, fold_categories, fold_categories_grouped};
