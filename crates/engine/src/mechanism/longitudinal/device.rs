//! A device's longitudinal client: one report per metric per period, each drawn from the
//! memo of the value the device holds, with the memo kept in a [`MemoStore`] the device
//! owns. The order of its steps is the portable spec every client follows
//! (conformance/README.md, "Longitudinal"):
//!
//! 1. the value must be in the domain; the period is t = ⌊ts / period⌋ (floor division);
//! 2. the metric's stored memo must have this mechanism's fingerprint, else refused
//!    (`memo_mismatch`: [`Device::reset`] is explicit, since it spends ε∞ again);
//! 3. a stopped metric is refused (`stopped`);
//! 4. t equal to the last report's period: `same_period` "refuse" (`same_period`) or
//!    "repeat" (the last report's bytes again, no words drawn); t before it: refused
//!    (`clock_went_back`);
//! 5. the value's memo, or, for a new value: refused past `max_memoized_values` (the
//!    metric stops, `memo_full`), else round 1 is drawn and saved before anything else;
//! 6. round 2 from the memo; the period and the report are saved, then returned.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::memo::{MemoStore, MemoStoreError, MetricMemo};
use super::{Longitudinal, Response};
use crate::error::EngineError;
use crate::mechanism::Mechanism;

/// The default `max_memoized_values`.
pub const DEFAULT_MAX_MEMOIZED_VALUES: u32 = 16;
/// The most memory `max_memoized_values` × ⌈d/8⌉ may ask a device to keep per metric.
pub const MAX_MEMO_BYTES: u64 = 64 << 20;

/// What a second report in the same period gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SamePeriod {
    /// Refused: the server counts every message, so a second one would count the device
    /// twice in the window and break the independence every test assumes.
    #[default]
    Refuse,
    /// The first report's bytes again, for retrying a send that failed. The server still
    /// counts each message it receives: repeat only what was never delivered.
    Repeat,
}

impl SamePeriod {
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "refuse" => Ok(SamePeriod::Refuse),
            "repeat" => Ok(SamePeriod::Repeat),
            other => Err(format!(
                "same_period {other:?}: expected \"refuse\" or \"repeat\""
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SamePeriod::Refuse => "refuse",
            SamePeriod::Repeat => "repeat",
        }
    }
}

/// The device-side options (none of them is the server's business).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceOptions {
    /// The most distinct values a metric may memoize; a device whose value changes more
    /// often has spent ε∞ that many times, and stops reporting the metric.
    pub max_memoized_values: u32,
    pub same_period: SamePeriod,
}

impl Default for DeviceOptions {
    fn default() -> Self {
        DeviceOptions {
            max_memoized_values: DEFAULT_MAX_MEMOIZED_VALUES,
            same_period: SamePeriod::default(),
        }
    }
}

/// Why a device did not report. [`DeviceError::code`] is the refusal's name in the
/// conformance cases and in the other clients.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("invalid device option {name} = {value}: {allowed}")]
    Option {
        name: &'static str,
        value: String,
        allowed: String,
    },
    #[error(
        "metric {metric:?}: its memo was drawn under another mechanism ({stored_kind}, \
         fingerprint {stored:08x}; this device runs {kind}, {current:08x}); a memo is only \
         valid under the law it was drawn from. Reset the metric to start a new memo, which \
         spends epsilon_perm again for every value"
    )]
    MemoMismatch {
        metric: String,
        stored_kind: String,
        stored: u32,
        kind: &'static str,
        current: u32,
    },
    #[error(
        "metric {metric:?}: already reported in period {period} (same_period = \"refuse\"): \
         a device reports a metric at most once per period"
    )]
    SamePeriod { metric: String, period: i64 },
    #[error(
        "metric {metric:?}: ts is in period {period}, before the last report's period {last}: \
         the device's clock went back, and a second report in a period already reported \
         would be counted twice"
    )]
    ClockWentBack {
        metric: String,
        period: i64,
        last: i64,
    },
    #[error(
        "metric {metric:?}: value {value} would be distinct value number {count}, past \
         max_memoized_values = {cap}; every new value spends epsilon_perm, so the device \
         stops reporting this metric"
    )]
    MemoFull {
        metric: String,
        value: u32,
        count: usize,
        cap: u32,
    },
    #[error(
        "metric {metric:?}: stopped after its values passed max_memoized_values = {cap}; the \
         device no longer reports it"
    )]
    Stopped { metric: String, cap: u32 },
    #[error("metric {metric:?}: the memo store failed: {source}")]
    Store {
        metric: String,
        #[source]
        source: MemoStoreError,
    },
}

