//! The one spelling of a SHA-256 digest in ldpstream's files: `sha256:` and 64 lowercase
//! hex digits (sketch files' input identities, the ledger's checksum).

/// `sha256:<hex>` of `digest`.
pub fn sha256_label(digest: &[u8; 32]) -> String {
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}
