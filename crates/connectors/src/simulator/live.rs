//! The built-in simulator source: privatizes true categories drawn from a configured
//! distribution with the real client-side randomizer ([`privatize_batch`]) at a configured
//! rate, stamping each report with wall-clock event time. It can switch distribution after
//! a configured run time, which is what makes a dashboard show a rejection appear.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arrow_array::RecordBatch;
use arrow_array::{ArrayRef, StringArray, TimestampMillisecondArray};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use ldpstream_config::{SimulatorConfig, StreamConfig};
use ldpstream_engine::mechanism::{privatize_batch, Mechanism};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::Distribution;

use crate::emit::SourceBatch;
use crate::error::ConnectorError;
use crate::position::Position;

/// The Arrow schema the simulator writes for a stream, under the stream's column names.
fn schema(stream: &StreamConfig, columns: &[ArrayRef], grouped: bool) -> Arc<Schema> {
    let names: Vec<&str> = match columns.len() {
        2 => {
            let index = match stream.mechanism {
                ldpstream_config::MechanismConfig::Hadamard { .. } => &stream.columns.row,
                ldpstream_config::MechanismConfig::Olh { .. } => &stream.columns.seed,
                _ => &stream.columns.cohort,
            };
            vec![index.as_str(), stream.columns.report.as_str()]
        }
        _ => vec![stream.columns.report.as_str()],
    };
    let mut fields: Vec<Field> = names
        .iter()
        .zip(columns)
        .map(|(n, c)| Field::new(*n, c.data_type().clone(), false))
        .collect();
    if grouped {
        let name = stream
            .columns
            .group_by
            .first()
            .map_or("group", String::as_str);
        fields.push(Field::new(name, DataType::Utf8, false));
    }
    fields.push(Field::new(
        &stream.columns.ts,
        DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
        false,
    ));
    Arc::new(Schema::new(fields))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Generates batches until `stop` is set or the receiver hangs up. `started` is the
/// service's start: `switch_at` counts from it.
pub fn run_simulator(
    stream: &StreamConfig,
    sim: &SimulatorConfig,
    mechanism: &Mechanism,
    started: Instant,
    resume: &Position,
    stop: &AtomicBool,
    out: &SyncSender<SourceBatch>,
) -> Result<(), ConnectorError> {
    let before_restart = match resume {
        Position::Simulator { generated } => *generated,
        _ => 0,
    };
    let d = mechanism.domain();
    let sampler = |p: &ldpstream_config::NullSpec| {
        super::sampler(p.probabilities(d), "simulator distribution")
    };
    let before = sampler(&sim.p)?;
    let after = sim.switch_p.as_ref().map(&sampler).transpose()?;
    let switch_at = sim.switch_at.map(|s| s.as_std());
    // A restarted simulator must not repeat the reports it generated before.
    let mut rng =
        StdRng::seed_from_u64(sim.seed ^ before_restart.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let grouped = !sim.groups.is_empty() && !stream.columns.group_by.is_empty();
    let max_rows = stream.max_batch_rows;
    let delay = stream.max_batch_delay.as_std();
    let mut generated: u64 = 0;
    let mut last_ms = now_ms();
    let mut switched = false;
    while !stop.load(Ordering::Relaxed) {
        // Sleep until a full batch is due or the batch delay has passed, whichever is first.
        let full_after = Duration::from_secs_f64(max_rows as f64 / sim.rate);
        std::thread::sleep(delay.min(full_after).max(Duration::from_millis(1)));
        let elapsed = started.elapsed();
        let due = (elapsed.as_secs_f64() * sim.rate) as u64;
        let rows = due.saturating_sub(generated).min(max_rows as u64) as usize;
        if rows == 0 {
            continue;
        }
        let now = now_ms();
        let law = match (&after, switch_at) {
            (Some(a), Some(at)) if elapsed >= at => {
                if !switched {
                    tracing::info!(stream = %stream.name, "simulator switched distribution");
                    switched = true;
                }
                a
            }
            _ => &before,
        };
        let truth: Vec<u32> = (0..rows).map(|_| law.sample(&mut rng) as u32).collect();
        let mut columns = privatize_batch(mechanism, &truth, &mut rng)?;
        if grouped {
            let labels: Vec<&str> = (0..rows)
                .map(|i| sim.groups[(generated as usize + i) % sim.groups.len()].as_str())
                .collect();
            columns.push(Arc::new(StringArray::from(labels)));
        }
        // Event times spread evenly over the interval since the previous batch.
        let span = (now - last_ms).max(0);
        let ts: Vec<i64> = (0..rows as i64)
            .map(|i| last_ms + (i + 1) * span / rows as i64)
            .collect();
        last_ms = now;
        let schema = schema(
            stream,
            &columns[..columns.len() - usize::from(grouped)],
            grouped,
        );
        columns.push(Arc::new(
            TimestampMillisecondArray::from(ts).with_timezone("UTC"),
        ));
        let batch =
            RecordBatch::try_new(schema, columns).map_err(|source| ConnectorError::Arrow {
                path: format!("simulator of stream {}", stream.name),
                source,
            })?;
        generated += rows as u64;
        let position = Position::Simulator {
            generated: before_restart + generated,
        };
        if out.send(SourceBatch { batch, position }).is_err() {
            break;
        }
    }
    Ok(())
}
