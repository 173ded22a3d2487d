//! The standard Kafka source's [`PartitionHandler`]: each assigned partition starts at the
//! offset stored in the checkpoint (or at the beginning, for a partition no checkpoint has
//! seen: its reports are in no sketch yet), and a partition given up in a rebalance and
//! later assigned back continues where this instance had read it, so no report is read
//! twice.

use std::sync::{Arc, Mutex};

use tracing::error;

use super::group::{lock, PartitionHandler, StartAt};
use crate::emit::SourceEvents;
use crate::error::ConnectorError;
use crate::position::{KafkaPosition, TopicPartition};

pub(crate) struct ResumeFrom {
    stream: String,
    /// Next offset per partition: the checkpoint's, then how far this instance had read.
    resume: Mutex<KafkaPosition>,
    events: Arc<dyn SourceEvents>,
}

impl ResumeFrom {
    pub(crate) fn new(stream: &str, resume: &KafkaPosition, events: Arc<dyn SourceEvents>) -> Self {
        ResumeFrom {
            stream: stream.to_string(),
            resume: Mutex::new(resume.clone()),
            events,
        }
    }
}

impl PartitionHandler for ResumeFrom {
    fn assigned(&self, partitions: &[TopicPartition]) -> Vec<StartAt> {
        let resume = lock(&self.resume);
        partitions
            .iter()
            .map(|tp| {
                resume
                    .next
                    .get(tp)
                    .map_or(StartAt::Beginning, |&o| StartAt::Offset(o as i64))
            })
            .collect()
    }

    fn revoked(&self, partitions: &[TopicPartition], read: &KafkaPosition) {
        lock(&self.resume)
            .next
            .extend(read.next.iter().map(|(tp, o)| (tp.clone(), *o)));
        // Another instance reads these now; a frozen last value would mislead a dashboard.
        for (topic, p) in partitions {
            self.events.partition_revoked(topic, *p);
        }
    }

    fn assign_failed(&self, error: ConnectorError) {
        error!(stream = %self.stream, %error, "partition assignment failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Revoked(Mutex<Vec<TopicPartition>>);

    impl SourceEvents for Revoked {
        fn connected(&self) {}
        fn bad_message(&self, _reason: &'static str) {}
        fn dead_letters_failed(&self, _: u64) {}
        fn partition_lag(&self, _: &str, _: i32, _: i64) {}
        fn partition_revoked(&self, topic: &str, partition: i32) {
            lock(&self.0).push((topic.to_string(), partition));
        }
    }

    fn tp(p: i32) -> TopicPartition {
        ("in".to_string(), p)
    }

    /// A partition starts at the checkpoint's offset, or at the beginning when the
    /// checkpoint never saw it; one given up and assigned back continues where this
    /// instance had read it.
    #[test]
    fn partitions_start_at_the_checkpoint_then_where_they_were_left() {
        let mut checkpoint = KafkaPosition::default();
        checkpoint.next.insert(tp(0), 40);
        let events = Arc::new(Revoked::default());
        let handler = ResumeFrom::new("s", &checkpoint, events.clone());
        assert_eq!(
            handler.assigned(&[tp(0), tp(1)]),
            vec![StartAt::Offset(40), StartAt::Beginning]
        );
        let mut read = KafkaPosition::default();
        read.next.insert(tp(0), 55);
        read.next.insert(tp(1), 7);
        handler.revoked(&[tp(0), tp(1)], &read);
        assert_eq!(*lock(&events.0), vec![tp(0), tp(1)]);
        assert_eq!(
            handler.assigned(&[tp(1), tp(0)]),
            vec![StartAt::Offset(7), StartAt::Offset(55)]
        );
    }
}
