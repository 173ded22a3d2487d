use std::collections::BTreeMap;

use crate::error::EngineError;

/// Why a report was not folded. The order is part of the sketch serialization: append new
/// reasons at the end, never reorder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RejectReason {
    /// A category or signal index outside the mechanism's range.
    OutOfDomain,
    /// A null in a report column.
    Null,
    /// A bit-flip report whose byte width is not ⌈d/8⌉, or a noise vector whose length
    /// is not d.
    BadSize,
    /// A bit-flip report with a bit set beyond position d−1.
    PaddingBitsSet,
    /// A Hadamard row index ≥ K.
    RowOutOfRange,
    /// A ±1 signal that is neither +1 nor −1.
    NotPlusMinusOne,
    /// A noise coordinate that is NaN, infinite or beyond ±2³¹.
    NonFinite,
    /// A cohort index ≥ the number of cohorts.
    CohortOutOfRange,
    /// A finite noise coordinate beyond the mechanism's `max_abs`.
    AboveMaxAbs,
    /// A k-subset report whose length is not k.
    SubsetWrongSize,
    /// A k-subset report that names a category twice.
    SubsetDuplicate,
    /// An OLH report whose seed index is not below the pool size S.
    SeedOutOfPool,
    /// An OLH report whose bucket y is not below g.
    BucketOutOfRange,
}

impl RejectReason {
    pub const ALL: [RejectReason; 13] = [
        RejectReason::OutOfDomain,
        RejectReason::Null,
        RejectReason::BadSize,
        RejectReason::PaddingBitsSet,
        RejectReason::RowOutOfRange,
        RejectReason::NotPlusMinusOne,
        RejectReason::NonFinite,
        RejectReason::CohortOutOfRange,
        RejectReason::AboveMaxAbs,
        RejectReason::SubsetWrongSize,
        RejectReason::SubsetDuplicate,
        RejectReason::SeedOutOfPool,
        RejectReason::BucketOutOfRange,
    ];
    pub const COUNT: usize = Self::ALL.len();

    /// The name used in output records and metric labels.
    pub fn name(self) -> &'static str {
        match self {
            RejectReason::OutOfDomain => "out_of_domain",
            RejectReason::Null => "null",
            RejectReason::BadSize => "bad_size",
            RejectReason::PaddingBitsSet => "padding_bits_set",
            RejectReason::RowOutOfRange => "row_out_of_range",
            RejectReason::NotPlusMinusOne => "not_plus_minus_one",
            RejectReason::NonFinite => "non_finite",
            RejectReason::CohortOutOfRange => "cohort_out_of_range",
            RejectReason::AboveMaxAbs => "above_max_abs",
            RejectReason::SubsetWrongSize => "subset_wrong_size",
            RejectReason::SubsetDuplicate => "subset_duplicate",
            RejectReason::SeedOutOfPool => "seed_out_of_pool",
            RejectReason::BucketOutOfRange => "bucket_out_of_range",
        }
    }
}

/// Counts of reports that were seen but not folded, by reason. Almost every sketch has
/// none, and a grouped window holds one sketch per group (10⁵ and more), so the counts are
/// allocated only once one is non-zero: 8 bytes per sketch instead of 104.
#[derive(Debug, Clone, Default)]
pub struct Rejections {
    counts: Option<Box<[u64; RejectReason::COUNT]>>,
}

/// The counts of a sketch that rejected nothing.
static NONE_REJECTED: [u64; RejectReason::COUNT] = [0; RejectReason::COUNT];

/// Equal when the counts are: no counts and all-zero counts are the same value.
impl PartialEq for Rejections {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Rejections {}

impl Rejections {
    pub fn add(&mut self, reason: RejectReason, count: u64) {
        if count == 0 {
            return;
        }
        self.counts_mut()[reason as usize] += count;
    }

    /// The counts, allocated (all zero) on first use.
    fn counts_mut(&mut self) -> &mut [u64; RejectReason::COUNT] {
        self.counts
            .get_or_insert_with(|| Box::new([0; RejectReason::COUNT]))
    }

    pub fn get(&self, reason: RejectReason) -> u64 {
        self.as_slice()[reason as usize]
    }

    pub fn total(&self) -> u64 {
        self.as_slice().iter().sum()
    }

    /// Adds `other`'s counts. A sum past `u64::MAX` stays at the maximum: sketch merges
    /// refuse that case first with [`check_merge`](Self::check_merge), so only summaries
    /// for display can reach it.
    pub fn merge(&mut self, other: &Rejections) {
        let Some(theirs) = &other.counts else {
            return;
        };
        for (a, b) in self.counts_mut().iter_mut().zip(theirs.iter()) {
            *a = a.saturating_add(*b);
        }
    }

    /// Refuses a merge that would overflow a count (a crafted sketch file).
    pub(crate) fn check_merge(&self, other: &Rejections) -> Result<(), EngineError> {
        match self
            .as_slice()
            .iter()
            .zip(other.as_slice())
            .position(|(a, b)| a.checked_add(*b).is_none())
        {
            None => Ok(()),
            Some(r) => Err(EngineError::Corrupt(format!(
                "merging overflows the rejection count {}",
                RejectReason::ALL[r].name()
            ))),
        }
    }

    /// Every reason with its count, zeros included, so that consumers see a stable shape.
    pub fn to_map(&self) -> BTreeMap<String, u64> {
        RejectReason::ALL
            .iter()
            .map(|r| (r.name().to_string(), self.get(*r)))
            .collect()
    }

    pub(crate) fn as_slice(&self) -> &[u64] {
        match &self.counts {
            Some(counts) => counts.as_slice(),
            None => &NONE_REJECTED,
        }
    }

    pub(crate) fn from_slice(values: &[u64]) -> Option<Self> {
        if values.len() > RejectReason::COUNT {
            return None;
        }
        let mut r = Rejections::default();
        for (&reason, &count) in RejectReason::ALL.iter().zip(values) {
            r.add(reason, count);
        }
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_allocated_only_once_one_is_not_zero() {
        let mut r = Rejections::default();
        r.add(RejectReason::Null, 0);
        r.merge(&Rejections::default());
        assert!(r.counts.is_none());
        assert_eq!(r, Rejections::from_slice(&[0, 0, 0]).unwrap());
        assert_eq!(r.to_map().len(), RejectReason::COUNT);

        let mut s = Rejections::default();
        s.add(RejectReason::NonFinite, 3);
        r.merge(&s);
        r.add(RejectReason::Null, 2);
        assert_eq!(r.get(RejectReason::NonFinite), 3);
        assert_eq!(r.get(RejectReason::Null), 2);
        assert_eq!(r.total(), 5);
        assert_eq!(Rejections::from_slice(r.as_slice()), Some(r.clone()));
        assert_ne!(r, Rejections::default());
    }

    #[test]
    fn an_overflowing_merge_is_refused_whichever_side_has_counts() {
        let mut big = Rejections::default();
        big.add(RejectReason::SeedOutOfPool, u64::MAX);
        let mut one = Rejections::default();
        one.add(RejectReason::SeedOutOfPool, 1);
        assert!(big.check_merge(&one).is_err());
        assert!(one.check_merge(&big).is_err());
        assert!(big.check_merge(&Rejections::default()).is_ok());
        assert!(Rejections::default().check_merge(&big).is_ok());
    }
}