impl DeviceError {
    /// The refusal's name (conformance/README.md), or "error" for a failure.
    pub fn code(&self) -> &'static str {
        match self {
            DeviceError::MemoMismatch { .. } => "memo_mismatch",
            DeviceError::SamePeriod { .. } => "same_period",
            DeviceError::ClockWentBack { .. } => "clock_went_back",
            DeviceError::MemoFull { .. } => "memo_full",
            DeviceError::Stopped { .. } => "stopped",
            DeviceError::Engine(EngineError::InputOutOfDomain { .. }) => "out_of_domain",
            DeviceError::Engine(_) | DeviceError::Option { .. } | DeviceError::Store { .. } => {
                "error"
            }
        }
    }
}

/// One device's client of a longitudinal mechanism.
#[derive(Debug)]
pub struct Device<S: MemoStore> {
    mechanism: Longitudinal,
    fingerprint: u32,
    store: S,
    options: DeviceOptions,
}

impl<S: MemoStore> Device<S> {
    /// Refuses a cap of 0, or one whose memos could take more than [`MAX_MEMO_BYTES`].
    pub fn new(
        mechanism: Longitudinal,
        store: S,
        options: DeviceOptions,
    ) -> Result<Self, DeviceError> {
        let per_value = u64::from(mechanism.domain()).div_ceil(8).max(4);
        let cap = options.max_memoized_values;
        if cap == 0 || u64::from(cap) * per_value > MAX_MEMO_BYTES {
            return Err(DeviceError::Option {
                name: "max_memoized_values",
                value: cap.to_string(),
                allowed: format!(
                    "from 1 to {} at d = {}: each memo takes {per_value} bytes and a metric's \
                     at most {MAX_MEMO_BYTES} bytes",
                    MAX_MEMO_BYTES / per_value,
                    mechanism.domain()
                ),
            });
        }
        let fingerprint = Mechanism::Longitudinal(Box::new(mechanism.clone()))
            .fingerprint()
            .unwrap_or_default();
        Ok(Device {
            mechanism,
            fingerprint,
            store,
            options,
        })
    }

    pub fn mechanism(&self) -> &Longitudinal {
        &self.mechanism
    }

    pub fn options(&self) -> DeviceOptions {
        self.options
    }

    pub fn store(&self) -> &S {
        &self.store
    }

    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    pub fn into_store(self) -> S {
        self.store
    }

    /// The period index of an event time: ⌊ts / period⌋, rounding down before 1970 too.
    pub fn period_of(&self, ts_ms: i64) -> i64 {
        let period = i64::try_from(self.mechanism.period_ms()).unwrap_or(i64::MAX);
        ts_ms.div_euclid(period)
    }

    /// The report of `value` for `metric` at event time `ts_ms`, drawn from a generator
    /// seeded from the OS for this call alone (so a forked process never repeats its
    /// parent's draws).
    pub fn report(
        &mut self,
        metric: &str,
        value: u32,
        ts_ms: i64,
    ) -> Result<Response, DeviceError> {
        self.report_with(metric, value, ts_ms, &mut StdRng::from_os_rng())
    }

