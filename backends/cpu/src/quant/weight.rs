//! What the mul_mat driver needs to know about a weight type, in one trait:
//! its block, its dot partner, the activation quantizer, the dot product, and
//! how it unpacks into the tiled kernel's form.

use gantry_engine::quant::{
    BlockIQ4NL, BlockIQ4XS, BlockMXFP4, BlockQ2K, BlockQ3K, BlockQ4_0, BlockQ4_1, BlockQ4K, BlockQ5_0, BlockQ5_1,
    BlockQ5K, BlockQ6K, BlockQ8_0, BlockQ8_1, BlockQ8K, QuantBlock, QuantizeBlock,
};

use super::unpack::{UnpackK, UnpackSmall};
use super::{Isa, quantize_activation};

/// A dot partner (activation) block type and where its quants sit, so the
/// tiled kernel can read 32 quants at a time from it.
pub(crate) trait ActBlock: QuantizeBlock + Send + Sync {
    /// 32-value chunks per block.
    const CHUNKS: usize;
    /// Byte offset of the quants in a block.
    const QS_OFFSET: usize;
    /// Quantizes an f32 row into these blocks.
    fn quantize_on(isa: Isa, x: &[f32], y: &mut [Self]);
    /// The scale of 32-value chunk `j` of a row.
    fn chunk_scale(row: &[Self], j: usize) -> f32;
    /// `d·Σq` over `group` values starting at value `start` (16 or 32 values).
    fn group_sum(row: &[Self], start: usize, group: usize) -> f32;
}

impl ActBlock for BlockQ8_0 {
    const CHUNKS: usize = 1;
    const QS_OFFSET: usize = 2;
    fn quantize_on(isa: Isa, x: &[f32], y: &mut [Self]) {
        quantize_activation::quantize_row_q8_0(isa, x, y)
    }
    fn chunk_scale(row: &[Self], j: usize) -> f32 {
        row[j].d.to_f32()
    }
    fn group_sum(_row: &[Self], _start: usize, _group: usize) -> f32 {
        0.0
    }
}

impl ActBlock for BlockQ8_1 {
    const CHUNKS: usize = 1;
    const QS_OFFSET: usize = 4;
    fn quantize_on(isa: Isa, x: &[f32], y: &mut [Self]) {
        quantize_activation::quantize_row_q8_1(isa, x, y)
    }
    fn chunk_scale(row: &[Self], j: usize) -> f32 {
        row[j].d.to_f32()
    }
    fn group_sum(row: &[Self], start: usize, _group: usize) -> f32 {
        // Q8_1 carries d·Σq per 32 values; the `_1` weights have one min per 32.
        row[start / 32].s.to_f32()
    }
}

impl ActBlock for BlockQ8K {
    const CHUNKS: usize = 8;
    const QS_OFFSET: usize = 4;
    fn quantize_on(isa: Isa, x: &[f32], y: &mut [Self]) {
        quantize_activation::quantize_row_q8_k(isa, x, y)
    }
    fn chunk_scale(row: &[Self], j: usize) -> f32 {
        row[j / 8].d
    }
    fn group_sum(row: &[Self], start: usize, group: usize) -> f32 {
        let b = &row[start / 256];
        let g0 = (start % 256) / 16;
        let s: i32 = b.bsums[g0..g0 + group / 16].iter().map(|&s| s as i32).sum();
        b.d * s as f32
    }
}

/// Weight rows per call of [`WeightType::dot_rows`].
pub(crate) const ROWS: usize = 4;

