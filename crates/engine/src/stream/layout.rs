//! Which columns a stream's reports use: the same for every source (Parquet, Kafka, the
//! simulator), derived once from the stream's config.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_array::{ArrayRef, StringArray};
use arrow_schema::{DataType, Field, FieldRef, Schema};
use ldpstream_config::{MechanismConfig, StreamConfig};

use crate::mechanism::Mechanism;

/// Which columns of a batch a stream reads, and the mechanism that decodes them.
#[derive(Debug, Clone)]
pub struct ReportLayout {
    pub mechanism: Mechanism,
    pub report: String,
    /// The row (Hadamard), cohort or seed (OLH) column, for mechanisms that have one.
    pub index: Option<String>,
    pub group_by: Vec<String>,
    /// The event-time column, read when a batch has it.
    pub ts: String,
    /// Block sizes (in reports, in stream order) whose block index becomes an extra group
    /// column named by [`block_column`], after `group_by`.
    pub block_sizes: Vec<u64>,
    /// The stream's `max_groups`: one batch never allocates more group sketches than this
    /// plus the overflow group, whatever its cardinality.
    pub max_groups: usize,
    /// The stream's `max_group_value_bytes`: longer group values stop the fold.
    pub max_group_value_bytes: usize,
}

impl ReportLayout {
    /// The columns a stream's reports use, from its config.
    pub fn of(stream: &StreamConfig, mechanism: &Mechanism) -> Self {
        let index = match stream.mechanism {
            MechanismConfig::Hadamard { .. } => Some(stream.columns.row.clone()),
            MechanismConfig::Cohort { .. } => Some(stream.columns.cohort.clone()),
            MechanismConfig::Olh { .. } => Some(stream.columns.seed.clone()),
            _ => None,
        };
        ReportLayout {
            mechanism: mechanism.clone(),
            report: stream.columns.report.clone(),
            index,
            group_by: fold_columns(stream),
            ts: stream.columns.ts.clone(),
            block_sizes: block_sizes(stream),
            max_groups: stream.max_groups,
            max_group_value_bytes: stream.max_group_value_bytes,
        }
    }

    /// The report, index and group columns (not the event time, which is optional).
    pub fn columns(&self) -> impl Iterator<Item = &String> {
        std::iter::once(&self.report)
            .chain(self.index.as_ref())
            .chain(&self.group_by)
    }

    /// Every group column of a folded key: `group_by`, then one block column per size.
    pub fn key_columns(&self) -> Vec<String> {
        self.group_by
            .iter()
            .cloned()
            .chain(self.block_sizes.iter().map(|&s| block_column(s)))
            .collect()
    }
}

/// The synthetic key column holding the stream-order block index for blocks of `size`.
pub fn block_column(size: u64) -> String {
    format!("__block_{size}")
}

/// Appends one block-index column per block size, computed from each row's position in
/// stream order, before anything reorders the rows.
pub fn with_block_columns(
    batch: &RecordBatch,
    first_row: u64,
    sizes: &[u64],
) -> Result<RecordBatch, arrow_schema::ArrowError> {
    if sizes.is_empty() {
        return Ok(batch.clone());
    }
    let mut fields: Vec<FieldRef> = batch.schema().fields().iter().cloned().collect();
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    for &size in sizes {
        let ids: StringArray = (0..batch.num_rows() as u64)
            .map(|i| Some(((first_row + i) / size.max(1)).to_string()))
            .collect();
        fields.push(Arc::new(Field::new(
            block_column(size),
            DataType::Utf8,
            false,
        )));
        columns.push(Arc::new(ids));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
}

/// The block sizes of a stream's SubsampleAndAggregate tests.
pub fn block_sizes(stream: &StreamConfig) -> Vec<u64> {
    let mut sizes: Vec<u64> = stream
        .tests
        .iter()
        .filter_map(|t| t.method.block_size())
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// The columns a stream's reports are folded by: its `group_by`, then every two-sample
/// label column not already among them.
pub fn fold_columns(stream: &StreamConfig) -> Vec<String> {
    let mut columns = stream.columns.group_by.clone();
    for test in &stream.tests {
        if let Some(by) = test.spec.sample_column() {
            if !columns.iter().any(|c| c == by) {
                columns.push(by.to_string());
            }
        }
    }
    columns
}
