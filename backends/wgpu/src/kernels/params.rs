//! The parameter block every kernel reads (`Params` in the WGSL prelude).

use bytemuck::{Pod, Zeroable};

use crate::gpu::{PARAMS_SIZE, STORAGE_SLOTS};

/// Shape and strides of one bound tensor, in the units its kernel indexes
/// it by (elements for plain dtypes, bytes for quantized ones).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct TensorParams {
    /// Elements per dimension.
    pub ne: [u32; 4],
    /// Stride per dimension, in units.
    pub nb: [u32; 4],
}

/// One dispatch's parameters: the five bound tensors (destination, then
/// sources), their offsets into their buffers (filled in at compute time,
/// when placements are known), and op-specific integers and floats.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Pod, Zeroable)]
pub struct Params {
    /// Destination, src0 … src6.
    pub t: [TensorParams; STORAGE_SLOTS],
    /// Offset of each bound tensor in its buffer, in units.
    pub offs: [u32; 8],
    /// Op-specific integers.
    pub u: [u32; 8],
    /// Op-specific floats.
    pub f: [f32; 8],
}

const _: () = assert!(size_of::<Params>() as u64 == PARAMS_SIZE);
const _: () = assert!(STORAGE_SLOTS == 8, "offs holds one offset per slot");

/// The WGSL declaration matching [`Params`].
pub const PARAMS_WGSL: &str = "
struct Tensor { ne: vec4<u32>, nb: vec4<u32> }
struct Params {
    dst: Tensor, src0: Tensor, src1: Tensor, src2: Tensor, src3: Tensor, src4: Tensor, src5: Tensor, src6: Tensor,
    offs: vec4<u32>, offs2: vec4<u32>,
    u: vec4<u32>, u2: vec4<u32>,
    f: vec4<f32>, f2: vec4<f32>,
}
@group(0) @binding(0) var<uniform> p: Params;
";
