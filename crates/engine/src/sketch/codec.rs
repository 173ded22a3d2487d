//! Little-endian reading and writing shared by the sketch serializations.

use crate::error::EngineError;

/// The header every sketch body starts with: the table length d (u32), then n (u64).
pub(crate) fn write_header(out: &mut Vec<u8>, d: usize, n: u64) {
    // Domains are bounded by the config far below u32::MAX.
    out.extend_from_slice(&(d as u32).to_le_bytes());
    out.extend_from_slice(&n.to_le_bytes());
}

pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes }
    }

    pub(crate) fn take(&mut self, len: usize, what: &str) -> Result<&'a [u8], EngineError> {
        if self.bytes.len() < len {
            return Err(EngineError::Corrupt(format!(
                "truncated while reading {what}: need {len} bytes, have {}",
                self.bytes.len()
            )));
        }
        let (head, tail) = self.bytes.split_at(len);
        self.bytes = tail;
        Ok(head)
    }

    pub(crate) fn u8(&mut self, what: &str) -> Result<u8, EngineError> {
        Ok(self.take(1, what)?[0])
    }

    pub(crate) fn u32(&mut self, what: &str) -> Result<u32, EngineError> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn u64(&mut self, what: &str) -> Result<u64, EngineError> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    pub(crate) fn u64s(&mut self, count: usize, what: &str) -> Result<Vec<u64>, EngineError> {
        let len = count
            .checked_mul(8)
            .ok_or_else(|| EngineError::Corrupt(format!("{what}: length {count} overflows")))?;
        Ok(self
            .take(len, what)?
            .chunks_exact(8)
            .map(|c| {
                let mut a = [0u8; 8];
                a.copy_from_slice(c);
                u64::from_le_bytes(a)
            })
            .collect())
    }

    pub(crate) fn finish(self) -> Result<(), EngineError> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(EngineError::Corrupt(format!(
                "{} trailing bytes",
                self.bytes.len()
            )))
        }
    }
}
