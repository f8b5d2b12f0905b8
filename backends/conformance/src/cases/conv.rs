//! Cases for the convolutions: IM2COL (1-D and 2-D, F32 and F16 in and
//! out), CONV_2D through both of its paths (the direct op, and IM2COL +
//! MUL_MAT as ggml's `ggml_conv_2d` builds it), CONV_2D_DW (WHCN and
//! channel-adjacent images), CONV_TRANSPOSE_1D and CONV_TRANSPOSE_2D, with
//! strides, padding, dilation and odd sizes.

use gantry_engine::{ConvParams, DType};

use super::{Layout, input, shape};
use crate::{Built, Case, Tolerance};

fn conv_tag(c: &ConvParams) -> String {
    format!("s={:?},p={:?},d={:?}", c.stride, c.pad, c.dilation)
}

pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let convs = [
        ConvParams::UNIT,
        ConvParams::square(2, 1, 1),
        ConvParams { stride: [1, 2], pad: [2, 0], dilation: [2, 1] },
        ConvParams { stride: [3, 1], pad: [0, 1], dilation: [1, 3] },
    ];
    // [KW, KH, IC, OC] over [W, H, IC, N].
    let shapes = [
        ([3, 3, 2, 4], [8, 7, 2, 2]),
        ([1, 1, 3, 5], [5, 4, 3, 1]),
        ([4, 2, 1, 3], [9, 6, 1, 3]),
        ([5, 5, 3, 2], [12, 10, 3, 1]),
    ];
    for (kne, xne) in shapes {
        for conv in convs {
            if conv.output_size(0, xne[0], kne[0]).is_none() || conv.output_size(1, xne[1], kne[1]).is_none() {
                continue;
            }
            let tag = format!("k={},x={},{}", shape(kne), shape(xne), conv_tag(&conv));
            for (src_t, dst_t) in [(DType::F32, DType::F32), (DType::F32, DType::F16), (DType::F16, DType::F16)] {
                let name = format!("IM2COL(type_input={src_t},dst_type={dst_t},{tag})");
                cases.push(
                    Case::new("IM2COL", name, move |ctx| {
                        let k = ctx.tensor(DType::F16, kne)?;
                        let x = ctx.tensor(src_t, xne)?;
                        Ok(Built::output(ctx.im2col(k, x, conv, true, dst_t)?))
                    })
                    .tolerance(Tolerance::Exact),
                );
            }
            for kt in [DType::F32, DType::F16] {
                let name = format!("CONV_2D(type_kernel={kt},{tag},direct)");
                cases.push(
                    Case::new("CONV_2D", name, move |ctx| {
                        let k = ctx.tensor(kt, kne)?;
                        let x = ctx.tensor(DType::F32, xne)?;
                        Ok(Built::output(ctx.conv_2d_direct(k, x, conv)?))
                    })
                    .tolerance(Tolerance::Nmse(5e-6)),
                );
            }
            let name = format!("CONV_2D(type_kernel=f32,{tag},im2col)");
            cases.push(
                Case::new("CONV_2D", name, move |ctx| {
                    let k = ctx.tensor(DType::F32, kne)?;
                    let x = ctx.tensor(DType::F32, xne)?;
                    Ok(Built::output(ctx.conv_2d(k, x, conv)?))
                })
                .tolerance(Tolerance::Nmse(5e-6)),
            );
            // Depthwise: one [KW, KH] kernel per channel.
            let kdw = [kne[0], kne[1], 1, xne[2]];
            for layout in [Layout::Contiguous, Layout::Permuted] {
                let tag = format!(
                    "k={},x={},{}{}",
                    shape(kdw),
                    shape(xne),
                    conv_tag(&conv),
                    if layout == Layout::Permuted { ",cwhn" } else { "" }
                );
                cases.push(
                    Case::new("CONV_2D_DW", format!("CONV_2D_DW({tag})"), move |ctx| {
                        let k = ctx.tensor(DType::F32, kdw)?;
                        let x = if layout == Layout::Permuted {
                            // Channels adjacent in memory: stored [C, W, H, N].
                            let stored = ctx.tensor(DType::F32, [xne[2], xne[0], xne[1], xne[3]])?;
                            ctx.permute(stored, [2, 0, 1, 3])?
                        } else {
                            ctx.tensor(DType::F32, xne)?
                        };
                        Ok(Built::output(ctx.conv_2d_dw_direct(k, x, conv)?))
                    })
                    .tolerance(Tolerance::Nmse(5e-6)),
                );
            }
        }
    }
    // 1-D IM2COL: [K, IC, OC] over [L, IC, N].
    for (kne, xne, conv) in [
        ([3, 4, 2, 1], [10, 4, 2, 1], ConvParams::UNIT),
        ([5, 2, 3, 1], [16, 2, 3, 1], ConvParams { stride: [2, 1], pad: [2, 0], dilation: [1, 1] }),
        ([2, 1, 1, 1], [7, 1, 1, 1], ConvParams { stride: [1, 1], pad: [1, 0], dilation: [3, 1] }),
    ] {
        for dst_t in [DType::F32, DType::F16] {
            let name = format!(
                "IM2COL(type_input=f32,dst_type={dst_t},k={},x={},{},1d)",
                shape(kne),
                shape(xne),
                conv_tag(&conv)
            );
            cases.push(
                Case::new("IM2COL", name, move |ctx| {
                    let k = ctx.tensor(DType::F32, kne)?;
                    let x = ctx.tensor(DType::F32, xne)?;
                    Ok(Built::output(ctx.im2col(k, x, conv, false, dst_t)?))
                })
                .tolerance(Tolerance::Exact),
            );
        }
    }
    // A transposed (non-contiguous) image.
    cases.push(
        Case::new("IM2COL", "IM2COL(type_input=f32,dst_type=f32,k=[3,3,2,1],x=[6,7,2,1],transposed)".into(), |ctx| {
            let k = ctx.tensor(DType::F32, [3, 3, 2, 1])?;
            let (_, x) = input(ctx, DType::F32, [6, 7, 2, 1], Layout::Transposed)?;
            Ok(Built::output(ctx.im2col(k, x, ConvParams::square(1, 1, 1), true, DType::F32)?))
        })
        .tolerance(Tolerance::Exact),
    );
    cases.push(
        Case::new("CONV_2D", "CONV_2D(type_kernel=f32,k=[3,3,2,3],x=[7,6,2,2],transposed,direct)".into(), |ctx| {
            let k = ctx.tensor(DType::F32, [3, 3, 2, 3])?;
            let (_, x) = input(ctx, DType::F32, [7, 6, 2, 2], Layout::Transposed)?;
            Ok(Built::output(ctx.conv_2d_direct(k, x, ConvParams::square(1, 1, 1))?))
        })
        .tolerance(Tolerance::Nmse(5e-6)),
    );
    // Transposed convolutions: [K, OC, IC] over [L, IC]; [KW, KH, OC, IC] over [W, H, IC, N].
    for (kne, xne, s) in [
        ([3, 2, 4, 1], [5, 4, 1, 1], 1),
        ([4, 3, 2, 1], [7, 2, 1, 1], 2),
        ([1, 1, 1, 1], [3, 1, 1, 1], 3),
        ([5, 2, 3, 1], [6, 3, 1, 1], 3),
    ] {
        for kt in [DType::F32, DType::F16] {
            let name = format!("CONV_TRANSPOSE_1D(type_kernel={kt},k={},x={},s={s})", shape(kne), shape(xne));
            cases.push(
                Case::new("CONV_TRANSPOSE_1D", name, move |ctx| {
                    let k = ctx.tensor(kt, kne)?;
                    let x = ctx.tensor(DType::F32, xne)?;
                    Ok(Built::output(ctx.conv_transpose_1d(k, x, s)?))
                })
                .tolerance(Tolerance::Nmse(5e-6)),
            );
        }
    }
    for (kne, xne, s) in
        [([3, 3, 2, 4], [5, 4, 4, 2], 1), ([2, 3, 3, 2], [4, 5, 2, 1], 2), ([4, 4, 1, 3], [3, 3, 3, 2], 3)]
    {
        for kt in [DType::F32, DType::F16] {
            let name = format!("CONV_TRANSPOSE_2D(type_kernel={kt},k={},x={},s={s})", shape(kne), shape(xne));
            cases.push(
                Case::new("CONV_TRANSPOSE_2D", name, move |ctx| {
                    let k = ctx.tensor(kt, kne)?;
                    let x = ctx.tensor(DType::F32, xne)?;
                    Ok(Built::output(ctx.conv_transpose_2d(k, x, s)?))
                })
                .tolerance(Tolerance::Nmse(5e-6)),
            );
        }
    }
    cases.push(
        Case::new("CONV_2D", "CONV_2D(type_kernel=f16,k=[3,3,64,64],x=[64,64,64,1],direct)".into(), |ctx| {
            let k = ctx.tensor(DType::F16, [3, 3, 64, 64])?;
            let x = ctx.tensor(DType::F32, [64, 64, 64, 1])?;
            Ok(Built::output(ctx.conv_2d_direct(k, x, ConvParams::square(1, 1, 1))?))
        })
        .flops(2.0 * 9.0 * 64.0 * 64.0 * 64.0 * 64.0)
        .perf_only(),
    );
    cases
}
