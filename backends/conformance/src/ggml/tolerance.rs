//! ggml's own tolerance for each op: `max_nmse_err()` of the test case
//! class of llama.cpp's `tests/test-backend-ops.cpp` that tests the op.

use gantry_engine::DType;

/// What decides ggml's tolerance for a case besides its op: the dtypes
/// copied from and into (CPY, SET_ROWS) and the elements compared.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ToleranceFacts {
    /// CPY's and SET_ROWS's source dtype.
    pub src_dtype: DType,
    /// The result's dtype.
    pub dst_dtype: DType,
    /// CPY's elements; SET_ROWS's rows written, in elements.
    pub elements: usize,
}

/// The quantized types whose CPY and SET_ROWS tolerances test-backend-ops
/// estimates from one quantization step.
fn estimated(dtype: DType) -> bool {
    matches!(dtype, DType::Q4_0 | DType::Q4_1 | DType::IQ4_NL | DType::Q5_0 | DType::Q5_1 | DType::Q8_0)
}

/// ggml's tolerance (largest normalized mean squared error) for a case of
/// `op` (ggml's name).
pub fn ggml_tolerance(op: &str, facts: ToleranceFacts) -> f64 {
    let ToleranceFacts { src_dtype, dst_dtype, elements } = facts;
    match op {
        // test_argmax, test_count_equal.
        "ARGMAX" | "COUNT_EQUAL" => 0.0,
        // test_mul_mat, test_mul_mat_id, test_flash_attn_ext, test_conv_2d
        // (ggml_conv_2d_direct), test_conv_transpose_2d. (test_conv_2d_dw,
        // test_conv_transpose_1d and test_im2col keep the default.)
        "MUL_MAT" | "MUL_MAT_ID" | "FLASH_ATTN_EXT" | "CONV_2D" | "CONV_TRANSPOSE_2D" => 5e-4,
        // test_soft_max.
        "SOFT_MAX" => 1e-6,
        // test_cpy: exact within a type; into a quantized type, the error of
        // one quantization step off (values in [-150, 150], which the
        // estimate divides out again); 1e-6 otherwise.
        "CPY" if src_dtype == dst_dtype => 0.0,
        "CPY" if estimated(dst_dtype) => {
            let mut e = 1.0 / 8.0 * 150.0;
            if dst_dtype == DType::IQ4_NL {
                e *= 2.0;
            }
            if matches!(dst_dtype, DType::Q5_0 | DType::Q5_1) {
                e /= 2.0;
            }
            if dst_dtype == DType::Q8_0 {
                e /= 8.0;
            }
            e * e / (150.0 * 150.0 * 0.25 * elements as f64)
        }
        "CPY" => 1e-6,
        // test_set_rows: the same estimate over the rows written (values in
        // [-1, 1]), 1e-7 otherwise.
        "SET_ROWS" if estimated(dst_dtype) => {
            let mut e: f64 = 1.0 / 8.0;
            if matches!(dst_dtype, DType::Q5_0 | DType::Q5_1) {
                e /= 2.0;
            }
            if dst_dtype == DType::Q8_0 {
                e /= 8.0;
            }
            e *= e;
            if src_dtype == DType::F16 {
                e *= 16.0;
            }
            e / (0.25 * elements as f64)
        }
        // Every other test case: test_case::max_nmse_err(). (TOP_K's is an
        // index-set distance held to the same 1e-7, that is: equal sets.)
        _ => 1e-7,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_op() {
        let plain = ToleranceFacts { src_dtype: DType::F32, dst_dtype: DType::F32, elements: 10 };
        assert_eq!(ggml_tolerance("MUL_MAT", plain), 5e-4);
        assert_eq!(ggml_tolerance("ADD", plain), 1e-7);
        assert_eq!(ggml_tolerance("CONV_2D", plain), 5e-4);
        assert_eq!(ggml_tolerance("CONV_2D_DW", plain), 1e-7);
        assert_eq!(ggml_tolerance("COUNT_EQUAL", plain), 0.0);
        assert_eq!(ggml_tolerance("CPY", plain), 0.0);
        assert_eq!(ggml_tolerance("CPY", ToleranceFacts { dst_dtype: DType::F16, ..plain }), 1e-6);
        let q8 = ToleranceFacts { dst_dtype: DType::Q8_0, elements: 1000, ..plain };
        let e = (150.0f64 / 8.0 / 8.0).powi(2) / (150.0 * 150.0 * 0.25 * 1000.0);
        assert!((ggml_tolerance("CPY", q8) - e).abs() < 1e-15);
        assert!(ggml_tolerance("SET_ROWS", q8) > 0.0);
    }
}
