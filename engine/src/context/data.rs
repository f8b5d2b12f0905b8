//! Reading, writing and copying tensor bytes.

use gantry_arenas::TensorId;

use super::{BufferEntry, Context, Placement};
use crate::{DType, Error, Result, check_range};

impl Context {
    /// `t`'s buffer and placement for an access of `len` bytes at `offset`
    /// inside the tensor; `None` for an empty access, which needs no memory
    /// (ggml's set/get/memset of zero bytes return before looking at the
    /// buffer, so a tensor without memory takes them quietly).
    fn check_tensor_range(&self, t: TensorId, offset: usize, len: usize) -> Result<Option<(&BufferEntry, Placement)>> {
        let nbytes = self.desc(t)?.nbytes();
        if offset.checked_add(len).is_none_or(|end| end > nbytes) {
            // Only the failing path pays for the description.
            check_range(&self.describe(t), nbytes, offset, len)?;
        }
        if len == 0 {
            return Ok(None);
        }
        self.tensor_buffer(t).map(Some)
    }

    /// Writes `data` into `t`'s bytes at `offset` (within `nbytes`). Writing
    /// nothing succeeds even when `t` has no memory.
    pub fn write_tensor_bytes(&self, t: TensorId, offset: usize, data: &[u8]) -> Result<()> {
        let Some((entry, p)) = self.check_tensor_range(t, offset, data.len())? else { return Ok(()) };
        if !entry.buffer.is_writable() {
            return Err(Error::Unsupported(format!("tensor {} is in read-only memory", self.describe(t))));
        }
        entry.buffer.write(p.offset + offset, data)
    }

    /// Writes all of `t`'s bytes from where its buffer's device already has
    /// them ([`crate::Buffer::write_from_cache`]): `Ok(false)` when it has
    /// not, and nothing was written. Writing nothing succeeds even when `t`
    /// has no memory.
    pub fn write_tensor_from_cache(&self, t: TensorId, data: &[u8]) -> Result<bool> {
        let Some((entry, p)) = self.check_tensor_range(t, 0, data.len())? else { return Ok(true) };
        if !entry.buffer.is_writable() {
            return Err(Error::Unsupported(format!("tensor {} is in read-only memory", self.describe(t))));
        }
        entry.buffer.write_from_cache(p.offset, data)
    }

    /// Reads `out.len()` bytes of `t` at `offset` (within `nbytes`); reading
    /// nothing succeeds even when `t` has no memory.
    pub fn read_tensor_bytes(&self, t: TensorId, offset: usize, out: &mut [u8]) -> Result<()> {
        let Some((entry, p)) = self.check_tensor_range(t, offset, out.len())? else { return Ok(()) };
        entry.buffer.read(p.offset + offset, out)
    }

    /// Sets `len` bytes of `t` at `offset` to `value`; setting none
    /// succeeds even when `t` has no memory.
    pub fn fill_tensor_bytes(&mut self, t: TensorId, offset: usize, len: usize, value: u8) -> Result<()> {
        let Some((entry, p)) = self.check_tensor_range(t, offset, len)? else { return Ok(()) };
        if !entry.buffer.is_writable() {
            return Err(Error::Unsupported(format!("tensor {} is in read-only memory", self.describe(t))));
        }
        entry.buffer.fill(p.offset + offset, len, value)
    }

    /// Writes all of `t`'s bytes.
    pub fn set_bytes(&mut self, t: TensorId, data: &[u8]) -> Result<()> {
        let n = self.desc(t)?.nbytes();
        if data.len() != n {
            return Err(Error::OutOfBounds(format!(
                "{} bytes given for tensor {} of {n} bytes",
                data.len(),
                self.describe(t)
            )));
        }
        self.write_tensor_bytes(t, 0, data)
    }

