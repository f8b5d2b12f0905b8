//! The repacked layout: weight rows in interleaved groups of [`GROUP_ROWS`],
//! and the form one activation column takes for the kernels that read them.
//!
//! A group holds rows `16g .. 16g + 16` of the matrix (the last group is
//! padded with zero rows) and is two areas, each 64-byte aligned:
//!
//! - **scales**: per 32-value block, the 16 rows' f16 scales `d` (32 bytes),
//!   then for the types with a min (Q4_1) the 16 rows' mins `m` (32 bytes).
//!   One 256-bit load and one `vcvtph2ps` give a block's 16 scales as f32.
//! - **quants**: per block, 64-byte chunks, chunk `c` holding the 4-byte
//!   word `c` of each row's quant bytes, row `r` at bytes `4r .. 4r + 4`.
//!   One 64-byte load is 16 rows × 4 consecutive bytes, the 16 i32 lanes a
//!   `vpdpbusd` multiplies against one activation word broadcast. The 4-bit
//!   types keep ggml's nibble order (low nibble: value `j`, high: value
//!   `j + 16`), so chunk `c`'s low nibbles are values `4c .. 4c + 4` and its
//!   high nibbles values `16 + 4c ..`: one load, an `and` and a shift give
//!   both registers. Q8_0's signed quants are stored with their top bit
//!   flipped (`q + 128`, unsigned), the operand `vpdpbusd` wants unsigned.
//!
//!   Q5_0 and Q5_1 add, after a block's four nibble chunks, one chunk of
//!   fifth bits, 4 bytes a row, arranged by [`fifth_byte`] so that a
//!   nibble chunk's fifth bits are that chunk shifted to bit 4 and masked.
//!
//! Scales and quants in separate areas keep every 64-byte quant load
//! aligned whatever the type's block size (a Q4_0 block of 16 rows is 288
//! bytes, not a multiple of 64). A group of `k` values takes 16 times a
//! row's bytes, plus at most 32 bytes padding the scale area: the layout
//! reads no more memory than the plain rows do.
//!
//! The integer behind a stored quant `u` is `u − OFFSET` (Q4_0: 8, Q8_0:
//! 128, Q4_1: 0 with its min added separately); the kernels multiply the
//! unsigned `u` and start each block's sum at `−OFFSET · Σa` (the activation
//! column's block sum), which is the same integer.

use gantry_engine::quant::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1, F16Bits, QuantBlock};
use gantry_engine::{DType, Result};

use super::super::Isa;
use super::super::weight::ActBlock;
use super::Job;

/// Weight rows per group: one AVX-512 register of i32 lanes.
pub const GROUP_ROWS: usize = 16;
/// Values per block of every repacked type.
pub(crate) const BLOCK: usize = 32;
/// Alignment of the areas of a group and of a prepared column.
const AREA_ALIGN: usize = 64;

pub(crate) fn round_up(n: usize) -> usize {
    n.div_ceil(AREA_ALIGN) * AREA_ALIGN
}

/// A weight type with a repacked layout, as the driver, the buffer and
/// GET_ROWS see it: its group and column layouts, packing both ways, and
/// the kernel of each path. The 32-value types have it through
/// [`RepackType`], the K-quants through [`super::k_records::KRecord`].
pub(crate) trait Repacked: 'static {
    /// The plain (ggml) block.
    type Block: QuantBlock + Send + Sync;
    /// The activation block it is multiplied with (its dot partner).
    type Act: ActBlock;
    /// The layout of one group of rows of `k` values, `None` when `k` is
    /// not a positive multiple of the block size.
    fn group_layout(k: usize) -> Option<GroupLayout>;
    /// The prepared form of one activation column of `k` values.
    fn column_layout(k: usize) -> ColumnLayout;
    /// Writes activation blocks `a` (one column) into `out` in the form of
    /// [`Repacked::column_layout`] for the kernels of `isa`.
    fn prepare_column(isa: Isa, a: &[Self::Act], layout: &ColumnLayout, out: &mut [u8]);
    /// Repacks `rows` plain rows of `k` values into one group.
    fn pack(k: usize, rows: usize, plain: &[u8], out: &mut [u8]) -> Result<()>;
    /// The first `rows` rows of one group back into plain rows.
    fn unpack(k: usize, rows: usize, group: &[u8], plain: &mut [u8]) -> Result<()>;
    /// Row `r` of one group, dequantized into `out[..k]`.
    fn dequantize(k: usize, group: &[u8], r: usize, out: &mut [f32]) -> Result<()>;
    /// Runs `job` on the path `isa`.
    ///
    /// # Safety
    /// As [`Job`] says, and `isa` is a path this CPU has.
    unsafe fn run_job(isa: Isa, job: &Job);
}

