//! Tensor descriptions: dtype, shape, strides, op, sources, view, flags, name.

use std::fmt;

use gantry_arenas::TensorId;

use crate::{DType, Op};

/// Maximum number of dimensions (ggml's `GGML_MAX_DIMS`).
pub const MAX_DIMS: usize = 4;
/// Maximum number of source tensors of one op: SSM_SCAN's seven (state, x,
/// dt, A, B, C, ids) and RWKV_WKV7's, with one to spare (ggml allows ten).
pub const MAX_SRC: usize = 8;
/// Maximum tensor name length in bytes (ggml's 64-byte buffer minus the NUL).
pub const MAX_NAME: usize = 63;

/// Per-tensor flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct TensorFlags(u8);

impl TensorFlags {
    /// No flags.
    pub const NONE: Self = Self(0);
    /// Written by the user before each compute (a graph input).
    pub const INPUT: Self = Self(1);
    /// Read by the user after compute: its memory is never reused.
    pub const OUTPUT: Self = Self(2);
    /// A trainable parameter.
    pub const PARAM: Self = Self(4);

    /// Whether every flag of `other` is set.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// These flags plus `other`.
    pub const fn with(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

/// A tensor name stored inline (no heap allocation), at most [`MAX_NAME`] bytes;
/// longer names are cut at a character boundary.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Name {
    len: u8,
    bytes: [u8; MAX_NAME],
}

impl Name {
    /// The empty name.
    pub const EMPTY: Self = Self { len: 0, bytes: [0; MAX_NAME] };

    /// A name from `s`, cut to [`MAX_NAME`] bytes.
    ///
    /// ```
    /// use gantry_engine::Name;
    /// assert_eq!(Name::new("attn_norm-0").as_str(), "attn_norm-0");
    /// assert_eq!(Name::new(&"x".repeat(100)).as_str().len(), 63);
    /// ```
    pub fn new(s: &str) -> Self {
        let mut end = s.len().min(MAX_NAME);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        let mut bytes = [0; MAX_NAME];
        bytes[..end].copy_from_slice(&s.as_bytes()[..end]);
        Self { len: end as u8, bytes }
    }

    /// The parts joined end to end (cut to [`MAX_NAME`] bytes at a character
    /// boundary), without the formatting machinery: for names made on hot
    /// paths (the scheduler's copies).
    ///
    /// ```
    /// use gantry_engine::Name;
    /// assert_eq!(Name::concat(&["CPU", "#", "x", "#", "2"]).as_str(), "CPU#x#2");
    /// ```
    pub fn concat(parts: &[&str]) -> Self {
        let mut name = Self::EMPTY;
        for part in parts {
            let room = MAX_NAME - name.len as usize;
            let mut end = part.len().min(room);
            while !part.is_char_boundary(end) {
                end -= 1;
            }
            let at = name.len as usize;
            name.bytes[at..at + end].copy_from_slice(&part.as_bytes()[..end]);
            name.len += end as u8;
            if end < part.len() {
                break;
            }
        }
        name
    }

    /// A name from format arguments, written in place without allocating
    /// (cut to [`MAX_NAME`] bytes at a character boundary).
    ///
    /// ```
    /// use gantry_engine::Name;
    /// let n = Name::from_fmt(format_args!("{}#{}#{}", "CPU", "x", 2));
    /// assert_eq!(n.as_str(), "CPU#x#2");
    /// ```
    pub fn from_fmt(args: fmt::Arguments<'_>) -> Self {
        let mut name = Self::EMPTY;
        // Writing into a fixed buffer only fails by running out of room, which truncates.
        let _ = fmt::Write::write_fmt(&mut name, args);
        name
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        // Only whole UTF-8 prefixes are ever stored (see `new`).
        std::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or("")
    }

    /// Whether the name is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl fmt::Write for Name {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = MAX_NAME - self.len as usize;
        let mut end = s.len().min(room);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        let at = self.len as usize;
        self.bytes[at..at + end].copy_from_slice(&s.as_bytes()[..end]);
        self.len += end as u8;
        if end < s.len() { Err(fmt::Error) } else { Ok(()) }
    }
}