    /// Writes an F32, F16, BF16 or I32 tensor from f32 values (converted),
    /// in the tensor's memory order.
    pub fn set_f32(&mut self, t: TensorId, values: &[f32]) -> Result<()> {
        let d = *self.desc(t)?;
        if values.len() != d.nelements() || !d.is_contiguous() {
            return Err(Error::InvalidTensor {
                tensor: self.describe(t),
                reason: format!(
                    "set_f32 needs a contiguous tensor of {} elements, got {} values",
                    d.nelements(),
                    values.len()
                ),
            });
        }
        let bytes = crate::convert::f32_to_bytes(d.dtype, values).ok_or_else(|| Error::UnsupportedDType {
            what: format!("set_f32 of {}", self.describe(t)),
            dtype: d.dtype,
        })?;
        self.write_tensor_bytes(t, 0, &bytes)
    }

    /// Writes an I32 tensor.
    pub fn set_i32(&mut self, t: TensorId, values: &[i32]) -> Result<()> {
        let d = *self.desc(t)?;
        if d.dtype != DType::I32 || values.len() != d.nelements() || !d.is_contiguous() {
            return Err(Error::InvalidTensor {
                tensor: self.describe(t),
                reason: format!("set_i32 needs a contiguous i32 tensor of {} elements", d.nelements()),
            });
        }
        self.write_tensor_bytes(t, 0, bytemuck::cast_slice(values))
    }

    /// Reads all of `t`'s bytes.
    pub fn get_bytes(&self, t: TensorId) -> Result<Vec<u8>> {
        let mut out = vec![0; self.desc(t)?.nbytes()];
        self.read_tensor_bytes(t, 0, &mut out)?;
        Ok(out)
    }

    /// Reads a tensor of any float, integer or quantized dtype as f32 values
    /// in logical order (dim 0 fastest), following its strides.
    pub fn read_f32(&self, t: TensorId) -> Result<Vec<f32>> {
        let d = *self.desc(t)?;
        let bytes = self.get_bytes(t)?;
        crate::convert::strided_to_f32(&d, &bytes).ok_or_else(|| Error::UnsupportedDType {
            what: format!("read_f32 of {}", self.describe(t)),
            dtype: d.dtype,
        })
    }