/// A weight type of the quantized mul_mat.
pub(crate) trait WeightType: 'static {
    /// The weight block.
    type Block: QuantBlock + Send + Sync;
    /// The dot partner block.
    type Act: ActBlock;
    /// Values per min group (16 or 32), or 0 when the tiled form has no mins.
    const MIN_GROUP: usize;
    /// Whether the tiled path uses the integer-scale K-quant form
    /// ([`WeightType::unpack_k`]) rather than the float form ([`WeightType::unpack`]).
    const INT_K: bool;
    /// Whether every quant of the float form ([`WeightType::unpack`]) is in
    /// 0..=127 (the types with mins), which the tiled kernel multiplies
    /// without making the product's operands unsigned first.
    const UNSIGNED_Q: bool;
    /// The dot product of a row of weights and a row of activations.
    fn dot(isa: Isa, x: &[Self::Block], y: &[Self::Act]) -> f32;
    /// The dot products of [`ROWS`] rows of weights with one row of
    /// activations (what a matrix-vector product does), reading the
    /// activations once for all of them where the path has a kernel for it.
    fn dot_rows(isa: Isa, x: [&[Self::Block]; ROWS], y: &[Self::Act]) -> [f32; ROWS] {
        x.map(|row| Self::dot(isa, row, y))
    }
    /// Float form of one block: `q` (block values, signed), `scale16` (one
    /// scale per 16 values) and `mins` (one per `MIN_GROUP` values, added:
    /// `x = scale·q + min`).
    fn unpack(b: &Self::Block, q: &mut [i8], scale16: &mut [f32], mins: &mut [f32]);
    /// [`WeightType::unpack`] of every block of `row`, on the path `isa`
    /// where it has a kernel for the type: `q` holds the row's values,
    /// `scale16` one per 16 and `mins` one per `MIN_GROUP` (empty without).
    fn unpack_row(isa: Isa, row: &[Self::Block], q: &mut [i8], scale16: &mut [f32], mins: &mut [f32]) {
        let _ = isa;
        unpack_row_scalar::<Self>(row, q, scale16, mins)
    }
    /// Integer form of one K-quant super-block: unsigned quants `q` (256),
    /// `sc` (per 32-value chunk, 16 i16 lanes: the scale of its first 16
    /// values in lanes 0..8, of its last 16 in lanes 8..16), `mins` (per 16
    /// values, added) and the returned super-block scale `d`:
    /// `x = d·sc·q + min`.
    fn unpack_k(b: &Self::Block, q: &mut [u8], sc: &mut [i16], mins: &mut [f32]) -> f32;
}

/// [`WeightType::unpack_row`] block by block.
fn unpack_row_scalar<W: WeightType + ?Sized>(row: &[W::Block], q: &mut [i8], scale16: &mut [f32], mins: &mut [f32]) {
    let bs = <W::Block as QuantBlock>::ELEMS;
    let per_block_mins = bs.checked_div(W::MIN_GROUP).unwrap_or(0);
    for (b, blk) in row.iter().enumerate() {
        W::unpack(
            blk,
            &mut q[b * bs..(b + 1) * bs],
            &mut scale16[b * bs / 16..(b + 1) * bs / 16],
            &mut mins[b * per_block_mins..(b + 1) * per_block_mins],
        );
    }
}

/// Defines `fn $name(isa, row, q, scale16, mins) -> bool`: the AVX2 row
/// unpacker `$avx2` on every x86-64 SIMD path (`true`), nothing elsewhere
/// (`false`: the caller unpacks block by block).
macro_rules! fast_unpack {
    ($($name:ident: $block:ty, |$row:ident, $q:ident, $s:ident, $m:ident| $avx2:expr;)*) => {$(
        #[cfg_attr(not(target_arch = "x86_64"), expect(unused_variables, reason = "no SIMD unpacker off x86-64"))]
        fn $name(isa: Isa, $row: &[$block], $q: &mut [i8], $s: &mut [f32], $m: &mut [f32]) -> bool {
            #[cfg(target_arch = "x86_64")]
            if isa != Isa::Scalar {
                // SAFETY: every x86-64 `Isa` but `Scalar` is handed out after checking AVX2 and F16C.
                unsafe { $avx2 };
                return true;
            }
            false
        }
    )*};
}

fast_unpack! {
    unpack_row_q4_0: BlockQ4_0, |row, q, s, _m| super::unpack_avx2::unpack_q4_0(row, q, s);
    unpack_row_q4_1: BlockQ4_1, |row, q, s, m| super::unpack_avx2::unpack_q4_1(row, q, s, m);
    unpack_row_q8_0: BlockQ8_0, |row, q, s, _m| super::unpack_avx2::unpack_q8_0(row, q, s);
}

