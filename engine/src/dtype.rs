//! Element types: the plain ones and ggml's block-quantized formats.
//!
//! Sizes match ggml exactly (`ggml_type_size`, `ggml_blck_size`), so tensors
//! read from GGUF files map one to one.

use std::fmt;

/// An element type. Quantized types store `block_size` elements in
/// `bytes_per_block` bytes; a row's length must be a multiple of the block size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[expect(non_camel_case_types, reason = "ggml's names for the block types: Q4_0, Q8_K, ...")]
#[repr(u8)]
pub enum DType {
    /// 32-bit IEEE float.
    F32,
    /// 16-bit IEEE float.
    F16,
    /// bfloat16.
    BF16,
    /// 32-bit signed integer (indices, positions).
    I32,
    /// 32 weights: f16 scale + 4-bit quants.
    Q4_0,
    /// 32 weights: f16 scale and min + 4-bit quants.
    Q4_1,
    /// 32 weights: f16 scale + 5-bit quants.
    Q5_0,
    /// 32 weights: f16 scale and min + 5-bit quants.
    Q5_1,
    /// 32 weights: f16 scale + 8-bit quants.
    Q8_0,
    /// 32 weights: f16 scale and sum + 8-bit quants (activations).
    Q8_1,
    /// 256-weight super-block, 2-bit quants.
    Q2_K,
    /// 256-weight super-block, 3-bit quants.
    Q3_K,
    /// 256-weight super-block, 4-bit quants.
    Q4_K,
    /// 256-weight super-block, 5-bit quants.
    Q5_K,
    /// 256-weight super-block, 6-bit quants.
    Q6_K,
    /// 256-weight super-block, f32 scale + 8-bit quants (activations).
    Q8_K,
    /// 32 weights: f16 scale + 4-bit indices into a non-linear table (read only).
    IQ4_NL,
    /// 256-weight super-block: 6-bit sub-block scales + 4-bit indices into
    /// IQ4_NL's table (read only).
    IQ4_XS,
    /// 32 weights: E8M0 shared exponent + 4-bit E2M1 floats (read only).
    MXFP4,
}

/// Size facts of a dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DTypeInfo {
    /// ggml's name (`"f32"`, `"q4_0"`, ...).
    pub name: &'static str,
    /// Elements per block (1 for plain types).
    pub block_size: usize,
    /// Bytes per block.
    pub bytes_per_block: usize,
    /// Whether this is a block-quantized type.
    pub is_quantized: bool,
}

const fn plain(name: &'static str, bytes: usize) -> DTypeInfo {
    DTypeInfo { name, block_size: 1, bytes_per_block: bytes, is_quantized: false }
}

const fn quant(name: &'static str, block_size: usize, bytes_per_block: usize) -> DTypeInfo {
    DTypeInfo { name, block_size, bytes_per_block, is_quantized: true }
}

/// Elements per block of the K-quant super-blocks.
pub const QK_K: usize = 256;

impl DType {
    /// The block-quantized types weights come in: every quantized type but
    /// the activation formats Q8_1 and Q8_K.
    pub const QUANTIZED_WEIGHTS: [DType; 10] = [
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q8_0,
        DType::Q2_K,
        DType::Q3_K,
        DType::Q4_K,
        DType::Q5_K,
        DType::Q6_K,
    ];

    /// The block-quantized weight types Gantry reads but does not write: their
    /// values come from a lookup table (no reference quantizer here).
    pub const LOOKUP_WEIGHTS: [DType; 3] = [DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4];

    /// The quantized types CPY and SET_ROWS write from F32 (ggml's set).
    pub const QUANTIZE_TARGETS: [DType; 5] = [DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0];