impl Default for Name {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The description of one tensor: what it is, not where it lives.
///
/// `ne` counts elements per dimension and `nb` is the byte stride of each,
/// in ggml's order: dimension 0 is the fastest (a row).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TensorDesc {
    /// Element type.
    pub dtype: DType,
    /// Elements per dimension.
    pub ne: [usize; MAX_DIMS],
    /// Byte stride per dimension (`nb[0]` is the element or block size).
    pub nb: [usize; MAX_DIMS],
    /// The op computing this tensor ([`Op::None`] for leafs).
    pub op: Op,
    /// The op's sources, in order.
    pub srcs: [Option<TensorId>; MAX_SRC],
    /// For views: the tensor whose memory this one reads (never itself a view).
    pub view_src: Option<TensorId>,
    /// For views: byte offset into `view_src`.
    pub view_offset: usize,
    /// Input / output / param flags.
    pub flags: TensorFlags,
    /// The tensor's name.
    pub name: Name,
}

/// What a tensor's bytes look like: element type, shape and strides — all
/// that decides how much memory it takes and whether another tensor can be
/// computed element for element over it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TensorLayout {
    /// Element type.
    pub dtype: DType,
    /// Elements per dimension.
    pub ne: [usize; MAX_DIMS],
    /// Byte stride per dimension.
    pub nb: [usize; MAX_DIMS],
}

impl Default for TensorLayout {
    fn default() -> Self {
        Self { dtype: DType::F32, ne: [0; MAX_DIMS], nb: [0; MAX_DIMS] }
    }
}

impl TensorLayout {
    /// Bytes spanned in memory, from the first byte to the last (ggml's
    /// `ggml_nbytes`); 0 for an empty tensor.
    ///
    /// ```
    /// use gantry_engine::{DType, TensorDesc};
    /// let d = TensorDesc::contiguous(DType::F32, [4, 3, 1, 1]).unwrap();
    /// assert_eq!(d.layout().nbytes(), 48);
    /// ```
    pub fn nbytes(&self) -> usize {
        if self.ne.contains(&0) {
            return 0;
        }
        let bs = self.dtype.block_size();
        let mut n = if bs == 1 { self.dtype.bytes_per_block() } else { self.ne[0] * self.nb[0] / bs };
        let first = if bs == 1 { 0 } else { 1 };
        for i in first..MAX_DIMS {
            n += (self.ne[i] - 1) * self.nb[i];
        }
        n
    }

    /// Whether two of the elements lie at one byte (a stride of zero, or
    /// smaller than what the dimensions below it span), so that writing
    /// every element would write some byte twice. An empty tensor writes
    /// nothing and does not overlap.
    ///
    /// ```
    /// use gantry_engine::{DType, TensorDesc};
    /// let mut l = TensorDesc::contiguous(DType::F32, [4, 3, 1, 1]).unwrap().layout();
    /// assert!(!l.overlaps_itself());
    /// l.nb[1] = 0; // every row at the first row's bytes
    /// assert!(l.overlaps_itself());
    /// l.nb[1] = 8; // rows of 16 bytes, 8 apart
    /// assert!(l.overlaps_itself());
    /// ```
    pub fn overlaps_itself(&self) -> bool {
        if self.ne.contains(&0) {
            return false;
        }
        // Steps per dimension (blocks along the first), with their strides.
        let mut dims: [(usize, usize); MAX_DIMS] = std::array::from_fn(|i| (self.nb[i], self.ne[i]));
        dims[0].1 = self.ne[0] / self.dtype.block_size();
        dims.sort_unstable();
        // Sorted by stride, each dimension that steps must start beyond the
        // bytes of everything below it.
        let mut span = self.dtype.bytes_per_block();
        for (nb, n) in dims {
            if n <= 1 {
                continue;
            }
            if nb < span {
                return true;
            }
            span = match nb.checked_mul(n - 1).and_then(|s| s.checked_add(span)) {
                Some(s) => s,
                None => return true,
            };
        }
        false
    }
}

impl TensorDesc {
    /// The tensor's dtype, shape and strides.
    #[inline]
    pub fn layout(&self) -> TensorLayout {
        TensorLayout { dtype: self.dtype, ne: self.ne, nb: self.nb }
    }

