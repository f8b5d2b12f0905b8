//! `CPU_REPACK`: a CPU buffer type whose tensors are quantized weight
//! matrices kept in the repacked layout the CPU's kernels read directly
//! ([`crate::quant::repack`]), as ggml's CPU_REPACK extra buffer type
//! keeps them.
//!
//! Writing a tensor's bytes (any range, as [`Buffer::write`] gives it:
//! ggml's standard block bytes) repacks the row groups it touches; reading
//! them back unrepacks, so the bytes a caller sees are always the standard
//! ones (reading a weight back, comparing backends, copying it to another
//! device). The memory itself is not host memory to anyone else:
//! [`Buffer::host_ptr`] is `None` and the type is not
//! [`BufferType::is_host`], so no other backend or kernel reads the bytes as
//! if they had the plain layout; the CPU device supports the type, and of
//! the CPU's ops only MUL_MAT (as its weights), MUL_MAT_ID (as its expert
//! weights) and GET_ROWS read such a tensor (`cpu::ops::supports_op`);
//! anything else is refused, and the scheduler reports the node it cannot
//! place.
//!
//! A tensor placed here is a matrix, or a stack of matrices (a
//! mixture-of-experts layer's `[k, m, n_expert]` weights), of dense rows of a
//! type with a repacked layout (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K,
//! Q4_K, Q5_K, Q6_K): [`repacks_layout`]. Each matrix takes [`repacked_size`] bytes (its
//! rows rounded up to whole groups of 16, and the scale areas aligned), one
//! after the other, which [`BufferType::alloc_size`] reports.

use std::any::Any;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use gantry_engine::{Buffer, BufferType, DType, Device, Error, Result, TensorId, TensorLayout, check_range};

use super::aligned::{AlignedBytes, CPU_ALIGNMENT};
use super::quant::repack::{GROUP_ROWS, RepackedMatrix, repack_group, repacked_size, repacks, unrepack_group};

/// The name of the buffer type (ggml's).
const NAME: &str = "CPU_REPACK";

/// The repacking CPU buffer type (see the module).
#[derive(Debug)]
pub struct RepackBufferType {
    _private: (),
}

/// The one shared repacking buffer type (`"CPU_REPACK"`); every call
/// returns the same object ([`gantry_engine::same_buffer_type`]).
pub fn repack_buffer_type() -> Arc<dyn BufferType> {
    static REPACK: OnceLock<Arc<dyn BufferType>> = OnceLock::new();
    REPACK.get_or_init(|| Arc::new(RepackBufferType { _private: () })).clone()
}

/// Whether a tensor of `layout` can live in a CPU_REPACK buffer: a matrix
/// or a stack of matrices along dim 2 (`ne[3] = 1`), all dense rows of
/// whole blocks of a type with a repacked layout.
pub fn repacks_layout(layout: &TensorLayout) -> bool {
    let (dtype, ne, nb) = (layout.dtype, layout.ne, layout.nb);
    let Some(row) = dtype.row_size(ne[0]) else { return false };
    repacks(dtype)
        && stack_size(dtype, ne).is_some()
        && ne[3] == 1
        && nb[0] == dtype.bytes_per_block()
        && (ne[1] <= 1 || nb[1] == row)
        && (ne[2] <= 1 || Some(nb[2]) == row.checked_mul(ne[1]))
}

/// Bytes of the repacked form of `ne[2]` matrices of `ne[1]` rows of
/// `ne[0]` values each.
fn stack_size(dtype: DType, ne: [usize; 4]) -> Option<usize> {
    repacked_size(dtype, ne[0], ne[1])?.checked_mul(ne[2])
}

impl BufferType for RepackBufferType {
    fn name(&self) -> &str {
        NAME
    }

    fn alloc_buffer(&self, size: usize) -> Result<Box<dyn Buffer>> {
        Ok(Box::new(RepackBuffer {
            memory: AlignedBytes::zeroed(size, NAME)?,
            placed: RwLock::new(Vec::new()),
            writing: Mutex::new(()),
        }))
    }