impl<R: RepackType> Repacked for R {
    type Block = R::Block;
    type Act = R::Act;
    fn group_layout(k: usize) -> Option<GroupLayout> {
        GroupLayout::new::<R>(k)
    }
    fn column_layout(k: usize) -> ColumnLayout {
        ColumnLayout::new(k)
    }
    fn prepare_column(isa: Isa, a: &[R::Act], layout: &ColumnLayout, out: &mut [u8]) {
        prepare_column::<R>(isa, a, layout, out)
    }
    fn pack(k: usize, rows: usize, plain: &[u8], out: &mut [u8]) -> Result<()> {
        super::pack::pack::<R>(k, rows, plain, out)
    }
    fn unpack(k: usize, rows: usize, group: &[u8], plain: &mut [u8]) -> Result<()> {
        super::pack::unpack::<R>(k, rows, group, plain)
    }
    fn dequantize(k: usize, group: &[u8], r: usize, out: &mut [f32]) -> Result<()> {
        super::pack::dequantize::<R>(k, group, r, out)
    }
    unsafe fn run_job(isa: Isa, job: &Job) {
        // SAFETY: the caller's contract.
        unsafe { super::driver::run_small_job::<R>(isa, job) }
    }
}

/// A 32-value weight type that has a repacked layout.
pub(crate) trait RepackType: 'static {
    /// The plain (ggml) block.
    type Block: QuantBlock + Send + Sync;
    /// The activation block it is multiplied with (its dot partner).
    type Act: ActBlock + ActQuants;
    /// f16 values per row and block in the scale area: 1 (`d`) or 2 (`d`, `m`).
    const HEADERS: usize;
    /// Quant bytes per row and block: 16 (two 4-bit values a byte) or 32.
    const QS: usize;
    /// Whether a quant byte holds two 4-bit values (low: value `j`, high: `j + 16`).
    const NIBBLES: bool;
    /// XOR applied to every quant byte when repacking (0x80 makes Q8_0's
    /// signed quants unsigned).
    const FLIP: u8;
    /// The integer of a stored quant `u` is `u − OFFSET`.
    const OFFSET: i32;

    /// The block's f16 headers (`d`, and `m` where [`RepackType::HEADERS`] is 2).
    fn headers(b: &Self::Block) -> [F16Bits; 2];
    /// Whether the 4-bit quants have a fifth bit each (Q5_0, Q5_1), kept in
    /// a plane of its own after the block's nibble chunks (see [`fifth_byte`]).
    const FIFTH: bool = false;

    /// The block's [`RepackType::QS`] quant bytes as they lie.
    fn quants(b: &Self::Block) -> &[u8];
    /// The block's fifth bits (bit `j`: value `j`), 0 without.
    fn fifth(b: &Self::Block) -> u32 {
        let _ = b;
        0
    }
    /// The block with these headers, quant bytes and fifth bits.
    fn block(headers: [F16Bits; 2], quants: &[u8], fifth: u32) -> Self::Block;

    /// Whether the block has a min (`x = d·q + m`).
    const HAS_MIN: bool = Self::HEADERS == 2;

    /// The 4 bytes a prepared column keeps per block beside its scale (see
    /// [`ColumnLayout`]): the activation's `s = d·Σq` (f32) for the types
    /// with a min, else the integer each block's sum starts at on `isa`.
    fn aux(isa: Isa, a: &Self::Act) -> [u8; 4];
}

/// What the kernels read of an activation block: its scale and quants.
pub(crate) trait ActQuants {
    /// The scale.
    fn scale(&self) -> f32;
    /// The 32 quants.
    fn qs(&self) -> &[i8; 32];
}

impl ActQuants for BlockQ8_0 {
    #[inline]
    fn scale(&self) -> f32 {
        self.d.to_f32()
    }
    fn qs(&self) -> &[i8; 32] {
        &self.qs
    }
}

impl ActQuants for BlockQ8_1 {
    #[inline]
    fn scale(&self) -> f32 {
        self.d.to_f32()
    }
    fn qs(&self) -> &[i8; 32] {
        &self.qs
    }
}

/// `−offset · Σq` of an activation block: where a block's integer sum starts.
#[inline]
fn start(offset: i32, a: &impl ActQuants) -> [u8; 4] {
    let sum: i32 = a.qs().iter().map(|&q| i32::from(q)).sum();
    (-offset * sum).to_le_bytes()
}