    /// A contiguous leaf of `dtype` with `ne` elements per dimension. Fails when
    /// a row is not a whole number of blocks or a size overflows.
    pub fn contiguous(dtype: DType, ne: [usize; MAX_DIMS]) -> Result<Self, String> {
        Ok(Self {
            dtype,
            ne,
            nb: contiguous_strides(dtype, ne)?,
            op: Op::None,
            srcs: [None; MAX_SRC],
            view_src: None,
            view_offset: 0,
            flags: TensorFlags::NONE,
            name: Name::EMPTY,
        })
    }

    /// The sources that are set, in order.
    pub fn sources(&self) -> impl Iterator<Item = TensorId> + '_ {
        self.srcs.iter().flatten().copied()
    }

    /// Total number of elements.
    pub fn nelements(&self) -> usize {
        self.ne.iter().product()
    }

    /// Number of rows (`ne[1] * ne[2] * ne[3]`).
    pub fn nrows(&self) -> usize {
        self.ne[1] * self.ne[2] * self.ne[3]
    }

    /// How many tokens a node computes at once, as ggml's GPU backends
    /// count them to decide whether reading host weights is worth the copy
    /// (`Device::offload_op`): the columns of a MUL_MAT, the tokens (dim 2)
    /// of a MUL_MAT_ID (dim 1 is the experts each token uses) or a ROPE,
    /// nothing for a GET_ROWS (which reads only its rows), else the rows.
    pub fn offload_batch(&self) -> usize {
        match self.op {
            Op::GetRows => 0,
            Op::MulMat => self.ne[1],
            Op::MulMatId | Op::Rope(_) => self.ne[2],
            _ => self.nrows(),
        }
    }

    /// Bytes of one contiguous row.
    pub fn row_size(&self) -> usize {
        self.ne[0] / self.dtype.block_size() * self.dtype.bytes_per_block()
    }

    /// Bytes spanned by the tensor in memory, from its first byte to its last
    /// (ggml's `ggml_nbytes`); 0 for an empty tensor.
    pub fn nbytes(&self) -> usize {
        self.layout().nbytes()
    }

    /// Number of dimensions, counting up to the last one that is not 1.
    pub fn n_dims(&self) -> usize {
        (1..MAX_DIMS).rev().find(|&i| self.ne[i] > 1).map_or(1, |i| i + 1)
    }

    fn is_contiguous_n(&self, n: usize) -> bool {
        let mut next_nb = self.dtype.bytes_per_block();
        if self.ne[0] != self.dtype.block_size() && self.nb[0] != next_nb {
            return false;
        }
        next_nb *= self.ne[0] / self.dtype.block_size();
        for i in 1..MAX_DIMS {
            if self.ne[i] != 1 {
                if i > n {
                    if self.nb[i] != next_nb {
                        return false;
                    }
                    next_nb *= self.ne[i];
                } else {
                    next_nb = self.ne[i] * self.nb[i];
                }
            }
        }
        true
    }

    /// Whether the elements are densely packed in ggml's order.
    pub fn is_contiguous(&self) -> bool {
        self.is_contiguous_n(0)
    }

    /// Whether each row is contiguous and rows are packed within dims 2 and 3
    /// (gaps allowed between rows: ggml's `ggml_is_contiguous_1`).
    pub fn is_contiguous_rows(&self) -> bool {
        self.is_contiguous_n(1)
    }

    /// Whether the strides are out of order (a permuted view).
    pub fn is_permuted(&self) -> bool {
        self.nb[0] > self.nb[1] || self.nb[1] > self.nb[2] || self.nb[2] > self.nb[3]
    }

    /// Whether dimensions 0 and 1 are swapped in memory.
    pub fn is_transposed(&self) -> bool {
        self.nb[0] > self.nb[1]
    }

    /// Whether this tensor reads another one's memory.
    pub fn is_view(&self) -> bool {
        self.view_src.is_some()
    }

    /// Whether the shapes are equal.
    pub fn same_shape(&self, other: &TensorDesc) -> bool {
        self.ne == other.ne
    }

    /// Whether `self` can be broadcast to `to` by repetition (each dim divides).
    pub fn can_repeat_to(&self, to: &TensorDesc) -> bool {
        can_repeat(self.ne, to.ne)
    }
}

