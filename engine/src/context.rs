//! The tensor world: tables of tensor descriptions, placements and buffers.

use std::sync::Arc;

use gantry_arenas::{BufferId, TensorId};
use slotmap::{SecondaryMap, SlotMap};

use crate::tensor::{MAX_DIMS, MAX_SRC, TensorFlags, contiguous_strides};
use crate::{Buffer, BufferType, BufferUsage, DType, Error, Name, Op, Result, TensorDesc, check_range};

/// Where a tensor's bytes are: a buffer and a byte offset in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Placement {
    /// The buffer.
    pub buffer: BufferId,
    /// Byte offset of the tensor's first byte.
    pub offset: usize,
}

/// One row of the buffer table.
pub struct BufferEntry {
    /// The memory.
    pub buffer: Box<dyn Buffer>,
    /// The type it was allocated from.
    pub buffer_type: Arc<dyn BufferType>,
    /// What it holds.
    pub usage: BufferUsage,
}

/// A point in the tensor table to [`Context::rewind`] to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark(usize);

/// The tables every part of Gantry works on: tensor descriptions, where each
/// tensor lives, and the buffers holding them. Entities are ids; nothing
/// holds a reference into the tables across calls.
///
/// ```
/// use gantry_engine::{Context, DType};
/// let mut ctx = Context::new();
/// let w = ctx.tensor(DType::F32, [4, 3])?;
/// let x = ctx.tensor(DType::F32, [4, 2])?;
/// let y = ctx.mul_mat(w, x)?;
/// assert_eq!(ctx.desc(y)?.ne, [3, 2, 1, 1]);
/// assert!(ctx.add(w, x).is_err(), "[4, 2] does not repeat into [4, 3]");
/// # Ok::<(), gantry_engine::Error>(())
/// ```
#[derive(Default)]
pub struct Context {
    tensors: SlotMap<TensorId, TensorDesc>,
    placements: SecondaryMap<TensorId, Placement>,
    buffers: SlotMap<BufferId, BufferEntry>,
    created: Vec<TensorId>,
    revision: u64,
}

impl Context {
    /// An empty context.
    pub fn new() -> Self {
        Self::default()
    }

    // ---- the tensor table -------------------------------------------------

    /// A new contiguous leaf tensor of `dtype` with up to 4 dimensions.
    pub fn tensor(&mut self, dtype: DType, shape: impl AsRef<[usize]>) -> Result<TensorId> {
        let ne = shape4(shape.as_ref())?;
        let desc = TensorDesc::contiguous(dtype, ne)
            .map_err(|reason| Error::InvalidTensor { tensor: format!("new {dtype} {ne:?}"), reason })?;
        Ok(self.insert(desc))
    }

    /// Inserts a description as is (for loaders and tests; builders validate).
    pub fn insert(&mut self, desc: TensorDesc) -> TensorId {
        let id = self.tensors.insert(desc);
        self.created.push(id);
        id
    }

    /// Inserts a scratch tensor that [`Context::rewind`] does not track: the
    /// owner (the scheduler, for its copies) removes it itself.
    pub fn insert_scratch(&mut self, desc: TensorDesc) -> TensorId {
        self.tensors.insert(desc)
    }

    /// The description of `t`.
    #[inline]
    pub fn desc(&self, t: TensorId) -> Result<&TensorDesc> {
        self.tensors.get(t).ok_or_else(|| stale_tensor(t))
    }

    /// The description of `t`, mutably. Changing the shape of a tensor that
    /// other tensors read is the caller's responsibility.
    pub fn desc_mut(&mut self, t: TensorId) -> Result<&mut TensorDesc> {
        self.revision += 1;
        self.tensors.get_mut(t).ok_or_else(|| stale_tensor(t))
    }

    /// The description of `t`, mutably, without counting a revision: for a
    /// change its maker undoes before it returns (the scheduler pointing
    /// sources at its copies while it computes), which nobody else sees.
    pub(crate) fn desc_mut_untracked(&mut self, t: TensorId) -> Result<&mut TensorDesc> {
        self.tensors.get_mut(t).ok_or_else(|| stale_tensor(t))
    }