    fn alignment(&self) -> usize {
        CPU_ALIGNMENT
    }

    fn max_size(&self) -> usize {
        isize::MAX as usize
    }

    fn alloc_size(&self, layout: &TensorLayout) -> usize {
        match stack_size(layout.dtype, layout.ne) {
            Some(size) if repacks_layout(layout) => size,
            // Refused when placed (`init_tensor`); the plain size meanwhile.
            _ => layout.nbytes(),
        }
    }

    fn is_host(&self) -> bool {
        // The bytes are not the standard layout: nobody may read them raw.
        false
    }

    fn device(&self) -> Option<Arc<dyn Device>> {
        Some(super::device::shared_device())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// One tensor placed in a [`RepackBuffer`].
#[derive(Debug, Clone, Copy)]
struct Placed {
    tensor: TensorId,
    /// Where its repacked bytes start in the buffer.
    offset: usize,
    dtype: DType,
    /// Values per row.
    k: usize,
    /// Rows of each matrix.
    m: usize,
    /// Matrices (experts), one after the other.
    n_mat: usize,
    /// Bytes of one plain row.
    row_bytes: usize,
    /// Repacked bytes of all the matrices.
    size: usize,
}

impl Placed {
    /// Bytes of the plain layout (what callers address).
    fn plain_bytes(&self) -> usize {
        self.n_mat * self.m * self.row_bytes
    }

    /// Groups of each matrix (a group never spans two matrices).
    fn groups_per_matrix(&self) -> usize {
        self.m.div_ceil(GROUP_ROWS)
    }

    /// Repacked bytes of one matrix.
    fn matrix_bytes(&self) -> usize {
        self.size / self.n_mat.max(1)
    }

    /// Bytes of one repacked group.
    fn group_bytes(&self) -> usize {
        self.matrix_bytes() / self.groups_per_matrix().max(1)
    }
}

/// The repacked matrices of a tensor placed in a [`RepackBuffer`]: one
/// matrix, or a mixture-of-experts layer's stack of them.
#[derive(Debug, Clone, Copy)]
pub struct RepackedStack<'a> {
    /// The weights' type.
    pub dtype: DType,
    /// Values per row.
    pub k: usize,
    /// Rows of each matrix.
    pub m: usize,
    /// Matrices.
    pub count: usize,
    /// Their repacked bytes, one matrix after the other.
    data: &'a [u8],
}

impl<'a> RepackedStack<'a> {
    /// Matrix `i` (expert `i`), or `None` past the last.
    pub fn matrix(&self, i: usize) -> Option<RepackedMatrix<'a>> {
        if i >= self.count {
            return None;
        }
        let bytes = self.data.len() / self.count;
        let data = &self.data[i * bytes..(i + 1) * bytes];
        Some(RepackedMatrix { dtype: self.dtype, data, k: self.k, m: self.m })
    }
}

/// A buffer of the [`RepackBufferType`]: the repacked bytes of its tensors.
#[derive(Debug)]
pub struct RepackBuffer {
    memory: AlignedBytes,
    /// The tensors placed here, by offset.
    placed: RwLock<Vec<Placed>>,
    /// Held by writes, whose partial groups are read, patched and written back.
    writing: Mutex<()>,
}

