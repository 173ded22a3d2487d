//! Certificates generated per test run (the vendored OpenSSL `serve` links): a CA, a
//! server certificate it signed for 127.0.0.1 and localhost, and an unrelated CA.

use std::path::Path;

use openssl::asn1::Asn1Time;
use openssl::bn::{BigNum, MsbOption};
use openssl::hash::MessageDigest;
use openssl::pkey::{PKey, Private};
use openssl::rsa::Rsa;
use openssl::x509::extension::{BasicConstraints, SubjectAlternativeName};
use openssl::x509::{X509Builder, X509NameBuilder, X509};

pub fn key() -> PKey<Private> {
    PKey::from_rsa(Rsa::generate(2048).unwrap()).unwrap()
}

pub fn certificate(cn: &str, key: &PKey<Private>, issuer: Option<(&X509, &PKey<Private>)>) -> X509 {
    let mut name = X509NameBuilder::new().unwrap();
    name.append_entry_by_text("CN", cn).unwrap();
    let name = name.build();
    let mut b = X509Builder::new().unwrap();
    b.set_version(2).unwrap();
    let mut serial = BigNum::new().unwrap();
    serial.rand(64, MsbOption::MAYBE_ZERO, false).unwrap();
    b.set_serial_number(&serial.to_asn1_integer().unwrap())
        .unwrap();
    b.set_subject_name(&name).unwrap();
    b.set_pubkey(key).unwrap();
    b.set_not_before(&Asn1Time::days_from_now(0).unwrap())
        .unwrap();
    b.set_not_after(&Asn1Time::days_from_now(2).unwrap())
        .unwrap();
    match issuer {
        None => {
            b.set_issuer_name(&name).unwrap();
            b.append_extension(BasicConstraints::new().critical().ca().build().unwrap())
                .unwrap();
            b.sign(key, MessageDigest::sha256()).unwrap();
        }
        Some((ca, ca_key)) => {
            b.set_issuer_name(ca.subject_name()).unwrap();
            let san = SubjectAlternativeName::new()
                .ip("127.0.0.1")
                .dns("localhost")
                .build(&b.x509v3_context(Some(ca), None))
                .unwrap();
            b.append_extension(san).unwrap();
            b.sign(ca_key, MessageDigest::sha256()).unwrap();
        }
    }
    b.build()
}

/// Writes a CA (`ca.pem`), a broker certificate it signed (`broker.pem`, `broker.key`) and
/// an unrelated CA (`other-ca.pem`) into `dir`.
pub fn tls_files(dir: &Path) {
    let ca_key = key();
    let ca = certificate("ldpstream test CA", &ca_key, None);
    let broker_key = key();
    let broker = certificate("127.0.0.1", &broker_key, Some((&ca, &ca_key)));
    let other = certificate("some other CA", &key(), None);
    std::fs::write(dir.join("ca.pem"), ca.to_pem().unwrap()).unwrap();
    std::fs::write(dir.join("other-ca.pem"), other.to_pem().unwrap()).unwrap();
    std::fs::write(dir.join("broker.pem"), broker.to_pem().unwrap()).unwrap();
    std::fs::write(
        dir.join("broker.key"),
        broker_key.private_key_to_pem_pkcs8().unwrap(),
    )
    .unwrap();
}