/// Q4_0: `x = d·(q − 8)`.
pub(crate) struct RQ4_0;
/// Q4_1: `x = d·q + m`.
pub(crate) struct RQ4_1;
/// Q8_0: `x = d·q`, q signed.
pub(crate) struct RQ8_0;

impl RepackType for RQ4_0 {
    type Block = BlockQ4_0;
    type Act = BlockQ8_0;
    const HEADERS: usize = 1;
    const QS: usize = 16;
    const NIBBLES: bool = true;
    const FLIP: u8 = 0;
    const OFFSET: i32 = 8;
    fn headers(b: &BlockQ4_0) -> [F16Bits; 2] {
        [b.d, F16Bits::default()]
    }
    fn quants(b: &BlockQ4_0) -> &[u8] {
        &b.qs
    }
    fn block(h: [F16Bits; 2], q: &[u8], _fifth: u32) -> BlockQ4_0 {
        let mut qs = [0; 16];
        qs.copy_from_slice(q);
        BlockQ4_0 { d: h[0], qs }
    }
    #[inline]
    fn aux(_isa: Isa, a: &BlockQ8_0) -> [u8; 4] {
        start(Self::OFFSET, a)
    }
}

impl RepackType for RQ4_1 {
    type Block = BlockQ4_1;
    type Act = BlockQ8_1;
    const HEADERS: usize = 2;
    const QS: usize = 16;
    const NIBBLES: bool = true;
    const FLIP: u8 = 0;
    const OFFSET: i32 = 0;
    fn headers(b: &BlockQ4_1) -> [F16Bits; 2] {
        [b.d, b.m]
    }
    fn quants(b: &BlockQ4_1) -> &[u8] {
        &b.qs
    }
    fn block(h: [F16Bits; 2], q: &[u8], _fifth: u32) -> BlockQ4_1 {
        let mut qs = [0; 16];
        qs.copy_from_slice(q);
        BlockQ4_1 { d: h[0], m: h[1], qs }
    }
    #[inline]
    fn aux(_isa: Isa, a: &BlockQ8_1) -> [u8; 4] {
        a.s.to_f32().to_le_bytes()
    }
}

impl RepackType for RQ8_0 {
    type Block = BlockQ8_0;
    type Act = BlockQ8_0;
    const HEADERS: usize = 1;
    const QS: usize = 32;
    const NIBBLES: bool = false;
    const FLIP: u8 = 0x80;
    const OFFSET: i32 = 128;
    fn headers(b: &BlockQ8_0) -> [F16Bits; 2] {
        [b.d, F16Bits::default()]
    }
    fn quants(b: &BlockQ8_0) -> &[u8] {
        bytemuck::cast_slice(&b.qs)
    }
    fn block(h: [F16Bits; 2], q: &[u8], _fifth: u32) -> BlockQ8_0 {
        let mut qs = [0; 32];
        qs.copy_from_slice(bytemuck::cast_slice(q));
        BlockQ8_0 { d: h[0], qs }
    }
    #[inline]
    fn aux(isa: Isa, a: &BlockQ8_0) -> [u8; 4] {
        // Only `vpdpbusd` multiplies the unsigned form: the other paths'
        // `vpmaddubsw` could saturate on 255·127 pairs, so they multiply the
        // signed quants (sign trick) and start at zero.
        #[cfg(target_arch = "x86_64")]
        if isa == Isa::Avx512Vnni {
            return start(Self::OFFSET, a);
        }
        let _ = (isa, a);
        [0; 4]
    }
}

/// Q5_0: `x = d·(q − 16)`, q five bits.
pub(crate) struct RQ5_0;
/// Q5_1: `x = d·q + m`, q five bits.
pub(crate) struct RQ5_1;

fn nibble_quants(qs: &[u8]) -> [u8; 16] {
    let mut out = [0; 16];
    out.copy_from_slice(qs);
    out
}

impl RepackType for RQ5_0 {
    type Block = BlockQ5_0;
    type Act = BlockQ8_0;
    const HEADERS: usize = 1;
    const QS: usize = 16;
    const NIBBLES: bool = true;
    const FLIP: u8 = 0;
    const OFFSET: i32 = 16;
    const FIFTH: bool = true;
    fn headers(b: &BlockQ5_0) -> [F16Bits; 2] {
        [b.d, F16Bits::default()]
    }
    fn quants(b: &BlockQ5_0) -> &[u8] {
        &b.qs
    }
    fn fifth(b: &BlockQ5_0) -> u32 {
        u32::from_le_bytes(b.qh)
    }
    fn block(h: [F16Bits; 2], q: &[u8], fifth: u32) -> BlockQ5_0 {
        BlockQ5_0 { d: h[0], qh: fifth.to_le_bytes(), qs: nibble_quants(q) }
    }
    #[inline]
    fn aux(_isa: Isa, a: &BlockQ8_0) -> [u8; 4] {
        start(Self::OFFSET, a)
    }
}

