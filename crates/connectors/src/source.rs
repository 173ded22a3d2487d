//! One interface over every source: a [`Source`] is opened from its stream's config and a
//! resume [`Position`], then run on its own thread, sending decoded Arrow batches (each
//! with the position just after it) until it is stopped or its input ends.

use std::sync::atomic::AtomicBool;
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::Instant;

#[cfg(feature = "kafka")]
use ldpstream_config::KafkaConfig;
use ldpstream_config::{SimulatorConfig, SourceConfig, StreamConfig};
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::stream::ReportLayout;

use crate::emit::{SourceBatch, SourceEvents};
use crate::error::ConnectorError;
#[cfg(feature = "parquet")]
use crate::inputs::resolve_inputs;
#[cfg(feature = "parquet")]
use crate::parquet::files::{inspect, InputFile};
use crate::position::Position;

/// How a source's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceEnd {
    /// Its input is exhausted: every window of the stream may close.
    Exhausted,
    /// It was stopped, or the receiver hung up.
    Stopped,
}

/// A stream's source, ready to run.
pub enum Source {
    Simulator {
        stream: StreamConfig,
        config: SimulatorConfig,
        mechanism: Mechanism,
        started: Instant,
        resume: Position,
    },
    #[cfg(feature = "parquet")]
    Replay {
        files: Vec<InputFile>,
        layout: ReportLayout,
        max_batch_rows: usize,
        rate: Option<f64>,
        resume: Position,
    },
    #[cfg(feature = "kafka")]
    Kafka {
        stream: StreamConfig,
        config: KafkaConfig,
        mechanism: Mechanism,
        resume: Position,
        events: Arc<dyn SourceEvents>,
    },
}

impl Source {
    /// Opens the source of `stream`. Parquet files are listed and their schemas checked
    /// now, so a bad file fails the start, not the run. `started` is when the service
    /// started (the simulator's `switch_at` counts from it).
    pub fn open(
        stream: &StreamConfig,
        layout: &ReportLayout,
        resume: Position,
        started: Instant,
        events: Arc<dyn SourceEvents>,
    ) -> Result<Source, ConnectorError> {
        // Only the Kafka source reports events (lag, bad messages, connection).
        #[cfg(not(feature = "kafka"))]
        let _ = events;
        Ok(match &stream.source {
            SourceConfig::Simulator(sim) => Source::Simulator {
                stream: stream.clone(),
                config: sim.clone(),
                mechanism: layout.mechanism.clone(),
                started,
                resume,
            },
            #[cfg(feature = "parquet")]
            SourceConfig::Parquet { paths, rate } => Source::Replay {
                files: inspect(&resolve_inputs(paths)?, layout)?,
                layout: layout.clone(),
                max_batch_rows: stream.max_batch_rows,
                rate: *rate,
                resume,
            },
            #[cfg(not(feature = "parquet"))]
            SourceConfig::Parquet { .. } => {
                return Err(ConnectorError::NotBuilt {
                    what: format!("stream {:?}'s Parquet source", stream.name),
                    feature: "parquet",
                })
            }
            #[cfg(feature = "kafka")]
            SourceConfig::Kafka(kafka) => Source::Kafka {
                stream: stream.clone(),
                config: kafka.clone(),
                mechanism: layout.mechanism.clone(),
                resume,
                events,
            },
            #[cfg(not(feature = "kafka"))]
            SourceConfig::Kafka(_) => {
                return Err(ConnectorError::NotBuilt {
                    what: format!("stream {:?}'s Kafka source", stream.name),
                    feature: "kafka",
                })
            }
        })
    }

    /// Whether the source's input ends: Parquet, and Kafka with end markers.
    pub fn is_bounded(source: &SourceConfig) -> bool {
        match source {
            SourceConfig::Parquet { .. } => true,
            SourceConfig::Kafka(k) => k.end_marker,
            SourceConfig::Simulator(_) => false,
        }
    }

    /// Sends batches to `out` until `stop` is set, the receiver hangs up, or the input
    /// ends.
    pub fn run(
        self,
        stop: &AtomicBool,
        out: &SyncSender<SourceBatch>,
    ) -> Result<SourceEnd, ConnectorError> {
        match self {
            Source::Simulator {
                stream,
                config,
                mechanism,
                started,
                resume,
            } => {
                crate::simulator::live::run_simulator(
                    &stream, &config, &mechanism, started, &resume, stop, out,
                )?;
                Ok(SourceEnd::Stopped)
            }
            #[cfg(feature = "parquet")]
            Source::Replay {
                files,
                layout,
                max_batch_rows,
                rate,
                resume,
            } => {
                let rows = crate::parquet::replay::run_replay(
                    &files,
                    &layout,
                    max_batch_rows,
                    rate,
                    &resume,
                    stop,
                    out,
                )?;
                // The row count of a private (curator-model) stream is not to be logged.
                tracing::debug!(rows, "replay sent every row");
                Ok(SourceEnd::Exhausted)
            }
            #[cfg(feature = "kafka")]
            Source::Kafka {
                stream,
                config,
                mechanism,
                resume,
                events,
            } => {
                let ended = crate::kafka::source::run_kafka(
                    &stream, &config, &mechanism, &resume, events, stop, out,
                )?;
                if ended {
                    tracing::info!(stream = %stream.name, "every partition sent its end marker");
                    Ok(SourceEnd::Exhausted)
                } else {
                    Ok(SourceEnd::Stopped)
                }
            }
        }
    }
}