/// No SIMD row unpacker: the caller unpacks block by block.
fn no_fast_unpack<B>(_: Isa, _: &[B], _: &mut [i8], _: &mut [f32], _: &mut [f32]) -> bool {
    false
}

fn unpack_small<B: UnpackSmall>(b: &B, q: &mut [i8], scale16: &mut [f32], mins: &mut [f32]) {
    let u = b.unpack();
    q[..32].copy_from_slice(&u.q);
    scale16[0] = u.d;
    scale16[1] = u.d;
    if let Some(m) = mins.first_mut() {
        *m = u.m;
    }
}

/// The integer K form: quants made unsigned by adding `offset` (4 for Q3_K,
/// 32 for Q6_K), which moves `−d·sc·offset` into the mins.
fn unpack_k_form<B: UnpackK>(b: &B, offset: i8, q: &mut [u8], sc: &mut [i16], mins: &mut [f32]) -> f32 {
    let u = b.unpack();
    for (o, &v) in q[..256].iter_mut().zip(&u.q) {
        *o = (v + offset) as u8;
    }
    for chunk in 0..8 {
        sc[16 * chunk..16 * chunk + 8].fill(u.sc[2 * chunk]);
        sc[16 * chunk + 8..16 * chunk + 16].fill(u.sc[2 * chunk + 1]);
    }
    for g in 0..16 {
        mins[g] = -(u.d * (u.sc[g] as f32 * offset as f32) + u.dmin * u.m[g] as f32);
    }
    u.d
}

/// The float form of a 256-value block with integer group scales and no
/// mins (IQ4_XS): its values, and `d·sc` per 16 values (the float product
/// the engine's dequantizer forms).
fn k_float_form<B: UnpackK>(b: &B, q: &mut [i8], scale16: &mut [f32], _mins: &mut [f32]) {
    let u = b.unpack();
    q[..256].copy_from_slice(&u.q);
    for (s, &sc) in scale16[..16].iter_mut().zip(&u.sc) {
        *s = u.d * sc as f32;
    }
}

