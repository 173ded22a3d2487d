//! HTTPS for `serve`'s endpoint (`serve.tls`): a client that trusts the CA gets every
//! route (behind the bearer token as over HTTP), a plain-HTTP client and a client that
//! does not trust the certificate get nothing, and a missing, unreadable or mismatched
//! certificate or key is refused at startup with exit 2, naming the key and the file.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use openssl::ssl::{SslConnector, SslMethod, SslVerifyMode};

use crate::common::certs::{key, tls_files};
use crate::common::{bin, Serve};

const TOKEN: &str = "tls-t0ken-9b2e77";

fn config(dir: &Path, cert: &Path, key: &Path) -> PathBuf {
    let path = dir.join("c.toml");
    std::fs::write(
        &path,
        format!(
            r#"
[serve]
snapshot_interval = "200ms"
auth_token_env = "LDPSTREAM_TLS_TEST_TOKEN"
tls = {{ cert = "{cert}", key = "{key}" }}
sink = [{{ kind = "jsonl", path = "{out}" }}]
[[stream]]
name = "sim"
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 4 }}
source = {{ kind = "simulator", rate = 1000.0, seed = 1 }}
[[stream.test]]
name = "gof"
kind = "gof"
null = "uniform"
"#,
            cert = cert.display(),
            key = key.display(),
            out = dir.join("out.jsonl").display()
        ),
    )
    .unwrap();
    path
}

/// `GET path` over TLS, verifying the server against `ca` as `localhost`: status and body,
/// or the handshake error.
fn https_get(
    addr: &str,
    ca: Option<&Path>,
    path: &str,
    auth: bool,
) -> Result<(u16, String), String> {
    let mut builder = SslConnector::builder(SslMethod::tls_client()).unwrap();
    builder.set_verify(SslVerifyMode::PEER);
    if let Some(ca) = ca {
        builder.set_ca_file(ca).unwrap();
    }
    let tcp = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut tls = builder
        .build()
        .connect("localhost", tcp)
        .map_err(|e| e.to_string())?;
    let header = if auth {
        format!("Authorization: Bearer {TOKEN}\r\n")
    } else {
        String::new()
    };
    write!(
        tls,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\n{header}Connection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut text = String::new();
    // The server may close without close_notify; what was read is still the response.
    let _ = tls.read_to_string(&mut text);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no HTTP response: {text:?}"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line: {head}"))?;
    Ok((status, body.to_string()))
}

#[test]
fn serves_https_to_a_client_that_trusts_the_ca_and_nothing_to_others() {
    let dir = tempfile::tempdir().unwrap();
    tls_files(dir.path());
    let ca = dir.path().join("ca.pem");
    let cfg = config(
        dir.path(),
        &dir.path().join("broker.pem"),
        &dir.path().join("broker.key"),
    );
    let mut serve = Serve::start_with_env(
        &cfg,
        &["--duration", "4s"],
        &[("LDPSTREAM_TLS_TEST_TOKEN", TOKEN)],
    );
    assert!(
        serve
            .stderr
            .lock()
            .unwrap()
            .contains("listening on https://"),
        "serve announces https"
    );
    let (status, body) = https_get(&serve.addr, Some(&ca), "/metrics", true).unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("ldpstream_build_info"), "{body}");
    let (status, _) = https_get(&serve.addr, Some(&ca), "/healthz", false).unwrap();
    assert_eq!(status, 200, "the liveness probe needs no token");
    let (status, _) = https_get(&serve.addr, Some(&ca), "/metrics", false).unwrap();
    assert_eq!(status, 401, "TLS does not replace the token");

    // Plain HTTP to the TLS port gets no HTTP response.
    let (status, head, _) = serve.request("/healthz", "");
    assert_eq!(status, 0, "plain HTTP answered: {head}");
    // A client trusting another CA fails the handshake.
    let other = https_get(
        &serve.addr,
        Some(&dir.path().join("other-ca.pem")),
        "/healthz",
        false,
    );
    assert!(
        matches!(&other, Err(e) if e.contains("certificate verify failed")),
        "{other:?}"
    );
    // And the server still answers after both.
    let (status, _) = https_get(&serve.addr, Some(&ca), "/healthz", false).unwrap();
    assert_eq!(status, 200);
    let status = serve.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

fn refused(cfg: &Path) -> (Option<i32>, String) {
    let out = Command::new(bin())
        .args(["serve", "--config", cfg.to_str().unwrap()])
        .args(["--listen", "127.0.0.1:0", "--duration", "2s"])
        .env("LDPSTREAM_TLS_TEST_TOKEN", TOKEN)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_missing_garbled_or_mismatched_certificate_or_key_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    tls_files(dir.path());
    let (cert, good_key) = (dir.path().join("broker.pem"), dir.path().join("broker.key"));
    let missing = dir.path().join("nope.key");
    let garbled = dir.path().join("garbled.pem");
    std::fs::write(&garbled, "-----BEGIN CERTIFICATE-----\nnot base64!\n").unwrap();
    let other_key = dir.path().join("other.key");
    std::fs::write(&other_key, key().private_key_to_pem_pkcs8().unwrap()).unwrap();
    // An encrypted key made OpenSSL prompt for its pass phrase on the terminal: serve hung.
    let encrypted = dir.path().join("encrypted.key");
    let good = openssl::pkey::PKey::private_key_from_pem(&std::fs::read(&good_key).unwrap())
        .unwrap()
        .private_key_to_pem_pkcs8_passphrase(openssl::symm::Cipher::aes_256_cbc(), b"pw")
        .unwrap();
    std::fs::write(&encrypted, good).unwrap();

    let cases: [(&Path, &Path, &str, &Path, &str); 5] = [
        (&cert, &missing, "serve.tls.key", &missing, "No such file"),
        (
            &garbled,
            &good_key,
            "serve.tls.cert",
            &garbled,
            "not a PEM certificate",
        ),
        (
            &cert,
            &garbled,
            "serve.tls.key",
            &garbled,
            "not an unencrypted PEM private key",
        ),
        (
            &cert,
            &other_key,
            "serve.tls.key",
            &other_key,
            "does not match the certificate",
        ),
        (
            &cert,
            &encrypted,
            "serve.tls.key",
            &encrypted,
            "an encrypted private key",
        ),
    ];
    for (c, k, key_name, named, why) in cases {
        let cfg = config(dir.path(), c, k);
        let (code, stderr) = refused(&cfg);
        assert_eq!(code, Some(2), "{key_name} {}: {stderr}", named.display());
        assert!(
            stderr.contains(key_name) && stderr.contains(&named.display().to_string()),
            "names {key_name} and the file: {stderr}"
        );
        assert!(stderr.contains(why), "says why ({why}): {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn an_empty_tls_path_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), Path::new(""), Path::new("k.pem"));
    let (code, stderr) = refused(&cfg);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("serve.tls.cert"), "{stderr}");
}
