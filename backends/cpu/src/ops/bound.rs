//! A tensor bound to its host memory for one kernel: base address, dtype,
//! shape and byte strides, checked once so kernels can index freely.

use gantry_engine::{Context, DType, Error, Result, TensorDesc, TensorId, check_range};
use half::{bf16, f16};

use crate::simd;

/// A tensor's memory and layout. Binding checks that every element the
/// layout can address lies inside the tensor's buffer, and that plain
/// elements are aligned, so the unsafe accessors below only need indices
/// within `ne`.
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    /// Address of element `[0, 0, 0, 0]`.
    pub base: *mut u8,
    /// Element type.
    pub dtype: DType,
    /// Elements per dimension.
    pub ne: [usize; 4],
    /// Byte stride per dimension.
    pub nb: [usize; 4],
}

// SAFETY: a `Bound` is an address plus a layout; kernels share it between the
// threads of one node, each writing a disjoint part, and all finish before the
// node does.
unsafe impl Send for Bound {}
// SAFETY: as above.
unsafe impl Sync for Bound {}

/// Bytes from the first element to one past the last, following the strides
/// (checked: a layout that overflows is rejected).
fn extent(d: &TensorDesc) -> Option<usize> {
    if d.ne.contains(&0) {
        return Some(0);
    }
    let bs = d.dtype.block_size();
    let mut n = (d.ne[0] / bs).checked_sub(1)?.checked_mul(d.nb[0])?.checked_add(d.dtype.bytes_per_block())?;
    for i in 1..4 {
        n = n.checked_add((d.ne[i] - 1).checked_mul(d.nb[i])?)?;
    }
    Some(n)
}

impl Bound {
    /// Binds `t` for reading.
    pub fn src(ctx: &Context, t: TensorId) -> Result<Self> {
        Self::bind(ctx, t, false)
    }

    /// Binds `t` for writing: its buffer must also be writable.
    pub fn dst(ctx: &Context, t: TensorId) -> Result<Self> {
        Self::bind(ctx, t, true)
    }

    fn bind(ctx: &Context, t: TensorId, write: bool) -> Result<Self> {
        let d = ctx.desc(t)?;
        let (entry, placement) = ctx.tensor_buffer(t)?;
        let base = ctx.host_ptr(t)?;
        // Built only on error: binding runs for every node and must not allocate.
        let bad = |reason: String| Error::InvalidTensor {
            tensor: match d.view_src {
                Some(root) => format!("{} (a view of {})", ctx.describe(t), ctx.describe(root)),
                None => ctx.describe(t),
            },
            reason,
        };
        let len = extent(d).ok_or_else(|| bad(format!("strides {:?} overflow", d.nb)))?;
        check_range(entry.buffer_type.name(), entry.buffer.size(), placement.offset, len)
            .map_err(|e| bad(e.to_string()))?;
        if write && !entry.buffer.is_writable() {
            return Err(bad(format!("its {} buffer is read-only", entry.buffer_type.name())));
        }
        if !d.dtype.is_quantized() {
            let size = d.dtype.bytes_per_block();
            let strides_ok = (0..4).all(|i| d.ne[i] <= 1 || d.nb[i].is_multiple_of(size));
            if !(base as usize).is_multiple_of(size) || !strides_ok {
                return Err(bad(format!("{} elements must be {size}-byte aligned", d.dtype)));
            }
        }
        Ok(Self { base, dtype: d.dtype, ne: d.ne, nb: d.nb })
    }

    /// Total number of elements.
    pub fn nelements(&self) -> usize {
        self.ne.iter().product()
    }

    /// Number of rows (`ne[1] * ne[2] * ne[3]`).
    pub fn nrows(&self) -> usize {
        self.ne[1] * self.ne[2] * self.ne[3]
    }

    /// Bytes per element (plain dtypes).
    pub fn elem_size(&self) -> usize {
        self.dtype.bytes_per_block()
    }

    /// Whether the elements of a row are adjacent.
    pub fn rows_are_dense(&self) -> bool {
        self.ne[0] <= 1 || self.nb[0] == self.elem_size()
    }

    /// Whether the tensor is densely packed in logical order (for quantized
    /// dtypes: blocks one after the other).
    pub fn is_contiguous(&self) -> bool {
        let mut expect = self.elem_size();
        for i in 0..4 {
            if self.ne[i] != 1 && self.nb[i] != expect {
                return false;
            }
            expect *= if i == 0 { self.ne[0].div_ceil(self.dtype.block_size()) } else { self.ne[i] };
        }
        true
    }

    /// The indices `[i1, i2, i3]` of row `r` (rows counted in logical order).
    #[inline]
    pub fn row_index(&self, r: usize) -> [usize; 3] {
        let i1 = r % self.ne[1];
        let rest = r / self.ne[1];
        [i1, rest % self.ne[2], rest / self.ne[2]]
    }

    /// Address of element `[i0, i1, i2, i3]`.
    ///
    /// # Safety
    /// Each index must be below its `ne`.
    #[inline]
    pub unsafe fn at(&self, i0: usize, i1: usize, i2: usize, i3: usize) -> *mut u8 {
        let off = i0 * self.nb[0] + i1 * self.nb[1] + i2 * self.nb[2] + i3 * self.nb[3];
        // SAFETY: within the extent checked at binding, given in-range indices.
        unsafe { self.base.add(off) }
    }

