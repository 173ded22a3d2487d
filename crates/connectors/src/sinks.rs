//! The configured result sinks of `serve`, opened once: JSON lines files (appended,
//! flushed after every tick), stdout, a Kafka topic and rolling Parquet files.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};

use ldpstream_config::SinkConfig;
use ldpstream_engine::record::TestRecord;

use crate::error::ConnectorError;
#[cfg(feature = "kafka")]
use crate::kafka::KafkaSink;
#[cfg(feature = "parquet")]
use crate::parquet::ParquetSink;

enum Sink {
    Jsonl {
        path: String,
        out: BufWriter<File>,
    },
    Stdout,
    #[cfg(feature = "kafka")]
    Kafka(Box<KafkaSink>),
    #[cfg(feature = "parquet")]
    Parquet(Box<ParquetSink>),
}

/// The configured sinks, opened once at start.
pub struct Sinks {
    sinks: Vec<Sink>,
}

impl Sinks {
    pub fn open(configs: &[SinkConfig]) -> Result<Self, ConnectorError> {
        let mut sinks = Vec::new();
        for config in configs {
            sinks.push(match config {
                SinkConfig::Stdout => Sink::Stdout,
                #[cfg(feature = "kafka")]
                SinkConfig::Kafka {
                    brokers,
                    topic,
                    options,
                    options_from_env,
                } => Sink::Kafka(Box::new(KafkaSink::open(
                    brokers,
                    topic,
                    options,
                    options_from_env,
                )?)),
                #[cfg(not(feature = "kafka"))]
                SinkConfig::Kafka { topic, .. } => {
                    return Err(ConnectorError::NotBuilt {
                        what: format!("the Kafka sink to topic {topic:?}"),
                        feature: "kafka",
                    })
                }
                #[cfg(feature = "parquet")]
                SinkConfig::Parquet { dir, roll_interval } => {
                    Sink::Parquet(Box::new(ParquetSink::open(dir, roll_interval.as_std())?))
                }
                #[cfg(not(feature = "parquet"))]
                SinkConfig::Parquet { dir, .. } => {
                    return Err(ConnectorError::NotBuilt {
                        what: format!("the Parquet sink to {dir:?}"),
                        feature: "parquet",
                    })
                }
                SinkConfig::Jsonl { path } => {
                    let io = |source| ConnectorError::Io {
                        path: path.clone(),
                        source,
                    };
                    if let Some(dir) = std::path::Path::new(path).parent() {
                        if !dir.as_os_str().is_empty() {
                            std::fs::create_dir_all(dir).map_err(io)?;
                        }
                    }
                    let file = OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(path)
                        .map_err(io)?;
                    Sink::Jsonl {
                        path: path.clone(),
                        out: BufWriter::new(file),
                    }
                }
            });
        }
        if sinks.is_empty() {
            sinks.push(Sink::Stdout);
        }
        Ok(Sinks { sinks })
    }

    /// Writes `records` to every sink and flushes, so a reader sees whole ticks.
    pub fn write(&mut self, records: &[TestRecord]) -> Result<(), ConnectorError> {
        if records.is_empty() {
            return Ok(());
        }
        let mut text = Vec::new();
        for r in records {
            serde_json::to_writer(&mut text, r).map_err(ConnectorError::Serialize)?;
            text.push(b'\n');
        }
        for sink in &mut self.sinks {
            match sink {
                Sink::Stdout => {
                    let mut out = std::io::stdout().lock();
                    out.write_all(&text)
                        .and_then(|()| out.flush())
                        .map_err(|source| ConnectorError::Io {
                            path: "stdout".into(),
                            source,
                        })?;
                }
                Sink::Jsonl { path, out } => {
                    out.write_all(&text)
                        .and_then(|()| out.flush())
                        .map_err(|source| ConnectorError::Io {
                            path: path.clone(),
                            source,
                        })?;
                }
                #[cfg(feature = "kafka")]
                Sink::Kafka(k) => k.write(records)?,
                #[cfg(feature = "parquet")]
                Sink::Parquet(p) => p.write(records)?,
            }
        }
        Ok(())
    }

    /// On shutdown: completes what a sink holds open (the current Parquet file).
    pub fn close(&mut self) -> Result<(), ConnectorError> {
        #[cfg(feature = "parquet")]
        for sink in &mut self.sinks {
            if let Sink::Parquet(p) = sink {
                p.close()?;
            }
        }
        Ok(())
    }
}