    /// [`report`](Self::report) with a caller's generator: seeded only for simulation, and
    /// replayed words in the conformance suite.
    pub fn report_with<R: Rng + ?Sized>(
        &mut self,
        metric: &str,
        value: u32,
        ts_ms: i64,
        rng: &mut R,
    ) -> Result<Response, DeviceError> {
        crate::mechanism::check_input(value, self.mechanism.domain())?;
        let period = self.period_of(ts_ms);
        let mut memo = self.load(metric)?;
        if memo.stopped {
            return Err(DeviceError::Stopped {
                metric: metric.to_string(),
                cap: self.options.max_memoized_values,
            });
        }
        match memo.last_period {
            Some(last) if last == period => return self.same_period(metric, &memo, period),
            Some(last) if period < last => {
                return Err(DeviceError::ClockWentBack {
                    metric: metric.to_string(),
                    period,
                    last,
                })
            }
            _ => {}
        }
        let first = match memo.values.get(&value) {
            Some(first) => first.clone(),
            None => {
                let cap = self.options.max_memoized_values;
                if memo.values.len() >= cap as usize {
                    memo.stopped = true;
                    self.save(metric, &memo)?;
                    return Err(DeviceError::MemoFull {
                        metric: metric.to_string(),
                        value,
                        count: memo.values.len() + 1,
                        cap,
                    });
                }
                let first = self.mechanism.memoize(value, rng)?;
                memo.values.insert(value, first.clone());
                // Saved before round 2 is drawn: a crash now loses this report, never the
                // memo (which would be redrawn, spending ε∞ again).
                self.save(metric, &memo)?;
                first
            }
        };
        let report = self.mechanism.report_from(&first, rng)?;
        memo.last_period = Some(period);
        memo.last_report = Some(report.clone());
        memo.reports += 1;
        // Saved before the report is returned: a crash now loses this report, never lets a
        // second one out in the same period.
        self.save(metric, &memo)?;
        Ok(report)
    }

    /// Forgets `metric`'s memo and starts a new one for this mechanism: every value it
    /// reports again spends ε∞ again. For a changed mechanism (`memo_mismatch`) or a
    /// deliberate fresh start; the period rule carries over, so the reset does not allow
    /// a second report in the current period.
    pub fn reset(&mut self, metric: &str) -> Result<(), DeviceError> {
        let last_period = self
            .store
            .load(metric)
            .map_err(|source| store_error(metric, source))?
            .and_then(|m| m.last_period);
        let mut memo = self.empty_memo();
        memo.last_period = last_period;
        self.save(metric, &memo)
    }

    fn same_period(
        &self,
        metric: &str,
        memo: &MetricMemo,
        period: i64,
    ) -> Result<Response, DeviceError> {
        match (self.options.same_period, &memo.last_report) {
            (SamePeriod::Repeat, Some(report)) => Ok(report.clone()),
            _ => Err(DeviceError::SamePeriod {
                metric: metric.to_string(),
                period,
            }),
        }
    }

    fn empty_memo(&self) -> MetricMemo {
        MetricMemo::new(
            self.mechanism.kind(),
            self.fingerprint,
            self.mechanism.period_ms(),
        )
    }

    fn load(&mut self, metric: &str) -> Result<MetricMemo, DeviceError> {
        let stored = self
            .store
            .load(metric)
            .map_err(|source| store_error(metric, source))?;
        match stored {
            None => Ok(self.empty_memo()),
            Some(m) if m.fingerprint == self.fingerprint && m.kind == self.mechanism.kind() => {
                match self.damage(&m) {
                    None => Ok(m),
                    Some(why) => Err(store_error(
                        metric,
                        MemoStoreError::new(format!(
                            "its memo does not read back ({why}); restore it from the \
                             device's own backup: a reset makes every value spend \
                             epsilon_perm again"
                        )),
                    )),
                }
            }
            Some(m) => Err(DeviceError::MemoMismatch {
                metric: metric.to_string(),
                stored_kind: m.kind,
                stored: m.fingerprint,
                kind: self.mechanism.kind(),
                current: self.fingerprint,
            }),
        }
    }