    /// A counter that changes with every change to what tensors are, where
    /// they live, or which buffers exist: a description changed
    /// ([`Context::desc_mut`], names and flags included), a tensor removed, a
    /// placement made or undone, a buffer added, freed, or given another
    /// usage. Writing tensor data and creating tensors do not change it. The
    /// scheduler compares it to skip placing a graph that nothing touched.
    ///
    /// ```
    /// use gantry_engine::{Context, DType};
    /// let mut ctx = Context::new();
    /// let x = ctx.tensor(DType::F32, [4])?;
    /// let before = ctx.revision();
    /// ctx.set_input(x)?;
    /// assert_ne!(ctx.revision(), before);
    /// # Ok::<(), gantry_engine::Error>(())
    /// ```
    #[inline]
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The description of `t`, or `None` for a stale id.
    #[inline]
    pub fn get(&self, t: TensorId) -> Option<&TensorDesc> {
        self.tensors.get(t)
    }

    /// Whether `t` is a live tensor of this context.
    pub fn contains(&self, t: TensorId) -> bool {
        self.tensors.contains_key(t)
    }

    /// Number of live tensors.
    pub fn tensor_count(&self) -> usize {
        self.tensors.len()
    }

    /// One more than the largest slot index in use (bitsets over tensors use this).
    pub fn slot_capacity(&self) -> usize {
        self.tensors.capacity()
    }

