//! Kafka: client settings, consumer-group membership with its one rebalance dispatch
//! ([`group`]), the standard source ([`source`]), the partition-aware source the
//! scale-out fold reads ([`partitioned`]), the plain group consumer the scale-out merge
//! reads ([`consumer`]), transactions and state topics ([`transactions`]), the
//! committed offsets that tell committed transactions from aborted ones ([`committed`]), the
//! dead-letter producer and the result sink. The messages themselves are
//! [`crate::messages`].

mod block_on;
mod client;
pub mod committed;
pub mod consumer;
pub mod dead_letter;
pub mod group;
pub mod partitioned;
mod resume;
pub mod sink;
pub mod source;
pub mod transactions;

pub use consumer::{GroupConsumer, GroupMetadata, Isolation, Polled};
pub use group::{PartitionHandler, StartAt};
pub use partitioned::PartitionedSource;
pub use sink::{record_key, KafkaSink};