impl RepackType for RQ5_1 {
    type Block = BlockQ5_1;
    type Act = BlockQ8_1;
    const HEADERS: usize = 2;
    const QS: usize = 16;
    const NIBBLES: bool = true;
    const FLIP: u8 = 0;
    const OFFSET: i32 = 0;
    const FIFTH: bool = true;
    fn headers(b: &BlockQ5_1) -> [F16Bits; 2] {
        [b.d, b.m]
    }
    fn quants(b: &BlockQ5_1) -> &[u8] {
        &b.qs
    }
    fn fifth(b: &BlockQ5_1) -> u32 {
        u32::from_le_bytes(b.qh)
    }
    fn block(h: [F16Bits; 2], q: &[u8], fifth: u32) -> BlockQ5_1 {
        BlockQ5_1 { d: h[0], m: h[1], qh: fifth.to_le_bytes(), qs: nibble_quants(q) }
    }
    #[inline]
    fn aux(_isa: Isa, a: &BlockQ8_1) -> [u8; 4] {
        a.s.to_f32().to_le_bytes()
    }
}

/// Runs `f::<R>(args)` with the repacked type `R` of `dtype`; `None` for a
/// type without a repacked layout.
macro_rules! with_repack_type {
    ($dtype:expr, $f:ident ( $($arg:expr),* )) => {
        match $dtype {
            DType::Q4_0 => Some($f::<$crate::quant::repack::layout::RQ4_0>($($arg),*)),
            DType::Q4_1 => Some($f::<$crate::quant::repack::layout::RQ4_1>($($arg),*)),
            DType::Q8_0 => Some($f::<$crate::quant::repack::layout::RQ8_0>($($arg),*)),
            DType::Q5_0 => Some($f::<$crate::quant::repack::layout::RQ5_0>($($arg),*)),
            DType::Q5_1 => Some($f::<$crate::quant::repack::layout::RQ5_1>($($arg),*)),
            DType::Q4_K => Some($f::<$crate::quant::repack::k_records::Records<$crate::quant::repack::q4k_layout::RQ4K>>($($arg),*)),
            DType::Q5_K => Some($f::<$crate::quant::repack::k_records::Records<$crate::quant::repack::q4k_layout::RQ5K>>($($arg),*)),
            DType::Q6_K => Some($f::<$crate::quant::repack::k_records::Records<$crate::quant::repack::q6k_layout::RQ6K>>($($arg),*)),
            DType::Q2_K => Some($f::<$crate::quant::repack::k_records::Records<$crate::quant::repack::q23k_layout::RQ2K>>($($arg),*)),
            DType::Q3_K => Some($f::<$crate::quant::repack::k_records::Records<$crate::quant::repack::q23k_layout::RQ3K>>($($arg),*)),
            _ => None,
        }
    };
}
pub(crate) use with_repack_type;

/// The weight types with a repacked layout: every block-quantized weight
/// type ([`DType::QUANTIZED_WEIGHTS`]; the lookup-table ones are not), in
/// `DType` order.
pub const REPACKED_DTYPES: [DType; 10] = DType::QUANTIZED_WEIGHTS;

/// Whether `dtype` has a repacked layout (one of [`REPACKED_DTYPES`]).
pub fn repacks(dtype: DType) -> bool {
    REPACKED_DTYPES.contains(&dtype)
}

/// Where things are in one group of rows of `k` values. For the K-quants
/// ([`super::q4k_layout`]) a group is its super-blocks one after the other,
/// `quant_stride` bytes each, and `scale_stride` and `quants_at` are 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GroupLayout {
    /// Blocks per row.
    pub nb: usize,
    /// Bytes of one block's scales (16 rows × `HEADERS` f16).
    pub scale_stride: usize,
    /// Offset of the quant area from the group's start.
    pub quants_at: usize,
    /// Bytes of one block's quants (16 rows × `QS`).
    pub quant_stride: usize,
    /// Bytes of the group.
    pub bytes: usize,
}

impl GroupLayout {
    /// The layout for rows of `k` values (a positive multiple of 32).
    pub(crate) fn new<R: RepackType>(k: usize) -> Option<GroupLayout> {
        if k == 0 || !k.is_multiple_of(BLOCK) {
            return None;
        }
        let nb = k / BLOCK;
        let scale_stride = GROUP_ROWS * 2 * R::HEADERS;
        let quant_stride = GROUP_ROWS * R::QS + if R::FIFTH { FIFTH_PLANE } else { 0 };
        let quants_at = round_up(nb.checked_mul(scale_stride)?);
        let bytes = quants_at.checked_add(nb.checked_mul(quant_stride)?)?;
        Some(GroupLayout { nb, scale_stride, quants_at, quant_stride, bytes })
    }

