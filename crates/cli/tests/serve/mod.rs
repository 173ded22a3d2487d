//! `ldpstream serve` as a real child process: the simulator source, the HTTP endpoint and
//! its Prometheus metrics, SIGTERM handling, and the Parquet replay source checked against
//! `batch` over the same file. One test binary, one module per feature; helpers in
//! tests/common/serve.rs.

mod metrics;
mod privacy;
mod replay;
mod state;
