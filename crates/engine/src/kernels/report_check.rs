use crate::mechanism::Mechanism;
use crate::sketch::{RejectReason, Sketch, SumSketch};

/// Whether the fold will reject one report, and why, decided while a source still holds the
/// report's original bytes (so that it can dead-letter them). The fold kernels stay the
/// authority: they count the rejection into the record, so a source appends the report
/// either way. The rules mirror the kernels' per-row checks; a property test in `fold`
/// keeps the two in step.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportCheck {
    rule: Rule,
}

#[derive(Debug, Clone, PartialEq)]
enum Rule {
    /// Categories `0..size`.
    Categories { size: u64 },
    /// `width` bytes whose bits at or beyond d (in the last byte) are zero.
    Bits { width: usize, padding_mask: u8 },
    /// A row or cohort index below `rows` and a sign of ±1.
    Indexed {
        rows: u64,
        out_of_range: RejectReason,
    },
    /// `d` coordinates, each representable in fixed point and within ±`max_abs`.
    Vector { d: usize, max_abs: f64 },
    /// `k` distinct categories below `d`.
    Subset { k: usize, d: u64 },
    /// An OLH (pool index, bucket) pair: index below `rows`, bucket below `g`.
    Pooled { rows: u64, g: u64 },
}

impl ReportCheck {
    pub fn new(mechanism: &Mechanism) -> Self {
        let mechanism = mechanism.channel();
        // OLH's table can hold 2^24 cells: its dimensions are the mechanism's own.
        if let Mechanism::Olh(m) = mechanism {
            return ReportCheck {
                rule: Rule::Pooled {
                    rows: u64::from(m.pool_size()),
                    g: u64::from(m.g()),
                },
            };
        }
        // The sketch's own dimensions, so that the rules cannot drift from what the fold
        // compares against (a large-domain table starts sparse, so this stays cheap).
        let rule = match (mechanism, mechanism.new_sketch()) {
            (Mechanism::Subset(m), Sketch::Bits(s)) => Rule::Subset {
                k: m.k() as usize,
                d: s.bit_counts().len() as u64,
            },
            (_, Sketch::Counts(s)) => Rule::Categories {
                size: s.domain() as u64,
            },
            (_, Sketch::Bits(s)) => {
                let d = s.bit_counts().len();
                Rule::Bits {
                    width: d.div_ceil(8),
                    padding_mask: if d % 8 == 0 {
                        0
                    } else {
                        !((1u16 << (d % 8)) as u8 - 1)
                    },
                }
            }
            (Mechanism::Noise(m), Sketch::Sums(s)) => Rule::Vector {
                d: s.sums().len(),
                max_abs: m.max_abs(),
            },
            (_, Sketch::Sums(s)) => Rule::Vector {
                d: s.sums().len(),
                max_abs: f64::INFINITY,
            },
            (_, Sketch::Pool(s)) => Rule::Pooled {
                rows: s.pool_size() as u64,
                g: s.g() as u64,
            },
            (m, Sketch::Signed(s)) => Rule::Indexed {
                rows: s.rows() as u64,
                out_of_range: if matches!(m, Mechanism::Hadamard(_)) {
                    RejectReason::RowOutOfRange
                } else {
                    RejectReason::CohortOutOfRange
                },
            },
        };
        ReportCheck { rule }
    }

    /// A categorical report (grr, matrix, raw).
    pub fn category(&self, x: u32) -> Option<RejectReason> {
        match self.rule {
            Rule::Categories { size } => {
                (u64::from(x) >= size).then_some(RejectReason::OutOfDomain)
            }
            _ => Some(RejectReason::BadSize),
        }
    }

    /// A packed bit-flip report.
    pub fn bits(&self, bytes: &[u8]) -> Option<RejectReason> {
        match self.rule {
            Rule::Bits {
                width,
                padding_mask,
            } => match bytes.last() {
                Some(_) if bytes.len() != width => Some(RejectReason::BadSize),
                Some(last) if last & padding_mask != 0 => Some(RejectReason::PaddingBitsSet),
                Some(_) => None,
                None => Some(RejectReason::BadSize),
            },
            _ => Some(RejectReason::BadSize),
        }
    }

    /// A Hadamard (row, ±1) or cohort (cohort, ±1) report.
    pub fn indexed(&self, index: u32, sign: i8) -> Option<RejectReason> {
        match self.rule {
            Rule::Indexed { rows, out_of_range } => {
                if u64::from(index) >= rows {
                    Some(out_of_range)
                } else if sign != 1 && sign != -1 {
                    Some(RejectReason::NotPlusMinusOne)
                } else {
                    None
                }
            }
            _ => Some(RejectReason::BadSize),
        }
    }

    /// A k-subset report, under the first rule it breaks in the fold's order: wrong size,
    /// an item out of range, an item twice.
    pub fn subset(&self, items: &[u32]) -> Option<RejectReason> {
        match self.rule {
            Rule::Subset { k, d } => {
                if items.len() != k {
                    return Some(RejectReason::SubsetWrongSize);
                }
                if items.iter().any(|&j| u64::from(j) >= d) {
                    return Some(RejectReason::OutOfDomain);
                }
                // A copy per report: a source checks one message at a time and has just
                // allocated its parse anyway; the fold itself uses a bit set per batch.
                let mut sorted = items.to_vec();
                sorted.sort_unstable();
                sorted
                    .windows(2)
                    .any(|w| w[0] == w[1])
                    .then_some(RejectReason::SubsetDuplicate)
            }
            _ => Some(RejectReason::BadSize),
        }
    }
    /// An OLH (pool index, bucket) report; a bad index wins over a bad bucket, as in the
    /// fold.
    pub fn pooled(&self, index: u32, bucket: u32) -> Option<RejectReason> {
        match self.rule {
            Rule::Pooled { rows, g } => {
                if u64::from(index) >= rows {
                    Some(RejectReason::SeedOutOfPool)
                } else if u64::from(bucket) >= g {
                    Some(RejectReason::BucketOutOfRange)
                } else {
                    None
                }
            }
            _ => Some(RejectReason::BadSize),
        }
    }

    /// A noise vector. Unrepresentable anywhere wins over beyond `max_abs`, as in the fold.
    pub fn vector(&self, values: &[f64]) -> Option<RejectReason> {
        match self.rule {
            Rule::Vector { d, max_abs } => {
                if values.len() != d {
                    return Some(RejectReason::BadSize);
                }
                if values.iter().any(|&x| SumSketch::to_fixed(x).is_none()) {
                    Some(RejectReason::NonFinite)
                } else if values.iter().any(|x| x.abs() > max_abs) {
                    Some(RejectReason::AboveMaxAbs)
                } else {
                    None
                }
            }
            _ => Some(RejectReason::BadSize),
        }
    }
}
