//! End-to-end tests of the `ldpstream` binary (batch, plan and bad input): real processes,
//! real Parquet files. One test binary, one module per feature; helpers in tests/common/cli.rs.

mod bad_input;
mod batch;
mod ledger;
mod ledger_bypass;
mod plan;