    /// Offset, within a block's quant area, of byte `t` (0..4) of row `r`'s
    /// fifth bits (see [`fifth_byte`]).
    #[inline]
    pub(crate) fn fifth_at(r: usize, t: usize) -> usize {
        GROUP_ROWS * 16 + 4 * r + t
    }

    /// Offset, within a block's quant area, of quant byte `j` of row `r`.
    #[inline]
    pub(crate) fn quant_byte(r: usize, j: usize) -> usize {
        64 * (j / 4) + 4 * r + j % 4
    }
}

/// Bytes of a block's fifth-bit plane (Q5_0, Q5_1): 4 per row, after the
/// 256 bytes of nibble chunks (one more 64-byte chunk).
const FIFTH_PLANE: usize = 4 * GROUP_ROWS;

/// The fifth-bit byte `t` (0..4) of a row: bit `2c` is the fifth bit of
/// value `4c + t` and bit `2c + 1` that of value `16 + 4c + t` (c < 4), the
/// values chunk `c`'s low and high nibbles hold; so chunk `c`'s fifth bits
/// are one 64-byte load, shifted to bit 4 and masked, away.
pub(crate) fn fifth_byte(fifth: u32, t: usize) -> u8 {
    let mut v = 0u8;
    for c in 0..4 {
        v |= (((fifth >> (4 * c + t)) & 1) as u8) << (2 * c);
        v |= (((fifth >> (16 + 4 * c + t)) & 1) as u8) << (2 * c + 1);
    }
    v
}

/// The inverse of [`fifth_byte`] over a row's 4 bytes.
pub(crate) fn fifth_bits(bytes: [u8; 4]) -> u32 {
    let mut fifth = 0u32;
    for (t, &v) in bytes.iter().enumerate() {
        for c in 0..4 {
            fifth |= u32::from((v >> (2 * c)) & 1) << (4 * c + t);
            fifth |= u32::from((v >> (2 * c + 1)) & 1) << (16 + 4 * c + t);
        }
    }
    fifth
}

/// Groups of a matrix of `m` rows.
pub(crate) fn groups(m: usize) -> usize {
    m.div_ceil(GROUP_ROWS)
}

fn size<R: Repacked>(k: usize, m: usize) -> Option<usize> {
    R::group_layout(k)?.bytes.checked_mul(groups(m))
}

/// Bytes of the repacked form of `m` rows of `k` values of `dtype`, or
/// `None` when the type has no repacked layout or `k` is not a positive
/// multiple of the block size.
pub fn repacked_size(dtype: DType, k: usize, m: usize) -> Option<usize> {
    with_repack_type!(dtype, size(k, m)).flatten()
}

/// One quantized activation column in the form the repacked kernels read:
/// the quants of every block one after the other (32 bytes a block, the
/// 4-byte words the kernels broadcast), then each block's scale as f32, then
/// each block's [`RepackType::aux`] word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ColumnLayout {
    /// Blocks.
    pub nb: usize,
    /// Offset of the f32 scales.
    pub d_at: usize,
    /// Offset of the aux words.
    pub aux_at: usize,
    /// Bytes of one column (64-byte aligned).
    pub bytes: usize,
}

impl ColumnLayout {
    pub(crate) fn new(k: usize) -> ColumnLayout {
        let nb = k / BLOCK;
        ColumnLayout { nb, d_at: 32 * nb, aux_at: 36 * nb, bytes: round_up(40 * nb) }
    }
}

/// Writes activation blocks `a` (one column) into `out` in [`ColumnLayout`] form for `R` on `isa`.
fn prepare_column<R: RepackType>(isa: Isa, a: &[R::Act], layout: &ColumnLayout, out: &mut [u8]) {
    let (qs, rest) = out.split_at_mut(layout.d_at);
    let (d, aux) = rest.split_at_mut(layout.aux_at - layout.d_at);
    for (b, blk) in a.iter().enumerate().take(layout.nb) {
        qs[32 * b..32 * b + 32].copy_from_slice(bytemuck::cast_slice(blk.qs()));
        d[4 * b..4 * b + 4].copy_from_slice(&blk.scale().to_le_bytes());
        aux[4 * b..4 * b + 4].copy_from_slice(&R::aux(isa, blk));
    }
}