    /// Reads an I32 tensor in logical order (exactly: not through f32, which
    /// would round values beyond 2^24).
    pub fn read_i32(&self, t: TensorId) -> Result<Vec<i32>> {
        let d = *self.desc(t)?;
        if d.dtype != DType::I32 {
            return Err(Error::UnsupportedDType { what: format!("read_i32 of {}", self.describe(t)), dtype: d.dtype });
        }
        let bytes = self.get_bytes(t)?;
        let mut out = Vec::with_capacity(d.nelements());
        for i3 in 0..d.ne[3] {
            for i2 in 0..d.ne[2] {
                for i1 in 0..d.ne[1] {
                    for i0 in 0..d.ne[0] {
                        let at = i0 * d.nb[0] + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3];
                        let v = bytes
                            .get(at..at + 4)
                            .and_then(|b| b.try_into().ok())
                            .map(i32::from_le_bytes)
                            .ok_or_else(|| Error::OutOfBounds(format!("element {at} of {}", self.describe(t))))?;
                        out.push(v);
                    }
                }
            }
        }
        Ok(out)
    }

    /// Copies `src`'s bytes into `dst` (same dtype, shape and strides): directly
    /// when `dst`'s buffer can read `src`'s, else staged through host memory.
    pub fn copy_tensor(&self, src: TensorId, dst: TensorId) -> Result<()> {
        let (s, d) = (self.desc(src)?, self.desc(dst)?);
        if s.dtype != d.dtype || s.ne != d.ne || s.nb != d.nb {
            return Err(Error::InvalidTensor {
                tensor: self.describe(dst),
                reason: format!("cannot copy from {}: layouts differ", self.describe(src)),
            });
        }
        let n = s.nbytes();
        let (se, sp) = self.tensor_buffer(src)?;
        let (de, dp) = self.tensor_buffer(dst)?;
        check_range(se.buffer_type.name(), se.buffer.size(), sp.offset, n)?;
        check_range(de.buffer_type.name(), de.buffer.size(), dp.offset, n)?;
        if !de.buffer.is_writable() {
            return Err(Error::Unsupported(format!("tensor {} is in read-only memory", self.describe(dst))));
        }
        if de.buffer.copy_from(dp.offset, se.buffer.as_ref(), sp.offset, n)? {
            return Ok(());
        }
        if let Some(base) = se.buffer.host_ptr() {
            // SAFETY: the range was checked against the source buffer's size above,
            // and host buffers stay valid while registered in this context.
            let bytes = unsafe { std::slice::from_raw_parts(base.add(sp.offset), n) };
            return de.buffer.write(dp.offset, bytes);
        }
        if let Some(base) = de.buffer.host_ptr() {
            // SAFETY: as above, for the destination buffer.
            let bytes = unsafe { std::slice::from_raw_parts_mut(base.add(dp.offset), n) };
            return se.buffer.read(sp.offset, bytes);
        }
        let mut staging = vec![0u8; n];
        se.buffer.read(sp.offset, &mut staging)?;
        de.buffer.write(dp.offset, &staging)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BufferUsage;
    use crate::testing::TestBufferType;

    #[test]
    fn read_i32_is_exact_beyond_f32_precision() {
        let mut ctx = Context::new();
        let t = ctx.tensor(DType::I32, [3]).unwrap();
        ctx.alloc_tensors(&[t], &TestBufferType::device("test", 8).shared(), BufferUsage::Any).unwrap();
        let values = [16_777_217, -2_147_483_648, 2_147_483_647];
        ctx.set_i32(t, &values).unwrap();
        assert_eq!(ctx.read_i32(t).unwrap(), values);
        let tr = ctx.view_1d(t, 2, 4).unwrap();
        assert_eq!(ctx.read_i32(tr).unwrap(), &values[1..]);
    }

    #[test]
    fn zero_byte_accesses_need_no_memory_and_others_name_the_tensor() {
        let mut ctx = Context::new();
        let t = ctx.tensor(DType::F32, [4]).unwrap();
        ctx.set_name(t, "nowhere").unwrap();
        ctx.write_tensor_bytes(t, 0, &[]).unwrap();
        ctx.write_tensor_bytes(t, 16, &[]).unwrap();
        ctx.read_tensor_bytes(t, 8, &mut []).unwrap();
        ctx.fill_tensor_bytes(t, 4, 0, 7).unwrap();
        let beyond = ctx.write_tensor_bytes(t, 17, &[]).unwrap_err().to_string();
        assert!(beyond.contains("'nowhere'"), "an empty access past the end is still out of range: {beyond}");
        let err = ctx.write_tensor_bytes(t, 0, &[1]).unwrap_err().to_string();
        assert!(err.contains("'nowhere'") && err.contains("not allocated"), "{err}");
        assert!(ctx.fill_tensor_bytes(t, 0, 1, 0).is_err() && ctx.read_tensor_bytes(t, 0, &mut [0]).is_err());
    }

    #[test]
    fn read_only_memory_refuses_every_write() {
        let mut ctx = Context::new();
        let ro = TestBufferType::device("test", 8).read_only().shared();
        let src = ctx.tensor(DType::F32, [4]).unwrap();
        let dst = ctx.tensor(DType::F32, [4]).unwrap();
        ctx.set_name(dst, "mapped").unwrap();
        ctx.alloc_tensors(&[src], &TestBufferType::device("test", 8).shared(), BufferUsage::Any).unwrap();
        ctx.alloc_tensors(&[dst], &ro, BufferUsage::Weights).unwrap();
        ctx.set_f32(src, &[1.0, 2.0, 3.0, 4.0]).unwrap();
        for err in [
            ctx.copy_tensor(src, dst).unwrap_err(),
            ctx.fill_tensor_bytes(dst, 0, 4, 0).unwrap_err(),
            ctx.set_f32(dst, &[0.0; 4]).unwrap_err(),
        ] {
            assert!(err.to_string().contains("'mapped'") && err.to_string().contains("read-only"), "{err}");
        }
        assert_eq!(ctx.read_f32(dst).unwrap(), vec![0.0; 4]);
    }
}