    /// Address of the first element of row `[i1, i2, i3]`.
    ///
    /// # Safety
    /// Each index must be below its `ne`.
    #[inline]
    pub unsafe fn row(&self, i1: usize, i2: usize, i3: usize) -> *mut u8 {
        // SAFETY: the caller's guarantee.
        unsafe { self.at(0, i1, i2, i3) }
    }

    /// Reads element `[i0, i1, i2, i3]` as f32 (I32 converted).
    ///
    /// # Safety
    /// Each index must be below its `ne`; the dtype is plain.
    #[inline]
    pub unsafe fn get(&self, i0: usize, i1: usize, i2: usize, i3: usize) -> f32 {
        // SAFETY: in range and aligned (checked at binding).
        unsafe { read_elem(self.dtype, self.at(i0, i1, i2, i3)) }
    }

    /// Writes element `[i0, i1, i2, i3]` from f32 (converted to the dtype).
    ///
    /// # Safety
    /// Each index must be below its `ne`; the dtype is plain; no other thread
    /// accesses this element meanwhile.
    #[inline]
    pub unsafe fn set(&self, i0: usize, i1: usize, i2: usize, i3: usize, v: f32) {
        // SAFETY: in range and aligned (checked at binding).
        unsafe { write_elem(self.dtype, self.at(i0, i1, i2, i3), v) }
    }

    /// Reads row `[i1, i2, i3]` (its first `out.len()` elements, at most
    /// `ne[0]`) into `out` as f32.
    ///
    /// # Safety
    /// Each index must be below its `ne`; `out.len() <= ne[0]`; the dtype is
    /// plain; nothing writes the row meanwhile.
    pub unsafe fn load_row(&self, i1: usize, i2: usize, i3: usize, out: &mut [f32]) {
        let n = out.len().min(self.ne[0]);
        let out = &mut out[..n];
        // SAFETY: the row holds `ne[0] >= n` elements from its first one.
        unsafe {
            let p = self.row(i1, i2, i3);
            if !self.rows_are_dense() {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = read_elem(self.dtype, p.add(i * self.nb[0]));
                }
                return;
            }
            match self.dtype {
                DType::F32 => std::ptr::copy_nonoverlapping(p as *const f32, out.as_mut_ptr(), n),
                DType::F16 => simd::f16_to_f32(std::slice::from_raw_parts(p as *const f16, n), out),
                DType::BF16 => simd::bf16_to_f32_slice(std::slice::from_raw_parts(p as *const bf16, n), out),
                _ => {
                    for (i, o) in out.iter_mut().enumerate() {
                        *o = read_elem(self.dtype, p.add(i * self.nb[0]));
                    }
                }
            }
        }
    }

    /// Writes `v` into row `[i1, i2, i3]` (its first `v.len()` elements),
    /// converting to the dtype.
    ///
    /// # Safety
    /// As [`Bound::load_row`], and no other thread accesses the row meanwhile.
    pub unsafe fn store_row(&self, i1: usize, i2: usize, i3: usize, v: &[f32]) {
        let n = v.len().min(self.ne[0]);
        let v = &v[..n];
        // SAFETY: the row holds `ne[0] >= n` elements from its first one.
        unsafe {
            let p = self.row(i1, i2, i3);
            if !self.rows_are_dense() {
                for (i, &x) in v.iter().enumerate() {
                    write_elem(self.dtype, p.add(i * self.nb[0]), x);
                }
                return;
            }
            match self.dtype {
                DType::F32 => std::ptr::copy(v.as_ptr(), p as *mut f32, n),
                DType::F16 => simd::f32_to_f16(v, std::slice::from_raw_parts_mut(p as *mut f16, n)),
                DType::BF16 => simd::f32_to_bf16_slice(v, std::slice::from_raw_parts_mut(p as *mut bf16, n)),
                _ => {
                    for (i, &x) in v.iter().enumerate() {
                        write_elem(self.dtype, p.add(i * self.nb[0]), x);
                    }
                }
            }
        }
    }
}

/// Reads one plain element as f32.
///
/// # Safety
/// `p` points to an aligned element of `dtype`.
#[inline]
pub unsafe fn read_elem(dtype: DType, p: *const u8) -> f32 {
    // SAFETY: the caller's guarantee.
    unsafe {
        match dtype {
            DType::F32 => *(p as *const f32),
            DType::F16 => (*(p as *const f16)).to_f32(),
            DType::BF16 => (*(p as *const bf16)).to_f32(),
            DType::I32 => *(p as *const i32) as f32,
            _ => f32::NAN,
        }
    }
}

/// Writes one plain element from f32 (I32 truncates toward zero, as C does).
///
/// # Safety
/// `p` points to an aligned, writable element of `dtype`.
#[inline]
pub unsafe fn write_elem(dtype: DType, p: *mut u8, v: f32) {
    // SAFETY: the caller's guarantee.
    unsafe {
        match dtype {
            DType::F32 => *(p as *mut f32) = v,
            DType::F16 => *(p as *mut f16) = f16::from_f32(v),
            DType::BF16 => *(p as *mut bf16) = bf16::from_f32(v),
            DType::I32 => *(p as *mut i32) = v as i32,
            _ => {}
        }
    }
}
