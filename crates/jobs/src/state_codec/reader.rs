//! Reads the encoding field by field; every short or malformed read is an error naming
//! the field and the input (`origin`), never a panic.

use ldpstream_engine::sketch::Sketch;
use ldpstream_engine::window::{GroupKey, Grouped};

use crate::error::Error;

/// Reads a checkpoint; `origin` names it in errors.
pub(super) struct Reader<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) origin: &'a str,
}

impl<'a> Reader<'a> {
    pub(super) fn corrupt(&self, what: &str) -> Error {
        Error::Checkpoint {
            path: self.origin.to_string(),
            message: format!("corrupt: truncated or malformed while reading {what}"),
        }
    }

    pub(super) fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Error> {
        if self.bytes.len() < n {
            return Err(self.corrupt(what));
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    pub(super) fn u8(&mut self, what: &str) -> Result<u8, Error> {
        Ok(self.take(1, what)?[0])
    }

    pub(super) fn u32(&mut self, what: &str) -> Result<u32, Error> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(super) fn u64(&mut self, what: &str) -> Result<u64, Error> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8, what)?);
        Ok(u64::from_le_bytes(a))
    }

    pub(super) fn i64(&mut self, what: &str) -> Result<i64, Error> {
        Ok(self.u64(what)? as i64)
    }

    pub(super) fn opt(&mut self, what: &str) -> Result<Option<i64>, Error> {
        let flag = self.u8(what)?;
        let v = self.i64(what)?;
        Ok((flag != 0).then_some(v))
    }

    pub(super) fn string(&mut self, what: &str) -> Result<String, Error> {
        let n = self.u32(what)? as usize;
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec()).map_err(|_| self.corrupt(what))
    }

    pub(super) fn grouped(&mut self) -> Result<Grouped, Error> {
        let groups = self.u32("group count")?;
        let mut g = Grouped::new();
        for _ in 0..groups {
            let cols = self.u32("group key")?;
            let mut key: GroupKey = Vec::new();
            for _ in 0..cols {
                let present = self.u8("group key value")? != 0;
                let v = self.string("group key value")?;
                key.push(present.then_some(v));
            }
            let n = self.u32("sketch length")? as usize;
            let bytes = self.take(n, "sketch")?;
            let sketch = Sketch::from_bytes(bytes).map_err(|e| Error::Checkpoint {
                path: self.origin.to_string(),
                message: format!("corrupt sketch: {e}"),
            })?;
            // A second sketch under one key would silently replace the first.
            if g.contains_key(&key) {
                return Err(Error::Checkpoint {
                    path: self.origin.to_string(),
                    message: format!("corrupt: group {key:?} is stored twice"),
                });
            }
            g.insert(key, sketch);
        }
        Ok(g)
    }
}