    /// Every dtype, in declaration order.
    pub const ALL: [DType; 19] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::I32,
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q8_0,
        DType::Q8_1,
        DType::Q2_K,
        DType::Q3_K,
        DType::Q4_K,
        DType::Q5_K,
        DType::Q6_K,
        DType::Q8_K,
        DType::IQ4_NL,
        DType::IQ4_XS,
        DType::MXFP4,
    ];

    /// The size facts of this dtype.
    pub const fn info(self) -> DTypeInfo {
        match self {
            DType::F32 => plain("f32", 4),
            DType::F16 => plain("f16", 2),
            DType::BF16 => plain("bf16", 2),
            DType::I32 => plain("i32", 4),
            DType::Q4_0 => quant("q4_0", 32, 2 + 16),
            DType::Q4_1 => quant("q4_1", 32, 2 + 2 + 16),
            DType::Q5_0 => quant("q5_0", 32, 2 + 4 + 16),
            DType::Q5_1 => quant("q5_1", 32, 2 + 2 + 4 + 16),
            DType::Q8_0 => quant("q8_0", 32, 2 + 32),
            DType::Q8_1 => quant("q8_1", 32, 2 + 2 + 32),
            DType::Q2_K => quant("q2_K", QK_K, QK_K / 16 + QK_K / 4 + 2 + 2),
            DType::Q3_K => quant("q3_K", QK_K, QK_K / 8 + QK_K / 4 + 12 + 2),
            DType::Q4_K => quant("q4_K", QK_K, 2 + 2 + 12 + QK_K / 2),
            DType::Q5_K => quant("q5_K", QK_K, 2 + 2 + 12 + QK_K / 8 + QK_K / 2),
            DType::Q6_K => quant("q6_K", QK_K, QK_K / 2 + QK_K / 4 + QK_K / 16 + 2),
            DType::Q8_K => quant("q8_K", QK_K, 4 + QK_K + QK_K / 16 * 2),
            DType::IQ4_NL => quant("iq4_nl", 32, 2 + 16),
            DType::IQ4_XS => quant("iq4_xs", QK_K, 2 + 2 + QK_K / 64 + QK_K / 2),
            DType::MXFP4 => quant("mxfp4", 32, 1 + 16),
        }
    }

    /// ggml's name of the type.
    pub const fn name(self) -> &'static str {
        self.info().name
    }

    /// Elements per block (1 for plain types).
    pub const fn block_size(self) -> usize {
        self.info().block_size
    }

    /// Bytes per block (the element size for plain types).
    pub const fn bytes_per_block(self) -> usize {
        self.info().bytes_per_block
    }

    /// Whether this is a block-quantized type.
    pub const fn is_quantized(self) -> bool {
        self.info().is_quantized
    }

    /// Whether this is a float type computed element by element (F32, F16, BF16).
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16)
    }

    /// Bytes of one row of `n` elements, or `None` when `n` is not a multiple
    /// of the block size or the size overflows.
    ///
    /// ```
    /// use gantry_engine::DType;
    /// assert_eq!(DType::Q4_0.row_size(64), Some(36));
    /// assert_eq!(DType::Q4_0.row_size(33), None);
    /// assert_eq!(DType::F16.row_size(3), Some(6));
    /// ```
    pub const fn row_size(self, n: usize) -> Option<usize> {
        let info = self.info();
        if !n.is_multiple_of(info.block_size) {
            return None;
        }
        (n / info.block_size).checked_mul(info.bytes_per_block)
    }

    /// The dtype with ggml's name `name` (case-insensitive).
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|t| t.name().eq_ignore_ascii_case(name))
    }

    /// The dtype with GGUF's / ggml's numeric type id.
    pub const fn from_ggml_id(id: u32) -> Option<DType> {
        Some(match id {
            0 => DType::F32,
            1 => DType::F16,
            2 => DType::Q4_0,
            3 => DType::Q4_1,
            6 => DType::Q5_0,
            7 => DType::Q5_1,
            8 => DType::Q8_0,
            9 => DType::Q8_1,
            10 => DType::Q2_K,
            11 => DType::Q3_K,
            12 => DType::Q4_K,
            13 => DType::Q5_K,
            14 => DType::Q6_K,
            15 => DType::Q8_K,
            20 => DType::IQ4_NL,
            23 => DType::IQ4_XS,
            26 => DType::I32,
            30 => DType::BF16,
            39 => DType::MXFP4,
            _ => return None,
        })
    }

    /// GGUF's / ggml's numeric type id.
    pub const fn ggml_id(self) -> u32 {
        match self {
            DType::F32 => 0,
            DType::F16 => 1,
            DType::Q4_0 => 2,
            DType::Q4_1 => 3,
            DType::Q5_0 => 6,
            DType::Q5_1 => 7,
            DType::Q8_0 => 8,
            DType::Q8_1 => 9,
            DType::Q2_K => 10,
            DType::Q3_K => 11,
            DType::Q4_K => 12,
            DType::Q5_K => 13,
            DType::Q6_K => 14,
            DType::Q8_K => 15,
            DType::IQ4_NL => 20,
            DType::IQ4_XS => 23,
            DType::MXFP4 => 39,
            DType::I32 => 26,
            DType::BF16 => 30,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ggml_sizes() {
        // ggml_type_size / ggml_blck_size, from ggml.c's type_traits table.
        let expect = [
            (DType::F32, 1, 4),
            (DType::F16, 1, 2),
            (DType::BF16, 1, 2),
            (DType::I32, 1, 4),
            (DType::Q4_0, 32, 18),
            (DType::Q4_1, 32, 20),
            (DType::Q5_0, 32, 22),
            (DType::Q5_1, 32, 24),
            (DType::Q8_0, 32, 34),
            (DType::Q8_1, 32, 36),
            (DType::Q2_K, 256, 84),
            (DType::Q3_K, 256, 110),
            (DType::Q4_K, 256, 144),
            (DType::Q5_K, 256, 176),
            (DType::Q6_K, 256, 210),
            (DType::Q8_K, 256, 292),
            (DType::IQ4_NL, 32, 18),
            (DType::IQ4_XS, 256, 136),
            (DType::MXFP4, 32, 17),
        ];
        for (t, bs, bytes) in expect {
            assert_eq!((t.block_size(), t.bytes_per_block()), (bs, bytes), "{t}");
        }
    }

    #[test]
    fn ids_round_trip() {
        for t in DType::ALL {
            assert_eq!(DType::from_ggml_id(t.ggml_id()), Some(t));
            assert_eq!(DType::from_name(&t.name().to_uppercase()), Some(t));
        }
        assert_eq!(DType::from_ggml_id(4), None, "Q4_2 was removed from ggml");
    }

    #[test]
    fn row_size_overflow_is_none() {
        assert_eq!(DType::F32.row_size(usize::MAX), None);
    }
}
