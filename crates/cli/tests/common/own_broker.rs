//! A broker a test starts for itself (Tansu, the binary scripts/test.sh exports as
//! LDPSTREAM_TANSU), and deploy/kafka/proxy.py in front of it: for tests that need a broker
//! configured otherwise than the suite's shared one, or one they can cut off.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A child process killed on drop.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The broker binary, or None (said loudly) when the suite runs without it.
/// The broker binary, for the tests that start brokers of their own (TLS, SASL, outage).
/// Like `kafka::brokers`, a missing one fails the test.
pub fn tansu() -> PathBuf {
    match std::env::var("LDPSTREAM_TANSU") {
        Ok(t) if !t.is_empty() => PathBuf::from(t),
        _ => panic!(
            "the kafka-integration-tests feature is on but LDPSTREAM_TANSU is not set: run \
             ./scripts/test.sh (it installs the broker)"
        ),
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn wait_for_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A broker listening on `listen` and advertising `advertise` (a proxy's port, or itself).
pub fn broker(tansu: &Path, listen: u16, advertise: u16, extra: &[&str]) -> Proc {
    let mut extra_with_storage = vec!["--storage-engine", "memory://tansu/"];
    extra_with_storage.extend_from_slice(extra);
    broker_in(
        tansu,
        Path::new("."),
        listen,
        advertise,
        &extra_with_storage,
    )
}

/// [`broker`] started in `cwd` with the storage engine given in `extra` (Tansu resolves a
/// `sqlite://` path against its working directory).
pub fn broker_in(tansu: &Path, cwd: &Path, listen: u16, advertise: u16, extra: &[&str]) -> Proc {
    let child = Command::new(tansu)
        .current_dir(cwd)
        .arg("broker")
        .args(["--listener-url", &format!("tcp://127.0.0.1:{listen}")])
        .args([
            "--advertised-listener-url",
            &format!("tcp://127.0.0.1:{advertise}"),
        ])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("tansu starts");
    wait_for_port(listen);
    Proc(child)
}

/// deploy/kafka/proxy.py on `listen` in front of `target`: plain, or terminating TLS with
/// `tls` = (certificate, key).
pub fn proxy(listen: u16, target: u16, tls: Option<(&Path, &Path)>) -> Proc {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kafka/proxy.py");
    let mut command = Command::new("python3");
    command
        .arg(script)
        .arg(listen.to_string())
        .arg(format!("127.0.0.1:{target}"));
    if let Some((cert, key)) = tls {
        command.arg(cert).arg(key);
    }
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3 runs the proxy");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready", "the proxy did not start");
    Proc(child)
}

pub fn create_topic(tansu: &Path, port: u16, topic: &str, partitions: u32) {
    let status = Command::new(tansu)
        .args(["topic", "create", "--broker"])
        .arg(format!("tcp://127.0.0.1:{port}"))
        .args(["--partitions", &partitions.to_string(), topic])
        .status()
        .unwrap();
    assert!(status.success(), "tansu topic create {topic}");
}