macro_rules! weight_types {
    (small: $($w:ident: $block:ty, $act:ty, $min_group:expr, $unsigned:expr, $dot:ident, $rows_from:expr, $fast:path;)*) => {$(
        pub(crate) struct $w;
        impl WeightType for $w {
            type Block = $block;
            type Act = $act;
            const MIN_GROUP: usize = $min_group;
            const INT_K: bool = false;
            const UNSIGNED_Q: bool = $unsigned;
            #[inline]
            fn dot(isa: Isa, x: &[$block], y: &[$act]) -> f32 {
                super::$dot(isa, x.len() * <$block as QuantBlock>::ELEMS, x, y)
            }
            #[inline]
            fn dot_rows(isa: Isa, x: [&[$block]; ROWS], y: &[$act]) -> [f32; ROWS] {
                match isa {
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: `Isa::Avx2` is only handed out after checking AVX2, FMA and F16C.
                    Isa::Avx2 if size_of_val(x[0]) + 1 > $rows_from => unsafe {
                        super::rows_avx2::dot_rows::<$block, ROWS>(x, y)
                    },
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: `Isa::Avx512` is only handed out after checking AVX-512 F/BW/VL/DQ and AVX2/FMA/F16C.
                    Isa::Avx512 if size_of_val(x[0]) + 1 > $rows_from => unsafe {
                        super::rows_avx512::dot_rows_plain::<$block, ROWS>(x, y)
                    },
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: as `Isa::Avx512`, with AVX512_VNNI checked too.
                    Isa::Avx512Vnni if size_of_val(x[0]) + 1 > $rows_from => unsafe {
                        super::rows_avx512::dot_rows_vnni::<$block, ROWS>(x, y)
                    },
                    _ => x.map(|row| Self::dot(isa, row, y)),
                }
            }
            #[inline]
            fn unpack(b: &$block, q: &mut [i8], scale16: &mut [f32], mins: &mut [f32]) {
                unpack_small(b, q, scale16, mins)
            }
            #[inline]
            fn unpack_row(isa: Isa, row: &[$block], q: &mut [i8], scale16: &mut [f32], mins: &mut [f32]) {
                if !$fast(isa, row, q, scale16, mins) {
                    unpack_row_scalar::<Self>(row, q, scale16, mins)
                }
            }
            fn unpack_k(_: &$block, _: &mut [u8], _: &mut [i16], _: &mut [f32]) -> f32 {
                0.0
            }
        }
    )*};
    (lookup: $($w:ident: $block:ty, $act:ty, $dot:ident, $form:path;)*) => {$(
        pub(crate) struct $w;
        impl WeightType for $w {
            type Block = $block;
            type Act = $act;
            const MIN_GROUP: usize = 0;
            const INT_K: bool = false;
            // Table values are signed (−127..=113 for IQ4, −12..=12 for MXFP4).
            const UNSIGNED_Q: bool = false;
            #[inline]
            fn dot(isa: Isa, x: &[$block], y: &[$act]) -> f32 {
                super::$dot(isa, x.len() * <$block as QuantBlock>::ELEMS, x, y)
            }
            #[inline]
            fn unpack(b: &$block, q: &mut [i8], scale16: &mut [f32], mins: &mut [f32]) {
                $form(b, q, scale16, mins)
            }
            fn unpack_k(_: &$block, _: &mut [u8], _: &mut [i16], _: &mut [f32]) -> f32 {
                0.0
            }
        }
    )*};
    (k: $($w:ident: $block:ty, $offset:expr, $dot:ident;)*) => {$(
        pub(crate) struct $w;
        impl WeightType for $w {
            type Block = $block;
            type Act = BlockQ8K;
            const MIN_GROUP: usize = 16;
            const INT_K: bool = true;
            // The K form has its own kernel (unsigned quants always).
            const UNSIGNED_Q: bool = false;
            #[inline]
            fn dot(isa: Isa, x: &[$block], y: &[BlockQ8K]) -> f32 {
                super::$dot(isa, x.len() * <$block as QuantBlock>::ELEMS, x, y)
            }
            fn unpack(_: &$block, _: &mut [i8], _: &mut [f32], _: &mut [f32]) {}
            #[inline]
            fn unpack_k(b: &$block, q: &mut [u8], sc: &mut [i16], mins: &mut [f32]) -> f32 {
                unpack_k_form(b, $offset, q, sc, mins)
            }
        }
    )*};
}

// The last column: the row bytes from which the several-row kernel is used
// (measured with the AVX2 kernel; the AVX-512 one takes the same threshold,
// unmeasured).
// Q8_0 rows shorter than a page streamed from memory more slowly four at a
// time than one at a time (measured: 612-byte rows, 0.7× to 0.85×; 1632-byte
// rows, 0.86×; 14336-value rows, 1.4× faster), while the 4-bit types gained
// at every length; so short Q8_0 rows go one at a time.
weight_types! { small:
    WQ4_0: BlockQ4_0, BlockQ8_0, 0, false, vec_dot_q4_0_q8_0_on, 0, unpack_row_q4_0;
    WQ4_1: BlockQ4_1, BlockQ8_1, 32, true, vec_dot_q4_1_q8_1_on, 0, unpack_row_q4_1;
    WQ5_0: BlockQ5_0, BlockQ8_0, 0, false, vec_dot_q5_0_q8_0_on, 0, no_fast_unpack;
    WQ5_1: BlockQ5_1, BlockQ8_1, 32, true, vec_dot_q5_1_q8_1_on, 0, no_fast_unpack;
    WQ8_0: BlockQ8_0, BlockQ8_0, 0, false, vec_dot_q8_0_q8_0_on, 4096, unpack_row_q8_0;
}

