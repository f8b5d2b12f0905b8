//! The byte layer of the protocol: a growable writer and a bounded reader of
//! little-endian fields.
//!
//! The reader never allocates from a length it reads: a byte string is a
//! slice of the message, taken only after checking that the message holds
//! that many bytes, and a list's element count is checked against the bytes
//! left (every element takes at least `min_bytes`) and a limit before its
//! caller reserves room for it. Running out of bytes, a length past the end
//! and trailing bytes are each a [`WireError`].

use std::fmt;

/// A message that does not decode: what was being read and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError(pub String);

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WireError {}

/// Builds a [`WireError`] from a format string.
macro_rules! wire_err {
    ($($arg:tt)*) => { $crate::wire::WireError(format!($($arg)*)) };
}
pub(crate) use wire_err;

/// Appends fields to a message.
#[derive(Debug, Default, Clone)]
pub struct Writer {
    bytes: Vec<u8>,
}

impl Writer {
    /// An empty message.
    pub fn new() -> Self {
        Self::default()
    }

    /// The bytes written so far.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// The bytes written so far, borrowed.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// One byte.
    pub fn u8(&mut self, v: u8) {
        self.bytes.push(v);
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self, v: u32) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self, v: u64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    /// A `usize` as a little-endian `u64`.
    pub fn usize(&mut self, v: usize) {
        self.u64(v as u64);
    }

    /// An `f32` by its bits (NaN payloads survive).
    pub fn f32(&mut self, v: f32) {
        self.u32(v.to_bits());
    }

    /// A byte string: its `u32` length, then the bytes. Longer strings
    /// cannot be messages (they are cut off by the message limit anyway).
    pub fn bytes(&mut self, v: &[u8]) {
        self.u32(u32::try_from(v.len()).unwrap_or(u32::MAX));
        self.bytes.extend_from_slice(v);
    }

    /// A string, as [`Writer::bytes`] of its UTF-8.
    pub fn str(&mut self, v: &str) {
        self.bytes(v.as_bytes());
    }

    /// Raw bytes with no length (fixed-size fields such as digests).
    pub fn raw(&mut self, v: &[u8]) {
        self.bytes.extend_from_slice(v);
    }
}

/// Reads fields from one message, never past its end.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader over a whole message.
    pub fn new(data: &'a [u8]) -> Self {
        Self { data, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// The next `n` bytes, or an error naming `what` when the message is shorter.
    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], WireError> {
        if n > self.remaining() {
            return Err(wire_err!(
                "{what}: needs {n} bytes at offset {}, the message has {} left",
                self.pos,
                self.remaining()
            ));
        }
        let out = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], WireError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    /// One byte.
    pub fn u8(&mut self, what: &str) -> Result<u8, WireError> {
        Ok(self.array::<1>(what)?[0])
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self, what: &str) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self, what: &str) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A `u64` that must fit a `usize`.
    pub fn usize(&mut self, what: &str) -> Result<usize, WireError> {
        let v = self.u64(what)?;
        usize::try_from(v).map_err(|_| wire_err!("{what}: {v} does not fit this machine's usize"))
    }

    /// An `f32` from its bits.
    pub fn f32(&mut self, what: &str) -> Result<f32, WireError> {
        Ok(f32::from_bits(self.u32(what)?))
    }

    /// A boolean byte (0 or 1; anything else is an error).
    pub fn bool(&mut self, what: &str) -> Result<bool, WireError> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(wire_err!("{what}: {v} is not a boolean (0 or 1)")),
        }
    }

    /// A byte string of at most `max` bytes, borrowed from the message.
    pub fn bytes(&mut self, max: usize, what: &str) -> Result<&'a [u8], WireError> {
        let n = self.u32(what)? as usize;
        if n > max {
            return Err(wire_err!("{what}: {n} bytes, more than the limit of {max}"));
        }
        self.take(n, what)
    }

    /// A UTF-8 string of at most `max` bytes, borrowed from the message.
    pub fn str(&mut self, max: usize, what: &str) -> Result<&'a str, WireError> {
        let b = self.bytes(max, what)?;
        std::str::from_utf8(b).map_err(|e| wire_err!("{what}: not UTF-8 ({e})"))
    }

    /// A list length: at most `max` elements, and no more than the bytes
    /// left can hold at `min_bytes` each, so that reserving room for the
    /// list is bounded by the message's size.
    pub fn count(&mut self, max: usize, min_bytes: usize, what: &str) -> Result<usize, WireError> {
        let n = self.u32(what)? as usize;
        if n > max {
            return Err(wire_err!("{what}: {n} elements, more than the limit of {max}"));
        }
        if n.saturating_mul(min_bytes.max(1)) > self.remaining() {
            return Err(wire_err!(
                "{what}: {n} elements cannot fit in the {} bytes left of the message",
                self.remaining()
            ));
        }
        Ok(n)
    }

    /// Ends the message: trailing bytes are an error (a message means one thing).
    pub fn finish(&self, what: &str) -> Result<(), WireError> {
        if self.remaining() == 0 {
            Ok(())
        } else {
            Err(wire_err!("{what}: {} unexpected bytes after the end of the message", self.remaining()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        let mut w = Writer::new();
        w.u8(7);
        w.u32(0xdead_beef);
        w.u64(u64::MAX - 1);
        w.f32(f32::NAN);
        w.str("héllo");
        w.raw(&[1, 2, 3]);
        let bytes = w.into_bytes();
        let mut r = Reader::new(&bytes);
        assert_eq!(r.u8("a").unwrap(), 7);
        assert_eq!(r.u32("b").unwrap(), 0xdead_beef);
        assert_eq!(r.u64("c").unwrap(), u64::MAX - 1);
        assert!(r.f32("d").unwrap().is_nan());
        assert_eq!(r.str(16, "e").unwrap(), "héllo");
        assert_eq!(r.take(3, "f").unwrap(), &[1, 2, 3]);
        r.finish("message").unwrap();
    }

    #[test]
    fn lengths_are_checked_before_anything_is_taken() {
        let mut w = Writer::new();
        w.u32(u32::MAX); // a string "of 4 GiB" in a message of 4 bytes
        let bytes = w.into_bytes();
        let err = Reader::new(&bytes).bytes(usize::MAX, "name").unwrap_err();
        assert!(err.0.contains("name") && err.0.contains("4294967295"), "{err}");
        let err = Reader::new(&bytes).bytes(63, "name").unwrap_err();
        assert!(err.0.contains("limit of 63"), "{err}");
        let err = Reader::new(&bytes).count(usize::MAX, 1, "tensors").unwrap_err();
        assert!(err.0.contains("cannot fit"), "{err}");
        assert!(Reader::new(&[1, 2]).u32("x").is_err());
        assert!(Reader::new(&[2]).bool("flag").is_err());
        let err = Reader::new(&[2, 0, 0, 0, 0xff, 0xfe]).str(8, "s").unwrap_err();
        assert!(err.0.contains("UTF-8"), "{err}");
        let r = Reader::new(&[1]);
        assert!(r.finish("m").unwrap_err().0.contains("1 unexpected"));
    }
}