    /// What is wrong with a stored memo of this mechanism, if anything: a value outside
    /// the domain, or a response this mechanism cannot draw (a category outside the
    /// domain; other than ⌈d/8⌉ bytes, or a bit set past d). A damaged store that still
    /// parses would otherwise count towards the cap, or send reports the server refuses
    /// or, worse, folds.
    fn damage(&self, memo: &MetricMemo) -> Option<String> {
        let d = self.mechanism.domain();
        if let Some(v) = memo.values.keys().find(|&&v| v >= d) {
            return Some(format!("value {v} is outside the domain [0, {d})"));
        }
        let responses = memo
            .values
            .iter()
            .map(|(v, r)| (format!("the memo of value {v}"), r))
            .chain(
                memo.last_report
                    .iter()
                    .map(|r| ("last_report".to_string(), r)),
            );
        for (what, r) in responses {
            let fits = match r {
                Response::Category(c) => self.mechanism.kind() == "lgrr" && *c < d,
                Response::Bits(b) => {
                    let bytes = (d as usize).div_ceil(8);
                    let spare = (bytes * 8 - d as usize) as u32;
                    self.mechanism.kind() != "lgrr"
                        && b.len() == bytes
                        && b.last()
                            .is_none_or(|&top| top.checked_shr(8 - spare).unwrap_or(0) == 0)
                }
            };
            if !fits {
                return Some(format!(
                    "{what} is not a {} response at d = {d}",
                    self.mechanism.kind()
                ));
            }
        }
        None
    }

    fn save(&mut self, metric: &str, memo: &MetricMemo) -> Result<(), DeviceError> {
        self.store
            .save(metric, memo)
            .map_err(|source| store_error(metric, source))
    }
}