weight_types! { k:
    WQ2K: BlockQ2K, 0, vec_dot_q2_k_q8_k_on;
    WQ3K: BlockQ3K, 4, vec_dot_q3_k_q8_k_on;
    WQ4K: BlockQ4K, 0, vec_dot_q4_k_q8_k_on;
    WQ5K: BlockQ5K, 0, vec_dot_q5_k_q8_k_on;
    WQ6K: BlockQ6K, 32, vec_dot_q6_k_q8_k_on;
}

// The lookup types: the tiled path takes their float form (the K form's
// unsigned quants would be table values plus 127, past what `vpmaddubsw`
// multiplies without saturating).
weight_types! { lookup:
    WIQ4NL: BlockIQ4NL, BlockQ8_0, vec_dot_iq4_nl_q8_0_on, unpack_small;
    WMXFP4: BlockMXFP4, BlockQ8_0, vec_dot_mxfp4_q8_0_on, unpack_small;
    WIQ4XS: BlockIQ4XS, BlockQ8K, vec_dot_iq4_xs_q8_k_on, k_float_form;
}

/// Runs `f::<W>()` with the weight type `W` of `dtype`.
macro_rules! with_weight_type {
    ($dtype:expr, $f:ident ( $($arg:expr),* )) => {
        match $dtype {
            DType::Q4_0 => Some($f::<$crate::quant::weight::WQ4_0>($($arg),*)),
            DType::Q4_1 => Some($f::<$crate::quant::weight::WQ4_1>($($arg),*)),
            DType::Q5_0 => Some($f::<$crate::quant::weight::WQ5_0>($($arg),*)),
            DType::Q5_1 => Some($f::<$crate::quant::weight::WQ5_1>($($arg),*)),
            DType::Q8_0 => Some($f::<$crate::quant::weight::WQ8_0>($($arg),*)),
            DType::Q2_K => Some($f::<$crate::quant::weight::WQ2K>($($arg),*)),
            DType::Q3_K => Some($f::<$crate::quant::weight::WQ3K>($($arg),*)),
            DType::Q4_K => Some($f::<$crate::quant::weight::WQ4K>($($arg),*)),
            DType::Q5_K => Some($f::<$crate::quant::weight::WQ5K>($($arg),*)),
            DType::Q6_K => Some($f::<$crate::quant::weight::WQ6K>($($arg),*)),
            DType::IQ4_NL => Some($f::<$crate::quant::weight::WIQ4NL>($($arg),*)),
            DType::IQ4_XS => Some($f::<$crate::quant::weight::WIQ4XS>($($arg),*)),
            DType::MXFP4 => Some($f::<$crate::quant::weight::WMXFP4>($($arg),*)),
            _ => None,
        }
    };
}
pub(crate) use with_weight_type;

/// Bytes of one unpacked row of `k` values in the tiled path's form, with
/// the offsets (from the row start) of its scales and mins.
pub(crate) struct TileRow {
    /// Bytes of one row.
    pub bytes: usize,
    /// Offset of the scales (f32 per 16 values, or i16 ×16 per chunk for `INT_K`).
    pub scales: usize,
    /// Offset of the super-block scales (f32 per 256 values, `INT_K` only).
    pub ds: usize,
    /// Offset of the mins (f32 per `MIN_GROUP` values).
    pub mins: usize,
    /// Mins per row.
    pub n_mins: usize,
    /// Mins per row rounded up to whole vectors of 8 (padded with zeros).
    pub mins_padded: usize,
}

impl TileRow {
    pub(crate) fn new<W: WeightType>(k: usize) -> TileRow {
        let n_mins = k.checked_div(W::MIN_GROUP).unwrap_or(0);
        let align = |n: usize| n.div_ceil(64) * 64;
        let scales = align(k);
        let scale_bytes = if W::INT_K { 2 * 16 * (k / 32) } else { 4 * (k / 16) };
        let ds = align(scales + scale_bytes);
        let ds_bytes = if W::INT_K { 4 * (k / 256) } else { 0 };
        let mins = align(ds + ds_bytes);
        let mins_padded = n_mins.next_multiple_of(8);
        TileRow { bytes: align(mins + 4 * mins_padded), scales, ds, mins, n_mins, mins_padded }
    }
}