/// Whether shape `from` repeats evenly into `to` (every `to[i]` a multiple of `from[i]`).
pub fn can_repeat(from: [usize; MAX_DIMS], to: [usize; MAX_DIMS]) -> bool {
    if from.contains(&0) {
        return to.contains(&0);
    }
    (0..MAX_DIMS).all(|i| to[i].is_multiple_of(from[i]))
}

/// The strides of a densely packed tensor.
pub fn contiguous_strides(dtype: DType, ne: [usize; MAX_DIMS]) -> Result<[usize; MAX_DIMS], String> {
    let bs = dtype.block_size();
    if !ne[0].is_multiple_of(bs) {
        return Err(format!("row length {} is not a multiple of {}'s block size {bs}", ne[0], dtype));
    }
    let mut nb = [0; MAX_DIMS];
    nb[0] = dtype.bytes_per_block();
    nb[1] = (ne[0] / bs).checked_mul(nb[0]).ok_or_else(|| overflow_msg(dtype, ne))?;
    for i in 2..MAX_DIMS {
        nb[i] = nb[i - 1].checked_mul(ne[i - 1]).ok_or_else(|| overflow_msg(dtype, ne))?;
    }
    nb[3].checked_mul(ne[3]).ok_or_else(|| overflow_msg(dtype, ne))?;
    // Keep every byte offset representable as isize, as Rust pointers require.
    if nb[3] * ne[3] > isize::MAX as usize {
        return Err(overflow_msg(dtype, ne));
    }
    Ok(nb)
}

fn overflow_msg(dtype: DType, ne: [usize; MAX_DIMS]) -> String {
    format!("size of a {dtype} tensor of shape {ne:?} overflows")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nbytes_and_contiguity() {
        let t = TensorDesc::contiguous(DType::F32, [3, 4, 2, 1]).unwrap();
        assert_eq!(t.nb, [4, 12, 48, 96]);
        assert_eq!(t.nbytes(), 96);
        assert_eq!(t.nrows(), 8);
        assert!(t.is_contiguous() && !t.is_permuted() && !t.is_transposed());
        assert_eq!(t.n_dims(), 3);

        let mut tr = t;
        tr.ne = [4, 3, 2, 1];
        tr.nb = [12, 4, 48, 96];
        assert!(tr.is_transposed() && tr.is_permuted() && !tr.is_contiguous());
        assert_eq!(tr.nbytes(), 96);

        let q = TensorDesc::contiguous(DType::Q4_0, [64, 2, 1, 1]).unwrap();
        assert_eq!(q.nb, [18, 36, 72, 72]);
        assert_eq!(q.nbytes(), 72);
        assert!(q.is_contiguous());
    }

    #[test]
    fn rows_contiguous_with_gaps() {
        // A view taking the first 3 of every 5 elements of each row.
        let mut v = TensorDesc::contiguous(DType::F32, [3, 4, 1, 1]).unwrap();
        v.nb[1] = 20;
        v.nb[2] = 80;
        v.nb[3] = 80;
        assert!(!v.is_contiguous());
        assert!(v.is_contiguous_rows());
    }

    #[test]
    fn bad_sizes() {
        assert!(TensorDesc::contiguous(DType::Q4_K, [100, 1, 1, 1]).is_err());
        assert!(TensorDesc::contiguous(DType::F32, [usize::MAX / 2, 4, 1, 1]).is_err());
        assert!(TensorDesc::contiguous(DType::F32, [1 << 21, 1 << 21, 1 << 19, 1]).is_err());
    }

    #[test]
    fn repeat_rules() {
        assert!(can_repeat([1, 3, 1, 1], [4, 6, 2, 1]));
        assert!(!can_repeat([2, 3, 1, 1], [3, 3, 1, 1]));
        assert!(can_repeat([0, 1, 1, 1], [0, 5, 1, 1]));
        assert!(!can_repeat([0, 1, 1, 1], [2, 5, 1, 1]));
    }
}