fn store_error(metric: &str, source: MemoStoreError) -> DeviceError {
    DeviceError::Store {
        metric: metric.to_string(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mechanism::longitudinal::memo::InMemoryMemoStore;
    use ldpstream_config::{DurationMs, LongitudinalKind, LongitudinalParams};

    const DAY: i64 = 86_400_000;

    fn mechanism(kind: LongitudinalKind) -> Longitudinal {
        Longitudinal::new(LongitudinalParams {
            kind,
            epsilon_perm: 2.0,
            epsilon_1: 1.0,
            domain: 4,
            period: DurationMs(DAY as u64),
        })
        .unwrap()
    }

    fn device(options: DeviceOptions) -> Device<InMemoryMemoStore> {
        Device::new(
            mechanism(LongitudinalKind::Lgrr),
            InMemoryMemoStore::new(),
            options,
        )
        .unwrap()
    }

    fn rng() -> StdRng {
        StdRng::seed_from_u64(5)
    }

    /// A stored memo that parses but that this mechanism could not have written (a value
    /// outside the domain; a category outside it; bits of another length or with a bit
    /// set past d) is a store error naming it, not a report: a padding bit would reach the
    /// server, an outside value would count towards the cap. Nothing is saved, and a reset
    /// replaces it.
    #[test]
    fn a_damaged_memo_is_an_error_not_a_report() {
        let cases = [
            (LongitudinalKind::Lgrr, 9, Response::Category(1), "value 9"),
            (
                LongitudinalKind::Lgrr,
                1,
                Response::Category(4),
                "the memo of value 1",
            ),
            (
                LongitudinalKind::Lgrr,
                1,
                Response::Bits(vec![1]),
                "the memo of value 1",
            ),
            (
                LongitudinalKind::Losue,
                1,
                Response::Bits(vec![0x10]),
                "the memo of value 1",
            ),
            (
                LongitudinalKind::Lsue,
                1,
                Response::Bits(vec![0x80]),
                "the memo of value 1",
            ),
            (
                LongitudinalKind::Lsue,
                1,
                Response::Bits(vec![1, 0]),
                "the memo of value 1",
            ),
            (
                LongitudinalKind::Lsue,
                1,
                Response::Category(1),
                "the memo of value 1",
            ),
        ];
        for (kind, value, response, what) in cases {
            let mut d = Device::new(
                mechanism(kind),
                InMemoryMemoStore::new(),
                DeviceOptions::default(),
            )
            .unwrap();
            let mut memo = d.empty_memo();
            memo.values.insert(value, response.clone());
            d.store_mut().save("m", &memo).unwrap();
            let e = d.report_with("m", 1, 0, &mut rng()).unwrap_err();
            assert!(
                matches!(e, DeviceError::Store { .. })
                    && e.to_string().contains(what)
                    && e.to_string().contains("does not read back"),
                "{kind:?} {response:?}: {e}"
            );
            assert_eq!(d.store_mut().load("m").unwrap(), Some(memo.clone()));
            d.reset("m").unwrap();
            d.report_with("m", 1, 0, &mut rng()).unwrap();
        }
        // A damaged last_report is refused too; a full byte of d = 8 bits is not padding.
        let mut d = Device::new(
            mechanism(LongitudinalKind::Lgrr),
            InMemoryMemoStore::new(),
            DeviceOptions::default(),
        )
        .unwrap();
        let mut memo = d.empty_memo();
        memo.last_report = Some(Response::Category(7));
        d.store_mut().save("m", &memo).unwrap();
        let e = d.report_with("m", 1, DAY, &mut rng()).unwrap_err();
        assert!(e.to_string().contains("last_report"), "{e}");
        let wide = Longitudinal::new(LongitudinalParams {
            kind: LongitudinalKind::Lsue,
            epsilon_perm: 2.0,
            epsilon_1: 1.0,
            domain: 8,
            period: DurationMs(DAY as u64),
        })
        .unwrap();
        let mut d = Device::new(wide, InMemoryMemoStore::new(), DeviceOptions::default()).unwrap();
        let mut memo = d.empty_memo();
        memo.values.insert(1, Response::Bits(vec![0xff]));
        d.store_mut().save("m", &memo).unwrap();
        d.report_with("m", 1, 0, &mut rng()).unwrap();
    }

    #[test]
    fn one_report_per_period_and_the_memo_is_kept() {
        let mut d = device(DeviceOptions::default());
        let mut r = rng();
        d.report_with("m", 2, 10, &mut r).unwrap();
        let memo = d.store_mut().load("m").unwrap().unwrap();
        assert_eq!(memo.values.len(), 1);
        assert_eq!(memo.last_period, Some(0));
        let first = memo.values[&2].clone();
        // The same period again: refused by default, the memo untouched.
        let e = d.report_with("m", 2, DAY - 1, &mut r).unwrap_err();
        assert_eq!(e.code(), "same_period", "{e}");
        // Later periods reuse the memo of the value.
        for t in 1..50 {
            d.report_with("m", 2, t * DAY, &mut r).unwrap();
        }
        let memo = d.store_mut().load("m").unwrap().unwrap();
        assert_eq!(memo.values[&2], first);
        assert_eq!((memo.reports, memo.last_period), (50, Some(49)));
        // A clock that went back is refused.
        let e = d.report_with("m", 2, 3 * DAY, &mut r).unwrap_err();
        assert_eq!(e.code(), "clock_went_back", "{e}");
        // Periods before 1970 round down, as the windows do.
        assert_eq!(d.period_of(-1), -1);
        // Metrics are independent.
        d.report_with("other", 1, 0, &mut r).unwrap();
    }

    #[test]
    fn repeat_returns_the_first_reports_bytes_without_drawing() {
        let mut d = device(DeviceOptions {
            same_period: SamePeriod::Repeat,
            ..DeviceOptions::default()
        });
        let mut r = rng();
        let first = d.report_with("m", 3, 5, &mut r).unwrap();
        let before = r.clone();
        for value in [3, 0] {
            assert_eq!(d.report_with("m", value, 6, &mut r).unwrap(), first);
        }
        assert_eq!(
            r.random::<u64>(),
            before.clone().random::<u64>(),
            "no word read"
        );
        assert_eq!(d.store_mut().load("m").unwrap().unwrap().reports, 1);
    }

    #[test]
    fn past_the_cap_the_metric_stops() {
        let mut d = device(DeviceOptions {
            max_memoized_values: 2,
            ..DeviceOptions::default()
        });
        let mut r = rng();
        d.report_with("m", 0, 0, &mut r).unwrap();
        d.report_with("m", 1, DAY, &mut r).unwrap();
        d.report_with("m", 0, 2 * DAY, &mut r).unwrap();
        let e = d.report_with("m", 2, 3 * DAY, &mut r).unwrap_err();
        assert_eq!(e.code(), "memo_full", "{e}");
        assert!(e.to_string().contains("max_memoized_values = 2"), "{e}");
        // Stopped for every value, memoized or not: reporting only old values would make
        // participation depend on the value.
        let e = d.report_with("m", 0, 4 * DAY, &mut r).unwrap_err();
        assert_eq!(e.code(), "stopped", "{e}");
        assert!(d.store_mut().load("m").unwrap().unwrap().stopped);
    }

    #[test]
    fn a_memo_of_another_mechanism_is_refused_until_reset() {
        let mut store = InMemoryMemoStore::new();
        let mut r = rng();
        {
            let mut d = Device::new(
                mechanism(LongitudinalKind::Lgrr),
                &mut store,
                DeviceOptions::default(),
            )
            .unwrap();
            d.report_with("m", 1, 0, &mut r).unwrap();
        }
        let mut d = Device::new(
            mechanism(LongitudinalKind::Losue),
            &mut store,
            DeviceOptions::default(),
        )
        .unwrap();
        let e = d.report_with("m", 1, DAY, &mut r).unwrap_err();
        assert_eq!(e.code(), "memo_mismatch", "{e}");
        assert!(e.to_string().contains("epsilon_perm again"), "{e}");
        d.reset("m").unwrap();
        // The period rule survives the reset.
        assert_eq!(
            d.report_with("m", 1, 0, &mut r).unwrap_err().code(),
            "same_period"
        );
        assert!(matches!(
            d.report_with("m", 1, DAY, &mut r).unwrap(),
            Response::Bits(_)
        ));
    }

    /// A store whose saves fail after the first `ok` of them.
    struct Failing {
        inner: InMemoryMemoStore,
        ok: usize,
    }

    impl MemoStore for Failing {
        fn load(&mut self, metric: &str) -> Result<Option<MetricMemo>, MemoStoreError> {
            self.inner.load(metric)
        }
        fn save(&mut self, metric: &str, memo: &MetricMemo) -> Result<(), MemoStoreError> {
            if self.ok == 0 {
                return Err(MemoStoreError::new("disk full"));
            }
            self.ok -= 1;
            self.inner.save(metric, memo)
        }
    }

    /// The memo is saved before round 2 is drawn and the period before the report is
    /// returned: a failed save returns no report, and never lets the memo be redrawn.
    #[test]
    fn a_failed_save_returns_no_report_and_keeps_the_memo() {
        let store = Failing {
            inner: InMemoryMemoStore::new(),
            ok: 1,
        };
        let mut d = Device::new(
            mechanism(LongitudinalKind::Lsue),
            store,
            DeviceOptions::default(),
        )
        .unwrap();
        let mut r = rng();
        let e = d.report_with("m", 2, 0, &mut r).unwrap_err();
        assert_eq!(e.code(), "error");
        assert!(e.to_string().contains("disk full"), "{e}");
        let memo = d.store_mut().inner.load("m").unwrap().unwrap();
        assert_eq!(memo.values.len(), 1, "the memo was saved first");
        assert_eq!(memo.last_period, None, "no report went out");
        let kept = memo.values[&2].clone();
        d.store_mut().ok = 10;
        d.report_with("m", 2, 0, &mut r).unwrap();
        assert_eq!(
            d.store_mut().inner.load("m").unwrap().unwrap().values[&2],
            kept
        );
    }

    #[test]
    fn options_and_inputs_are_checked() {
        let l = || mechanism(LongitudinalKind::Lgrr);
        let zero = DeviceOptions {
            max_memoized_values: 0,
            ..DeviceOptions::default()
        };
        assert!(Device::new(l(), InMemoryMemoStore::new(), zero).is_err());
        let mut d = device(DeviceOptions::default());
        let e = d.report_with("m", 4, 0, &mut rng()).unwrap_err();
        assert_eq!(e.code(), "out_of_domain");
        assert_eq!(SamePeriod::parse("repeat"), Ok(SamePeriod::Repeat));
        assert!(SamePeriod::parse("twice").is_err());
    }
}
