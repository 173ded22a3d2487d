//! `serve`'s scale-out mode for a Kafka stream (`source.scale_out`): any number of
//! instances share the stream, its state lives in Kafka, and each window's final record
//! is written once to `results_topic`. The design, and why it is shaped so, is in
//! docs/design/scale-out.md; stage 1 is [`fold`], stage 2 is [`merge`].

mod fold_stage;
mod merge_stage;
mod stream;
mod topic_values;
mod view;

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use ldpstream_config::{KafkaConfig, ScaleOutConfig, StreamConfig};
use ldpstream_connectors::kafka::transactions::{ensure_compacted_topics, partition_count};
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::stream::{stream_pane_width, ReportLayout};
use stream::ScaleOutStream;
use tracing::info;

use super::events::StreamEvents;
use super::shared::Shared;
use super::WorkerEvent;
use crate::error::Error;

/// Creates the state topics if needed and starts the stream's two stages.
pub(super) fn spawn(
    config: &StreamConfig,
    kafka: &KafkaConfig,
    scale_out: &ScaleOutConfig,
    stop: Arc<AtomicBool>,
    shared: Arc<Shared>,
    snapshot_interval: Duration,
    events: impl Fn(WorkerEvent) + Clone + Send + 'static,
) -> Result<Vec<std::thread::JoinHandle<()>>, Error> {
    let mechanism = Mechanism::from_config(&config.mechanism)?;
    // OLH's pool factor, once, before the first snapshot round needs it.
    if let Err(why) = mechanism.prepare() {
        tracing::warn!(stream = %config.name, "{why}");
    }
    let layout = ReportLayout::of(config, &mechanism);
    let topic = kafka.topics.first().cloned().unwrap_or_default();
    let input_partitions = partition_count(kafka, &topic, Duration::from_secs(30))?;
    // A transaction to a missing topic would fail at every round; say so at start.
    partition_count(kafka, &scale_out.results_topic, Duration::from_secs(5))?;
    let (changelog, partials) = ldpstream_config::scale_out_state_topics(&kafka.group_id);
    ensure_compacted_topics(
        kafka,
        &[(changelog.clone(), input_partitions), (partials.clone(), 1)],
    )?;
    info!(
        stream = %config.name,
        topic = %topic,
        input_partitions,
        changelog = %changelog,
        partials = %partials,
        results = %scale_out.results_topic,
        "scale-out: the state lives in Kafka"
    );
    let s = Arc::new(ScaleOutStream {
        config: config.clone(),
        kafka: kafka.clone(),
        scale_out: scale_out.clone(),
        width: stream_pane_width(config),
        lateness: config.allowed_lateness.millis() as i64,
        mechanism,
        layout,
        app: kafka.group_id.clone(),
        topic,
        input_partitions,
        changelog,
        partials,
    });
    let name = config.name.clone();
    let thread_err = |source| Error::Thread {
        what: format!("thread for stream {name}"),
        source,
    };
    let observer = Arc::new(StreamEvents::new(&name, shared.clone()));
    let fold = {
        let (s, stop, events, metrics) = (
            s.clone(),
            stop.clone(),
            events.clone(),
            shared.metrics.clone(),
        );
        std::thread::Builder::new()
            .name(format!("fold-{name}"))
            .spawn(move || {
                if let Err(e) = fold_stage::run(s.clone(), stop, metrics, observer) {
                    events(WorkerEvent::Failed(s.config.name.clone(), e));
                }
            })
            .map_err(thread_err)?
    };
    let merge = std::thread::Builder::new()
        .name(format!("merge-{name}"))
        .spawn(move || {
            let name = s.config.name.clone();
            let ended = events.clone();
            let end = move || ended(WorkerEvent::Ended(name.clone()));
            if let Err(e) = merge_stage::run(s.clone(), stop, shared, snapshot_interval, end) {
                events(WorkerEvent::Failed(s.config.name.clone(), e));
            }
        })
        .map_err(thread_err)?;
    Ok(vec![fold, merge])
}
