//! Simulated devices of a longitudinal mechanism, for `ldpstream simulate` and the Monte
//! Carlo checks: each device holds a value drawn from `p`, redraws it from `p` with
//! probability `change` at the start of every later period, and reports once per period
//! through the real client ([`Device`]) with its own memo. The devices share one in-memory
//! store, each keyed by its index as the metric name, so every report takes the client's
//! own code path (period rule, memo, cap).

use rand::Rng;

use super::device::{Device, DeviceError, DeviceOptions};
use super::memo::InMemoryMemoStore;
use super::{Longitudinal, Response};
use crate::error::EngineError;

/// One device's report in a period.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceReport {
    pub device: u32,
    /// The value the device held.
    pub truth: u32,
    pub ts_ms: i64,
    pub report: Response,
}

/// A population of simulated devices.
#[derive(Debug)]
pub struct Population {
    device: Device<InMemoryMemoStore>,
    cumulative: Vec<f64>,
    change: f64,
    values: Vec<u32>,
    names: Vec<String>,
    /// The next period index reported.
    next: i64,
    /// Periods reported so far.
    periods: u64,
    /// Devices that stopped (past `max_memoized_values`) and report no more.
    stopped: u64,
}

impl Population {
    /// `devices` devices whose first values are drawn from `p` (d probabilities summing to
    /// 1), reporting from period `first_period` on; `change` in [0, 1].
    pub fn new<R: Rng + ?Sized>(
        mechanism: Longitudinal,
        options: DeviceOptions,
        p: &[f64],
        devices: u32,
        change: f64,
        first_period: i64,
        rng: &mut R,
    ) -> Result<Self, DeviceError> {
        if p.len() != mechanism.domain() as usize {
            return Err(EngineError::WrongLength {
                name: "p",
                expected: mechanism.domain() as usize,
                found: p.len(),
            }
            .into());
        }
        if !(0.0..=1.0).contains(&change) {
            return Err(EngineError::invalid("change", change, "a share in [0, 1]").into());
        }
        let cumulative: Vec<f64> = p
            .iter()
            .scan(0.0, |acc, &x| {
                *acc += x;
                Some(*acc)
            })
            .collect();
        let mut population = Population {
            device: Device::new(mechanism, InMemoryMemoStore::new(), options)?,
            cumulative,
            change,
            values: Vec::with_capacity(devices as usize),
            names: (0..devices).map(|i| i.to_string()).collect(),
            next: first_period,
            periods: 0,
            stopped: 0,
        };
        for _ in 0..devices {
            let x = population.draw(rng);
            population.values.push(x);
        }
        Ok(population)
    }

    fn draw<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        let u: f64 = rng.random();
        self.cumulative
            .iter()
            .position(|&c| u < c)
            .unwrap_or(self.cumulative.len().saturating_sub(1)) as u32
    }

    pub fn mechanism(&self) -> &Longitudinal {
        self.device.mechanism()
    }

    /// Devices that have stopped reporting (their values passed `max_memoized_values`).
    pub fn stopped(&self) -> u64 {
        self.stopped
    }

    /// The next period's reports, one per device still reporting, in device order; each at
    /// `period start + i·period/devices` (the devices spread over the period). Values change
    /// before every period but the first.
    pub fn next_period<R: Rng + ?Sized>(
        &mut self,
        rng: &mut R,
    ) -> Result<Vec<DeviceReport>, DeviceError> {
        let t = self.next;
        let period = i64::try_from(self.mechanism().period_ms()).unwrap_or(i64::MAX);
        let n = self.values.len() as i64;
        let start = t.saturating_mul(period);
        let mut out = Vec::with_capacity(self.values.len());
        for i in 0..self.values.len() {
            if self.periods > 0 && rng.random::<f64>() < self.change {
                self.values[i] = self.draw(rng);
            }
            let ts_ms = start
                .saturating_add(((i as i128 * i128::from(period)) / i128::from(n.max(1))) as i64);
            let truth = self.values[i];
            match self.device.report_with(&self.names[i], truth, ts_ms, rng) {
                Ok(report) => out.push(DeviceReport {
                    device: i as u32,
                    truth,
                    ts_ms,
                    report,
                }),
                Err(DeviceError::MemoFull { .. }) => self.stopped += 1,
                Err(DeviceError::Stopped { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        self.next += 1;
        self.periods += 1;
        Ok(out)
    }
}
