//! HTTP access control and operability of `serve`: a bearer token (from the environment
//! variable `serve.auth_token_env`) guards every route but the probes; off loopback, HTTP
//! needs a token or an explicit `allow_unauthenticated`; the token never appears in the
//! output; process metrics, `ldpstream_build_info` and `--log-format json`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::{bin, Serve};

const TOKEN: &str = "s3cr3t-t0ken-4f8a1c";

fn config(dir: &Path, serve_keys: &str) -> PathBuf {
    let path = dir.join("c.toml");
    std::fs::write(
        &path,
        format!(
            r#"
[serve]
snapshot_interval = "200ms"
sink = [{{ kind = "jsonl", path = "{}" }}]
{serve_keys}
[[stream]]
name = "sim"
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 4 }}
source = {{ kind = "simulator", rate = 1000.0, seed = 1 }}
[[stream.test]]
name = "gof"
kind = "gof"
null = "uniform"
"#,
            dir.join("out.jsonl").display()
        ),
    )
    .unwrap();
    path
}

#[test]
fn a_bearer_token_guards_every_route_but_the_probes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "auth_token_env = \"LDPSTREAM_TEST_TOKEN\"");
    let mut serve = Serve::start_with_env(
        &cfg,
        &["--duration", "3s"],
        &[("LDPSTREAM_TEST_TOKEN", TOKEN), ("RUST_LOG", "debug")],
    );
    let right = format!("Authorization: Bearer {TOKEN}\r\n");
    for path in [
        "/metrics",
        "/api/v1/results",
        "/api/v1/streams",
        "/api/v1/history",
        "/",
    ] {
        let (status, head, body) = serve.request(path, "");
        assert_eq!(status, 401, "{path} without a token: {head}");
        assert!(
            head.contains("www-authenticate: Bearer") || head.contains("WWW-Authenticate: Bearer"),
            "{head}"
        );
        assert!(!body.contains(TOKEN));
        let wrong = format!("Authorization: Bearer {TOKEN}x\r\n");
        assert_eq!(
            serve.request(path, &wrong).0,
            401,
            "{path} with a wrong token"
        );
        assert_eq!(
            serve
                .request(path, "Authorization: Basic dXNlcjpwYXNz\r\n")
                .0,
            401,
            "{path} with another scheme"
        );
        assert_eq!(serve.request(path, &right).0, 200, "{path} with the token");
    }
    for probe in ["/healthz", "/readyz"] {
        let (status, _, _) = serve.request(probe, "");
        assert!(status == 200 || status == 503, "{probe}: {status}");
    }
    let (_, _, metrics) = serve.request("/metrics", &right);
    assert!(
        metrics.contains("process_resident_memory_bytes"),
        "process metrics"
    );
    assert!(
        metrics.contains(&format!(
            "ldpstream_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        )),
        "build info"
    );
    assert!(serve.wait(Duration::from_secs(60)).success());
    // Even at debug level, the token appears in no log line and no record.
    let log = serve.stderr.lock().unwrap().clone();
    assert!(!log.contains(TOKEN), "the token was logged");
    let out = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
    assert!(!out.contains(TOKEN));
}

#[test]
fn off_loopback_http_needs_a_token_or_an_explicit_opt_out() {
    let dir = tempfile::tempdir().unwrap();
    let run = |cfg: &Path, env: &[(&str, &str)]| {
        Command::new(bin())
            .args(["serve", "--config", cfg.to_str().unwrap()])
            .args(["--listen", "0.0.0.0:0", "--duration", "1s"])
            .envs(env.iter().copied())
            .output()
            .unwrap()
    };
    let refused = run(&config(dir.path(), ""), &[]);
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("0.0.0.0")
            && err.contains("auth_token_env")
            && err.contains("allow_unauthenticated"),
        "{err}"
    );

    let opted_out = run(&config(dir.path(), "allow_unauthenticated = true"), &[]);
    assert!(opted_out.status.success());
    let err = String::from_utf8_lossy(&opted_out.stderr);
    assert!(err.contains("without a token"), "no warning: {err}");

    let cfg = config(dir.path(), "auth_token_env = \"LDPSTREAM_TEST_TOKEN\"");
    assert!(run(&cfg, &[("LDPSTREAM_TEST_TOKEN", TOKEN)])
        .status
        .success());
    // A missing token variable is the user's mistake, named, and stops the start.
    let missing = run(&cfg, &[]);
    assert_eq!(missing.status.code(), Some(2));
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(err.contains("LDPSTREAM_TEST_TOKEN"), "{err}");
}

#[test]
fn log_format_json_writes_one_object_per_line() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(bin())
        .args(["--log-format", "json", "serve", "--config"])
        .arg(config(dir.path(), ""))
        .args(["--listen", "127.0.0.1:0", "--duration", "1s"])
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    let logs: Vec<serde_json::Value> = err
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert!(!logs.is_empty(), "{err}");
    assert!(logs
        .iter()
        .all(|l| l["level"].is_string() && l["fields"]["message"].is_string()));
}

/// The probe's idle_connections_exhaust_fds: connections that never finish their headers
/// were held for over 90 s without limit, until the descriptor limit stopped /healthz and
/// every checkpoint. Now at most 256 are served at once and each must send its headers
/// within 10 s, so idle ones are closed and /healthz answers again.
#[test]
fn idle_connections_are_closed_and_cannot_starve_the_probes() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "");
    let serve = Serve::start(&cfg, &["--duration", "40s"]);
    // More idle connections than the server serves at once; each sends half a request.
    let idle: Vec<std::net::TcpStream> = (0..300)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(&serve.addr).unwrap();
            std::io::Write::write_all(&mut s, b"GET /metrics HTTP/1.1\r\n").unwrap();
            s
        })
        .collect();
    // The server closes the first one once its header time is up (10 s), well before the
    // 90 s the probe saw.
    let mut first = idle[0].try_clone().unwrap();
    first
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let started = std::time::Instant::now();
    let mut buf = [0u8; 1024];
    let closed = loop {
        match first.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
            Err(_) => break false,
        }
    };
    assert!(
        closed,
        "an idle connection was still open after {:?}",
        started.elapsed()
    );
    // Every slot is free again: the probe answers.
    let (status, body) = serve.get("/healthz");
    assert_eq!((status, body.as_str()), (200, "ok\n"));
    drop(idle);
}
