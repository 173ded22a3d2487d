//! The `serve` child-process harness shared by the integration tests.
// Each test crate uses a different subset of these helpers.
#![allow(dead_code)]

pub mod certs;
pub mod cli;
pub mod kafka;
pub mod own_broker;
pub mod serve;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;
use arrow_array::{ArrayRef, StringArray, TimestampMillisecondArray, UInt32Array};
use arrow_schema::{Field, Schema};
use parquet::arrow::ArrowWriter;

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_ldpstream")
}

/// A `serve` child on a free loopback port; killed on drop if still running.
pub struct Serve {
    pub child: Child,
    pub addr: String,
    /// Everything serve has written to stderr so far.
    pub stderr: Arc<Mutex<String>>,
    /// The thread relaying stderr: it ends at the pipe's end, after serve's last line.
    relay: Option<std::thread::JoinHandle<()>>,
}

impl Serve {
    /// Starts `serve --config config --listen 127.0.0.1:0 [extra]` and reads the address it
    /// prints. Its later stderr is relayed to the test's, so a failure shows the service's log.
    pub fn start(config: &Path, extra: &[&str]) -> Serve {
        Self::start_with_env(config, extra, &[])
    }

    /// [`Serve::start`] with extra environment variables for the child.
    pub fn start_with_env(config: &Path, extra: &[&str], env: &[(&str, &str)]) -> Serve {
        let mut child = Command::new(bin())
            .args(["serve", "--config", config.to_str().unwrap()])
            .args(["--listen", "127.0.0.1:0"])
            .args(extra)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("serve starts");
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut addr = None;
        let mut line = String::new();
        let mut seen = String::new();
        while stderr.read_line(&mut line).unwrap() > 0 {
            seen.push_str(&line);
            // http:// or, with serve.tls, https://
            if let Some((_, rest)) = line
                .trim()
                .strip_prefix("ldpstream serve: listening on ")
                .and_then(|url| url.split_once("://"))
            {
                addr = Some(rest.to_string());
                break;
            }
            line.clear();
        }
        // Keep draining stderr so the child never blocks on a full pipe.
        let log = Arc::new(Mutex::new(seen));
        let sink = log.clone();
        let relay = std::thread::spawn(move || {
            let mut line = String::new();
            while stderr.read_line(&mut line).unwrap_or(0) > 0 {
                eprint!("serve stderr: {line}");
                sink.lock().unwrap().push_str(&line);
                line.clear();
            }
        });
        Serve {
            child,
            addr: addr.expect("serve prints its address"),
            stderr: log,
            relay: Some(relay),
        }
    }

    /// Status and body of `GET path`; status 0 when the endpoint is not answering.
    pub fn get(&self, path: &str) -> (u16, String) {
        let (status, _, body) = self.get_with_head(path);
        (status, body)
    }

    /// Status, response head (status line and headers) and body of `GET path`.
    pub fn get_with_head(&self, path: &str) -> (u16, String, String) {
        self.request(path, "")
    }

    /// `GET path` with extra header lines (each ending in `\r\n`).
    pub fn request(&self, path: &str, headers: &str) -> (u16, String, String) {
        let Ok(mut s) = TcpStream::connect(&self.addr) else {
            return (0, String::new(), String::new());
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
        let _ = write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {}\r\n{headers}Connection: close\r\n\r\n",
            self.addr
        );
        let mut text = String::new();
        let _ = s.read_to_string(&mut text);
        let Some((head, body)) = text.split_once("\r\n\r\n") else {
            return (0, String::new(), String::new());
        };
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        (status, head.to_string(), body.to_string())
    }

    /// `ldpstream_reports_total` of the (first) stream, or 0 when not answering.
    pub fn reports_total(&self) -> f64 {
        sample(&self.get("/metrics").1, "ldpstream_reports_total", "").unwrap_or(0.0)
    }

    /// The exit status, once serve has exited and its last stderr line is in `stderr`
    /// (the process can end before the relay has read the pipe to its end).
    pub fn wait(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                self.drain_stderr(deadline);
                return s;
            }
            assert!(Instant::now() < deadline, "serve did not finish");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the stderr relay to reach the pipe's end, until `deadline` (a process
    /// serve started could hold the pipe open).
    fn drain_stderr(&mut self, deadline: Instant) {
        while let Some(relay) = self.relay.take() {
            if relay.is_finished() {
                let _ = relay.join();
            } else if Instant::now() < deadline {
                self.relay = Some(relay);
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    /// SIGTERM, then the exit status.
    pub fn terminate(&mut self, within: Duration) -> ExitStatus {
        let pid = self.child.id().to_string();
        let killed = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(killed.success());
        self.wait(within)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The value of the sample `name{labels}` in Prometheus text, where `labels` is a substring
/// of the label set (`""` also matches a sample without labels).
pub fn sample(text: &str, name: &str, labels: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| {
            (l.starts_with(&format!("{name}{{")) && l.contains(labels))
                || (labels.is_empty() && l.starts_with(&format!("{name} ")))
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// `ldpstream simulate ARGS --out out`, which must succeed.
pub fn simulate(args: &[&str], out: &Path) {
    let o = Command::new(bin())
        .arg("simulate")
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .expect("simulate runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Waits until `check` returns Some, polling every 100 ms.
pub fn eventually<T>(what: &str, within: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A Parquet file of GenRR-style reports with UTC event times and, optionally, a `g`
/// group column.
pub fn write_timed_reports(
    path: &Path,
    reports: Vec<u32>,
    ts: Vec<i64>,
    groups: Option<Vec<String>>,
) {
    let mut columns: Vec<(&str, ArrayRef)> = vec![
        ("report", Arc::new(UInt32Array::from(reports))),
        (
            "ts",
            Arc::new(TimestampMillisecondArray::from(ts).with_timezone("UTC")),
        ),
    ];
    if let Some(g) = groups {
        columns.push(("g", Arc::new(StringArray::from(g))));
    }
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .map(|(n, a)| Field::new(*n, a.data_type().clone(), false))
            .collect::<Vec<_>>(),
    ));
    let batch = RecordBatch::try_new(
        schema.clone(),
        columns.into_iter().map(|(_, a)| a).collect(),
    )
    .unwrap();
    let mut w = ArrowWriter::try_new(std::fs::File::create(path).unwrap(), schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

/// The one final record in a JSON-lines sink file (asserting there is exactly one).
pub fn final_record(path: &Path) -> serde_json::Value {
    let finals: Vec<serde_json::Value> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["final"] == true)
        .collect();
    assert_eq!(finals.len(), 1, "{finals:?}");
    finals.into_iter().next().unwrap()
}
