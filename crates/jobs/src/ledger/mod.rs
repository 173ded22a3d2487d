//! The privacy ledger: one file per deployment that every budgeted release spends from
//! (ARCHITECTURE.md invariant 10).
//!
//! - [`file`]: the file's format (version 3, SHA-256 checksum) and a stream's book in it;
//! - [`rules`]: a stream's input identity and when a kept ledger is carried on, refused or
//!   reset;
//! - [`store`]: where the file lives and the `flock` held from the re-read to the save of
//!   every spend;
//! - [`release`]: the one order that keeps a budget honest (spend saved before any record
//!   that used it leaves the process);
//! - [`import`]: ledgers that older `serve` checkpoints carried, moved into the file.
//!
//! The composition rule itself (which releases overlap, what a release costs) is the
//! engine's `curator::ledger`; this module is its durable home.

pub mod file;
pub mod import;
pub mod release;
pub mod rules;
pub mod store;