impl RepackBuffer {
    /// The repacked matrices of `tensor`, placed at `offset`; an error when
    /// no such tensor was placed here (a view of one, say).
    pub fn stack(&self, tensor: TensorId, offset: usize) -> Result<RepackedStack<'_>> {
        let placed = self.placed.read().unwrap_or_else(|e| e.into_inner());
        let p = placed.iter().find(|p| p.tensor == tensor && p.offset == offset).copied().ok_or_else(|| {
            Error::Unsupported(format!(
                "{NAME}: nothing placed at offset {offset} for this tensor (a view of repacked weights cannot be read)"
            ))
        })?;
        // SAFETY: the placement was checked against the buffer's size in
        // `init_tensor`; the memory lives as long as `self`.
        let data = unsafe { std::slice::from_raw_parts(self.memory.as_ptr().add(p.offset), p.size) };
        Ok(RepackedStack { dtype: p.dtype, k: p.k, m: p.m, count: p.n_mat, data })
    }

    /// The repacked matrix of `tensor`, placed at `offset`; an error when
    /// no such tensor was placed here, or when it is a stack of several.
    pub fn matrix(&self, tensor: TensorId, offset: usize) -> Result<RepackedMatrix<'_>> {
        let stack = self.stack(tensor, offset)?;
        match stack.matrix(0) {
            Some(matrix) if stack.count == 1 => Ok(matrix),
            _ => Err(Error::Unsupported(format!(
                "{NAME}: a stack of {} matrices is read one expert at a time (MUL_MAT_ID), not as one matrix",
                stack.count
            ))),
        }
    }

    /// The tensor whose plain bytes hold `len` bytes at buffer offset
    /// `offset` (plain bytes of a tensor at `p.offset` are addressed from
    /// there, as if it were not repacked), and the offset within it.
    fn find(&self, offset: usize, len: usize, what: &str) -> Result<(Placed, usize)> {
        let placed = self.placed.read().unwrap_or_else(|e| e.into_inner());
        placed
            .iter()
            .find(|p| offset >= p.offset && offset + len <= p.offset + p.plain_bytes())
            .map(|p| (*p, offset - p.offset))
            .ok_or_else(|| {
                Error::Unsupported(format!(
                    "{NAME}: {what} of {len} bytes at offset {offset} is not within one placed tensor's bytes"
                ))
            })
    }

    /// Repacked group `g` of `p`, to read.
    ///
    /// # Safety
    /// No write of the group is under way (the caller holds `writing` or
    /// only reads, as a host buffer's readers do).
    unsafe fn group(&self, p: &Placed, g: usize) -> &[u8] {
        let gb = p.group_bytes();
        // SAFETY: group g lies inside the tensor's repacked bytes, inside the buffer.
        unsafe { std::slice::from_raw_parts(self.memory.as_ptr().add(p.offset + g * gb), gb) }
    }

    /// Repacked group `g` of `p`, to write.
    ///
    /// # Safety
    /// The caller holds `writing`; nothing reads the group meanwhile.
    #[expect(clippy::mut_from_ref, reason = "the buffer's raw memory, written under the `writing` lock")]
    unsafe fn group_mut(&self, p: &Placed, g: usize) -> &mut [u8] {
        let gb = p.group_bytes();
        // SAFETY: group g lies inside the tensor's repacked bytes, inside the buffer.
        unsafe { std::slice::from_raw_parts_mut(self.memory.as_ptr().add(p.offset + g * gb), gb) }
    }

    /// The plain bytes `at .. at + len` of `p`, group by group: `f(group,
    /// rows, plain offset of the group, part of it in range)`. Groups are
    /// numbered across the stack, matrix after matrix; a matrix whose rows
    /// are not a multiple of 16 ends with a short group.
    fn each_group(
        p: &Placed,
        at: usize,
        len: usize,
        mut f: impl FnMut(usize, usize, usize, std::ops::Range<usize>) -> Result<()>,
    ) -> Result<()> {
        let matrix_plain = p.m * p.row_bytes;
        if len == 0 || matrix_plain == 0 {
            return Ok(());
        }
        let group_plain = GROUP_ROWS * p.row_bytes;
        for i in at / matrix_plain..=(at + len - 1) / matrix_plain {
            let matrix_start = i * matrix_plain;
            let lo = at.max(matrix_start) - matrix_start;
            let hi = (at + len).min(matrix_start + matrix_plain) - matrix_start;
            for g in lo / group_plain..=(hi - 1) / group_plain {
                let start = matrix_start + g * group_plain;
                let rows = (p.m - g * GROUP_ROWS).min(GROUP_ROWS);
                let end = start + rows * p.row_bytes;
                let part = at.max(start)..(at + len).min(end);
                f(i * p.groups_per_matrix() + g, rows, start, part)?;
            }
        }
        Ok(())
    }

    fn write_plain(&self, offset: usize, data: &[u8]) -> Result<()> {
        check_range(NAME, self.memory.len(), offset, data.len())?;
        let _writing = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        let (p, at) = self.find(offset, data.len(), "a write")?;
        let mut staging = Vec::new();
        Self::each_group(&p, at, data.len(), |g, rows, start, part| {
            let src = &data[part.start - at..part.end - at];
            // SAFETY: `writing` is held.
            let group = unsafe { self.group_mut(&p, g) };
            if part.len() == rows * p.row_bytes {
                return repack_group(p.dtype, p.k, rows, src, group);
            }
            // Part of a group: the plain rows back, patched, repacked.
            staging.resize(rows * p.row_bytes, 0);
            unrepack_group(p.dtype, p.k, rows, group, &mut staging)?;
            staging[part.start - start..part.end - start].copy_from_slice(src);
            repack_group(p.dtype, p.k, rows, &staging, group)
        })
    }
}

