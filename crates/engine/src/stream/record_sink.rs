//! Where a window's records go as they are made. A bounded job at 10⁵ groups made every
//! record first and wrote them all at the end: 804 MiB of records against 176 MiB of
//! sketches (benches/RESULTS.md, issue 45). Records now leave the engine one at a time,
//! each complete but for the two values that depend on its whole family (the records of
//! one test, window and look): the Benjamini–Hochberg `q_value` and `anytime_q_value`.
//! Those follow at the family's end, from the p-values alone, so a sink may render each
//! record as it comes and hold only a few numbers per record until then.

use super::error::StreamError;
use super::latches::SequentialLatches;
use crate::record::TestRecord;
use crate::stats::bh_q_values;

/// A consumer of records, family by family.
pub trait RecordSink {
    /// The next record of the current family. Its `q_value` and `anytime_q_value` are not
    /// final: [`end_family`](Self::end_family) gives them.
    fn record(&mut self, record: TestRecord) -> Result<(), StreamError>;

    /// The current family is complete: every one of its records' final `q_value` and
    /// `anytime_q_value`, in the order the records came, replacing their own.
    fn end_family(
        &mut self,
        q_values: &[Option<f64>],
        anytime_q_values: &[Option<f64>],
    ) -> Result<(), StreamError>;
}

/// Keeps every record in memory, its family values set: what `serve`, the Python package
/// and the tests use, and what a sink that streams must be indistinguishable from.
#[derive(Debug, Default)]
pub struct CollectRecords {
    pub records: Vec<TestRecord>,
    family_start: usize,
}

impl RecordSink for CollectRecords {
    fn record(&mut self, record: TestRecord) -> Result<(), StreamError> {
        self.records.push(record);
        Ok(())
    }

    fn end_family(
        &mut self,
        q_values: &[Option<f64>],
        anytime_q_values: &[Option<f64>],
    ) -> Result<(), StreamError> {
        let family = &mut self.records[self.family_start..];
        for ((r, q), aq) in family.iter_mut().zip(q_values).zip(anytime_q_values) {
            r.q_value = *q;
            r.anytime_q_value = *aq;
        }
        self.family_start = self.records.len();
        Ok(())
    }
}

/// One family's records on their way to a sink, with what its Benjamini–Hochberg step
/// needs: each record's p-value, and, when the family's sequential records are observed
/// here, each one's anytime p-value.
pub(crate) struct Family<'s> {
    sink: &'s mut dyn RecordSink,
    /// `batch`: each record's look folded into its window's running state on its way
    /// (the records come in output order), and the anytime q-values set at the end.
    /// `serve` observes its records itself, after the round.
    latches: Option<&'s mut SequentialLatches>,
    p_values: Vec<Option<f64>>,
    anytime: Vec<Anytime>,
}

/// What a record's `anytime_q_value` is made of.
enum Anytime {
    /// A member of the anytime family (a sequential record observed here).
    Member(Option<f64>),
    /// Not a member: its own value stands.
    Own(Option<f64>),
}

impl<'s> Family<'s> {
    pub(crate) fn new(
        sink: &'s mut dyn RecordSink,
        latches: Option<&'s mut SequentialLatches>,
    ) -> Self {
        Family {
            sink,
            latches,
            p_values: Vec::new(),
            anytime: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, mut record: TestRecord) -> Result<(), StreamError> {
        let anytime = match self.latches.as_deref_mut() {
            Some(latches) => {
                latches.observe_one(&mut record);
                match record.anytime_p_value {
                    Some(p) => Anytime::Member(Some(p)),
                    None => Anytime::Own(record.anytime_q_value),
                }
            }
            None => Anytime::Own(record.anytime_q_value),
        };
        self.p_values.push(record.p_value);
        self.anytime.push(anytime);
        self.sink.record(record)
    }

    /// Benjamini–Hochberg across the family: `q_value` from the p-values, and, for the
    /// records observed here, `anytime_q_value` from the anytime p-values.
    pub(crate) fn end(self) -> Result<(), StreamError> {
        let q = bh_q_values(&self.p_values);
        let members: Vec<Option<f64>> = self
            .anytime
            .iter()
            .map(|a| match a {
                Anytime::Member(p) => *p,
                Anytime::Own(_) => None,
            })
            .collect();
        let adjusted = bh_q_values(&members);
        let anytime_q: Vec<Option<f64>> = self
            .anytime
            .iter()
            .zip(adjusted)
            .map(|(a, adjusted)| match a {
                Anytime::Member(_) => adjusted,
                Anytime::Own(own) => *own,
            })
            .collect();
        self.sink.end_family(&q, &anytime_q)
    }
}