    /// Every live tensor, in no particular order.
    pub fn tensors(&self) -> impl Iterator<Item = (TensorId, &TensorDesc)> + '_ {
        self.tensors.iter()
    }

    /// `t`'s name, or `""`.
    pub fn name(&self, t: TensorId) -> &str {
        self.tensors.get(t).map_or("", |d| d.name.as_str())
    }

    /// Names `t` (cut to 63 bytes). Returns `t` for chaining.
    pub fn set_name(&mut self, t: TensorId, name: &str) -> Result<TensorId> {
        self.desc_mut(t)?.name = Name::new(name);
        Ok(t)
    }

    /// The first live tensor named `name`.
    pub fn find(&self, name: &str) -> Option<TensorId> {
        self.tensors.iter().find(|(_, d)| d.name.as_str() == name).map(|(id, _)| id)
    }

    /// Marks `t` as a graph input (written by the user before each compute).
    pub fn set_input(&mut self, t: TensorId) -> Result<()> {
        self.add_flags(t, TensorFlags::INPUT)
    }

    /// Marks `t` as a graph output (its memory is never reused).
    pub fn set_output(&mut self, t: TensorId) -> Result<()> {
        self.add_flags(t, TensorFlags::OUTPUT)
    }

    /// Marks `t` as a trainable parameter.
    pub fn set_param(&mut self, t: TensorId) -> Result<()> {
        self.add_flags(t, TensorFlags::PARAM)
    }

    fn add_flags(&mut self, t: TensorId, f: TensorFlags) -> Result<()> {
        let d = self.desc_mut(t)?;
        d.flags = d.flags.with(f);
        Ok(())
    }

    /// A short human description of `t` for messages: name (or id), dtype, shape.
    pub fn describe(&self, t: TensorId) -> String {
        match self.tensors.get(t) {
            None => format!("<stale tensor {t:?}>"),
            Some(d) if d.name.is_empty() => format!("{t:?} ({} {:?})", d.dtype, d.ne),
            Some(d) => format!("'{}' ({} {:?})", d.name, d.dtype, d.ne),
        }
    }

    /// The current end of the tensor table; see [`Context::rewind`].
    pub fn mark(&self) -> Mark {
        Mark(self.created.len())
    }

    /// Removes every tensor created after `mark` (a graph's intermediate
    /// tensors, before building it again). Their slots are reused by the next
    /// tensors, so a rebuild of the same graph allocates nothing.
    pub fn rewind(&mut self, mark: Mark) {
        if self.created.len() > mark.0 {
            self.revision += 1;
        }
        while self.created.len() > mark.0 {
            if let Some(t) = self.created.pop() {
                self.tensors.remove(t);
                self.placements.remove(t);
            }
        }
    }

    /// Removes one tensor. Tensors that read it keep a stale id.
    pub fn remove(&mut self, t: TensorId) -> Result<TensorDesc> {
        self.revision += 1;
        if self.created.last() == Some(&t) {
            self.created.pop();
        }
        self.placements.remove(t);
        self.tensors.remove(t).ok_or_else(|| stale_tensor(t))
    }

    // ---- builder helpers ---------------------------------------------------

    /// A new contiguous tensor computed by `op` from `srcs`.
    pub(crate) fn push_op(
        &mut self,
        dtype: DType,
        ne: [usize; MAX_DIMS],
        op: Op,
        srcs: &[TensorId],
    ) -> Result<TensorId> {
        let mut desc =
            TensorDesc::contiguous(dtype, ne).map_err(|reason| Error::InvalidOp { op: op.name(), reason })?;
        desc.op = op;
        set_srcs(&mut desc, srcs);
        Ok(self.insert(desc))
    }

    /// A new view of `base`'s memory computed (or described) by `op`.
    pub(crate) fn push_view(
        &mut self,
        base: TensorId,
        dtype: DType,
        ne: [usize; MAX_DIMS],
        nb: [usize; MAX_DIMS],
        offset: usize,
        op: Op,
        srcs: &[TensorId],
    ) -> Result<TensorId> {
        let b = self.desc(base)?;
        let (view_src, view_offset) = match b.view_src {
            Some(root) => (root, b.view_offset.checked_add(offset)),
            None => (base, Some(offset)),
        };
        let view_offset = view_offset.ok_or_else(|| Error::Overflow(format!("{} view offset", op.name())))?;
        let desc = TensorDesc {
            dtype,
            ne,
            nb,
            op,
            srcs: [None; MAX_SRC],
            view_src: Some(view_src),
            view_offset,
            flags: TensorFlags::NONE,
            name: Name::EMPTY,
        };
        let mut desc = desc;
        set_srcs(&mut desc, srcs);
        Ok(self.insert(desc))
    }

    // ---- buffers -------------------------------------------------------------

    /// Allocates a buffer of `size` bytes from `buffer_type` and registers it.
    pub fn alloc_buffer(
        &mut self,
        buffer_type: &Arc<dyn BufferType>,
        size: usize,
        usage: BufferUsage,
    ) -> Result<BufferId> {
        let buffer = buffer_type.alloc_buffer(size)?;
        Ok(self.add_buffer(buffer, buffer_type.clone(), usage))
    }

    /// Registers a buffer made elsewhere (e.g. over host memory).
    pub fn add_buffer(
        &mut self,
        buffer: Box<dyn Buffer>,
        buffer_type: Arc<dyn BufferType>,
        usage: BufferUsage,
    ) -> BufferId {
        self.revision += 1;
        self.buffers.insert(BufferEntry { buffer, buffer_type, usage })
    }

    /// The buffer table row of `id`.
    #[inline]
    pub fn buffer(&self, id: BufferId) -> Result<&BufferEntry> {
        self.buffers.get(id).ok_or_else(|| Error::StaleHandle { kind: "buffer", handle: format!("{id:?}") })
    }

    /// Sets what a buffer holds.
    pub fn set_buffer_usage(&mut self, id: BufferId, usage: BufferUsage) -> Result<()> {
        self.revision += 1;
        self.buffers
            .get_mut(id)
            .ok_or_else(|| Error::StaleHandle { kind: "buffer", handle: format!("{id:?}") })?
            .usage = usage;
        Ok(())
    }

    /// Frees a buffer. Tensors placed in it become unallocated.
    pub fn free_buffer(&mut self, id: BufferId) -> Result<()> {
        self.revision += 1;
        self.buffers
            .remove(id)
            .map(drop)
            .ok_or_else(|| Error::StaleHandle { kind: "buffer", handle: format!("{id:?}") })
    }

    /// Every registered buffer.
    pub fn buffers(&self) -> impl Iterator<Item = (BufferId, &BufferEntry)> + '_ {
        self.buffers.iter()
    }

    // ---- placement -----------------------------------------------------------

    /// Places `t` at `offset` in `buffer`. The tensor must not be a view, must
    /// fit in the buffer, and the offset must respect the buffer type's alignment.
    pub fn place(&mut self, t: TensorId, buffer: BufferId, offset: usize) -> Result<()> {
        let desc = self.desc(t)?;
        if desc.view_src.is_some() {
            return Err(Error::InvalidTensor {
                tensor: self.describe(t),
                reason: "a view takes its memory from its source and cannot be placed".into(),
            });
        }
        let entry = self.buffer(buffer)?;
        let align = entry.buffer_type.alignment();
        if !offset.is_multiple_of(align) {
            return Err(Error::InvalidTensor {
                tensor: self.describe(t),
                reason: format!(
                    "offset {offset} is not a multiple of {}'s alignment {align}",
                    entry.buffer_type.name()
                ),
            });
        }
        let size = entry.buffer_type.alloc_size(desc);
        check_range(entry.buffer_type.name(), entry.buffer.size(), offset, size)
            .map_err(|e| Error::InvalidTensor { tensor: self.describe(t), reason: e.to_string() })?;
        self.placements.insert(t, Placement { buffer, offset });
        self.revision += 1;
        Ok(())
    }

    /// Forgets where `t` was placed.
    pub fn unplace(&mut self, t: TensorId) {
        self.revision += 1;
        self.placements.remove(t);
    }

    /// Where `t`'s first byte is: its own placement, or its view source's plus
    /// the view offset. `None` when unallocated.
    #[inline]
    pub fn placement(&self, t: TensorId) -> Option<Placement> {
        let desc = self.tensors.get(t)?;
        match desc.view_src {
            None => self.placements.get(t).copied(),
            Some(src) => {
                let p = self.placements.get(src)?;
                Some(Placement { buffer: p.buffer, offset: p.offset + desc.view_offset })
            }
        }
    }

    /// Whether `t` (or its view source) has memory.
    pub fn is_allocated(&self, t: TensorId) -> bool {
        self.placement(t).is_some_and(|p| self.buffers.contains_key(p.buffer))
    }

    /// The buffer table row holding `t`, with `t`'s placement.
    #[inline]
    pub fn tensor_buffer(&self, t: TensorId) -> Result<(&BufferEntry, Placement)> {
        let p = self.placement(t).ok_or_else(|| self.not_allocated(t))?;
        let entry = self.buffers.get(p.buffer).ok_or_else(|| self.not_allocated(t))?;
        Ok((entry, p))
    }

    /// Host address of `t`'s first byte; `Err` when `t` is unallocated or
    /// not in host memory.
    #[inline]
    pub fn host_ptr(&self, t: TensorId) -> Result<*mut u8> {
        let (entry, p) = self.tensor_buffer(t)?;
        let base = entry.buffer.host_ptr().ok_or_else(|| {
            Error::Unsupported(format!(
                "tensor {} is in {} memory, not host memory",
                self.describe(t),
                entry.buffer_type.name()
            ))
        })?;
        // Offsets were checked against the buffer size when the tensor was placed.
        Ok(base.wrapping_add(p.offset))
    }

    fn not_allocated(&self, t: TensorId) -> Error {
        Error::NotAllocated(self.describe(t))
    }

    // ---- data ----------------------------------------------------------------

    fn check_tensor_range(&self, t: TensorId, offset: usize, len: usize) -> Result<(&BufferEntry, Placement)> {
        let nbytes = self.desc(t)?.nbytes();
        if offset.checked_add(len).is_none_or(|end| end > nbytes) {
            // Only the failing path pays for the description.
            check_range(&self.describe(t), nbytes, offset, len)?;
        }
        self.tensor_buffer(t)
    }

    /// Writes `data` into `t`'s bytes at `offset` (within `nbytes`).
    pub fn write_tensor_bytes(&self, t: TensorId, offset: usize, data: &[u8]) -> Result<()> {
        let (entry, p) = self.check_tensor_range(t, offset, data.len())?;
        if !entry.buffer.is_writable() {
            return Err(Error::Unsupported(format!("tensor {} is in read-only memory", self.describe(t))));
        }
        entry.buffer.write(p.offset + offset, data)
    }

    /// Reads `out.len()` bytes of `t` at `offset` (within `nbytes`).
    pub fn read_tensor_bytes(&self, t: TensorId, offset: usize, out: &mut [u8]) -> Result<()> {
        let (entry, p) = self.check_tensor_range(t, offset, out.len())?;
        entry.buffer.read(p.offset + offset, out)
    }

    /// Sets `len` bytes of `t` at `offset` to `value`.
    pub fn fill_tensor_bytes(&mut self, t: TensorId, offset: usize, len: usize, value: u8) -> Result<()> {
        let (entry, p) = self.check_tensor_range(t, offset, len)?;
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
        let bytes = crate::convert::f32_to_bytes(d.dtype, values)
            .ok_or(Error::UnsupportedDType { what: format!("set_f32 of {}", self.describe(t)), dtype: d.dtype })?;
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
        crate::convert::strided_to_f32(&d, &bytes)
            .ok_or(Error::UnsupportedDType { what: format!("read_f32 of {}", self.describe(t)), dtype: d.dtype })
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

fn set_srcs(desc: &mut TensorDesc, srcs: &[TensorId]) {
    for (slot, &s) in desc.srcs.iter_mut().zip(srcs) {
        *slot = Some(s);
    }
}

fn stale_tensor(t: TensorId) -> Error {
    Error::StaleHandle { kind: "tensor", handle: format!("{t:?}") }
}

/// A shape of 1 to 4 dimensions, padded with 1s.
pub(crate) fn shape4(shape: &[usize]) -> Result<[usize; MAX_DIMS]> {
    if shape.is_empty() || shape.len() > MAX_DIMS {
        return Err(Error::InvalidTensor {
            tensor: format!("shape {shape:?}"),
            reason: format!("a tensor has 1 to {MAX_DIMS} dimensions, not {}", shape.len()),
        });
    }
    let mut ne = [1; MAX_DIMS];
    ne[..shape.len()].copy_from_slice(shape);
    Ok(ne)
}

/// The strides of a contiguous tensor, as an op error.
pub(crate) fn strides_for(op: &'static str, dtype: DType, ne: [usize; MAX_DIMS]) -> Result<[usize; MAX_DIMS]> {
    contiguous_strides(dtype, ne).map_err(|reason| Error::InvalidOp { op, reason })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::test_buffer::{TestBuft, buft};

    #[test]
    fn read_i32_is_exact_beyond_f32_precision() {
        let mut ctx = Context::new();
        let t = ctx.tensor(DType::I32, [3]).unwrap();
        ctx.alloc_tensors(&[t], &buft(usize::MAX, 8), BufferUsage::Any).unwrap();
        let values = [16_777_217, -2_147_483_648, 2_147_483_647];
        ctx.set_i32(t, &values).unwrap();
        assert_eq!(ctx.read_i32(t).unwrap(), values);
        let tr = ctx.view_1d(t, 2, 4).unwrap();
        assert_eq!(ctx.read_i32(tr).unwrap(), &values[1..]);
    }

    #[test]
    fn read_only_memory_refuses_every_write() {
        let mut ctx = Context::new();
        let ro: Arc<dyn BufferType> = Arc::new(TestBuft { max: usize::MAX, align: 8, writable: false });
        let src = ctx.tensor(DType::F32, [4]).unwrap();
        let dst = ctx.tensor(DType::F32, [4]).unwrap();
        ctx.set_name(dst, "mapped").unwrap();
        ctx.alloc_tensors(&[src], &buft(usize::MAX, 8), BufferUsage::Any).unwrap();
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