impl Buffer for RepackBuffer {
    fn size(&self) -> usize {
        self.memory.len()
    }

    fn host_ptr(&self) -> Option<*mut u8> {
        // Not the standard layout: nobody reads these bytes raw.
        None
    }

    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.write_plain(offset, data)
    }

    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        check_range(NAME, self.memory.len(), offset, out.len())?;
        let (p, at) = self.find(offset, out.len(), "a read")?;
        let mut staging = Vec::new();
        Self::each_group(&p, at, out.len(), |g, rows, start, part| {
            // SAFETY: reads race with writes only as a host buffer's do.
            let group = unsafe { self.group(&p, g) };
            let dst = &mut out[part.start - at..part.end - at];
            if part.len() == rows * p.row_bytes {
                return unrepack_group(p.dtype, p.k, rows, group, dst);
            }
            staging.resize(rows * p.row_bytes, 0);
            unrepack_group(p.dtype, p.k, rows, group, &mut staging)?;
            dst.copy_from_slice(&staging[part.start - start..part.end - start]);
            Ok(())
        })
    }

    fn fill(&self, offset: usize, len: usize, value: u8) -> Result<()> {
        self.write_plain(offset, &vec![value; len])
    }

    fn copy_from(&self, _dst_offset: usize, _src: &dyn Buffer, _src_offset: usize, _len: usize) -> Result<bool> {
        // The caller stages the bytes and writes them (repacking them).
        Ok(false)
    }

    fn clear(&self, value: u8) -> Result<()> {
        // SAFETY: the whole buffer; no tensor is being read while it is cleared.
        unsafe { std::ptr::write_bytes(self.memory.as_ptr(), value, self.memory.len()) };
        let placed: Vec<Placed> = self.placed.read().unwrap_or_else(|e| e.into_inner()).clone();
        for p in placed {
            self.fill(p.offset, p.plain_bytes(), value)?;
        }
        Ok(())
    }

    fn init_tensor(&self, tensor: TensorId, layout: &TensorLayout, offset: usize) -> Result<()> {
        let (dtype, k, m, n_mat) = (layout.dtype, layout.ne[0], layout.ne[1], layout.ne[2]);
        let size = stack_size(dtype, layout.ne).filter(|_| repacks_layout(layout)).ok_or_else(|| {
            Error::Unsupported(format!(
                "{NAME} holds matrices (or stacks of them along dim 2) of dense rows of whole blocks of Q4_0, \
                 Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K or Q6_K, not {dtype} {:?}",
                layout.ne
            ))
        })?;
        check_range(NAME, self.memory.len(), offset, size)?;
        let row_bytes = dtype.row_size(k).unwrap_or(0);
        let mut placed = self.placed.write().unwrap_or_else(|e| e.into_inner());
        // A tensor placed over others' bytes replaces them.
        placed.retain(|p| p.tensor != tensor && (p.offset + p.size <= offset || offset + size <= p.offset));
        placed.push(Placed { tensor, offset, dtype, k, m, n_mat, row_bytes, size });
        Ok(())
    }

    fn reset(&self) {
        self.placed.write().unwrap_or_else(|e| e.into_inner()).clear();
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use gantry_engine::quant::quantize_row;
    use gantry_engine::{BufferUsage, Context};

    use super::*;

    fn matrix(ctx: &mut Context, dtype: DType, k: usize, m: usize) -> (TensorId, Vec<u8>) {
        let t = ctx.tensor(dtype, [k, m]).unwrap();
        let row = dtype.row_size(k).unwrap();
        let mut bytes = vec![0u8; row * m];
        for r in 0..m {
            let x: Vec<f32> = (0..k).map(|i| ((i * 7 + r * 13) % 29) as f32 - 14.0).collect();
            quantize_row(dtype, &x, &mut bytes[r * row..(r + 1) * row]).unwrap();
        }
        (t, bytes)
    }

    #[test]
    fn tensors_read_back_as_written_whatever_the_pieces() {
        let buft = repack_buffer_type();
        assert!(!buft.is_host() && buft.name() == "CPU_REPACK");
        assert!(gantry_engine::same_buffer_type(&buft, &repack_buffer_type()));
        for dtype in crate::quant::repack::REPACKED_DTYPES {
            // The K-quants' rows are whole 256-value super-blocks.
            let (ka, kb) = if dtype.block_size() == 256 { (512, 256) } else { (96, 64) };
            let mut ctx = Context::new();
            let (a, bytes_a) = matrix(&mut ctx, dtype, ka, 37);
            let (b, bytes_b) = matrix(&mut ctx, dtype, kb, 5);
            let alloc = ctx.alloc_tensors(&[a, b], &buft, BufferUsage::Weights).unwrap();
            let entry = ctx.buffer(alloc.buffers()[0]).unwrap();
            assert!(entry.buffer.host_ptr().is_none() && ctx.host_ptr(a).is_err(), "no raw access");
            // Whole, then in pieces that cut rows and groups anywhere.
            ctx.set_bytes(a, &bytes_a).unwrap();
            assert_eq!(ctx.get_bytes(a).unwrap(), bytes_a, "{dtype} whole");
            ctx.fill_tensor_bytes(a, 0, bytes_a.len(), 0).unwrap();
            for chunk in [7, 333, 1000] {
                for (i, piece) in bytes_b.chunks(chunk).enumerate() {
                    ctx.write_tensor_bytes(b, i * chunk, piece).unwrap();
                }
                assert_eq!(ctx.get_bytes(b).unwrap(), bytes_b, "{dtype} pieces of {chunk}");
                for (i, piece) in bytes_a.chunks(chunk).enumerate() {
                    ctx.write_tensor_bytes(a, i * chunk, piece).unwrap();
                }
                assert_eq!(ctx.get_bytes(a).unwrap(), bytes_a, "{dtype} pieces of {chunk}");
                let mut part = vec![0u8; 500];
                ctx.read_tensor_bytes(a, 123, &mut part).unwrap();
                assert_eq!(part, bytes_a[123..623]);
            }
            // The repacked matrix is what `repack_matrix` makes.
            let (entry, p) = ctx.tensor_buffer(a).unwrap();
            let buf = entry.buffer.as_any().downcast_ref::<RepackBuffer>().unwrap();
            let w = buf.matrix(a, p.offset).unwrap();
            let mut want = vec![0u8; repacked_size(dtype, ka, 37).unwrap()];
            crate::quant::repack::repack_matrix(dtype, ka, 37, &bytes_a, &mut want).unwrap();
            assert_eq!(w.data, &want[..]);
            assert!(buf.matrix(b, p.offset).is_err(), "another tensor's offset");
            // Copies in and out go through the standard bytes.
            let plain = ctx.tensor(dtype, [ka, 37]).unwrap();
            ctx.alloc_tensors(&[plain], &crate::buffer_type(), BufferUsage::Any).unwrap();
            ctx.copy_tensor(a, plain).unwrap();
            assert_eq!(ctx.get_bytes(plain).unwrap(), bytes_a);
            ctx.fill_tensor_bytes(a, 0, bytes_a.len(), 0).unwrap();
            ctx.copy_tensor(plain, a).unwrap();
            assert_eq!(ctx.get_bytes(a).unwrap(), bytes_a);
        }
    }

    #[test]
    fn only_repackable_matrices_are_placed() {
        let buft = repack_buffer_type();
        let mut ctx = Context::new();
        let lookup = ctx.tensor(DType::IQ4_XS, [256, 16]).unwrap();
        let f32s = ctx.tensor(DType::F32, [64, 16]).unwrap();
        let batched = ctx.tensor(DType::Q4_0, [64, 16, 2, 2]).unwrap();
        let odd = ctx.tensor(DType::Q8_0, [32, 3]).unwrap();
        for t in [lookup, f32s, batched] {
            let err = ctx.alloc_tensors(&[t], &buft, BufferUsage::Weights).unwrap_err().to_string();
            assert!(err.contains("CPU_REPACK holds"), "{err}");
        }
        // Rows are rounded up to a whole group.
        assert_eq!(buft.alloc_size(&ctx.desc(odd).unwrap().layout()), repacked_size(DType::Q8_0, 32, 16).unwrap());
        ctx.alloc_tensors(&[odd], &buft, BufferUsage::Weights).unwrap();
        let (entry, p) = ctx.tensor_buffer(odd).unwrap();
        let err = entry.buffer.write(p.offset + 100, &[0; 4]).unwrap_err().to_string();
        assert!(err.contains("not within one placed tensor"), "past the tensor's plain bytes: {err}");
    }

    #[test]
    fn a_stack_of_experts_is_each_matrix_repacked_one_after_the_other() {
        let buft = repack_buffer_type();
        for (dtype, k) in
            [(DType::Q4_0, 64), (DType::Q2_K, 256), (DType::Q3_K, 256), (DType::Q4_K, 256), (DType::Q6_K, 256)]
        {
            // 21 rows: each expert ends with a short group, which never spans two experts.
            let (m, n_expert) = (21, 3);
            let mut ctx = Context::new();
            // The plain bytes of m · n_expert rows are the stack's, expert after expert.
            let (_, bytes) = matrix(&mut ctx, dtype, k, m * n_expert);
            let stack = ctx.tensor(dtype, [k, m, n_expert]).unwrap();
            let per_expert = repacked_size(dtype, k, m).unwrap();
            assert_eq!(buft.alloc_size(&ctx.desc(stack).unwrap().layout()), n_expert * per_expert);
            ctx.alloc_tensors(&[stack], &buft, BufferUsage::Weights).unwrap();
            // Pieces that cut experts, groups and rows anywhere.
            for chunk in [5, 777, bytes.len()] {
                ctx.fill_tensor_bytes(stack, 0, bytes.len(), 0).unwrap();
                for (i, piece) in bytes.chunks(chunk).enumerate() {
                    ctx.write_tensor_bytes(stack, i * chunk, piece).unwrap();
                }
                assert_eq!(ctx.get_bytes(stack).unwrap(), bytes, "{dtype} pieces of {chunk}");
            }
            let (entry, p) = ctx.tensor_buffer(stack).unwrap();
            let buf = entry.buffer.as_any().downcast_ref::<RepackBuffer>().unwrap();
            let experts = buf.stack(stack, p.offset).unwrap();
            assert_eq!((experts.count, experts.k, experts.m), (n_expert, k, m));
            let row = dtype.row_size(k).unwrap();
            for e in 0..n_expert {
                let mut want = vec![0u8; per_expert];
                let plain = &bytes[e * m * row..(e + 1) * m * row];
                crate::quant::repack::repack_matrix(dtype, k, m, plain, &mut want).unwrap();
                assert_eq!(experts.matrix(e).unwrap().data, &want[..], "{dtype} expert {e}");
            }
            assert!(experts.matrix(n_expert).is_none());
            let err = buf.matrix(stack, p.offset).unwrap_err().to_string();
            assert!(err.contains("stack of 3 matrices"), "{err}");
        }
    }
}
