//! Plans for FLASH_ATTN_EXT.

use gantry_engine::DType;

use super::norm::alibi;
use super::{Builder, Kernel, Launch, Refusal};

type Planned = Result<Option<Launch>, Refusal>;

/// Longest Q/K row the kernel stages in shared memory (`MAX_DK` in
/// `flash_attn.wgsl`, the size of that memory).
pub(super) const MAX_DK: usize = 512;
/// Longest V row: the workgroup's 64 invocations keep `MAX_DV / 64` output
/// values each (`MAX_DV` in `flash_attn.wgsl`).
pub(super) const MAX_DV: usize = 512;

pub(super) fn flash_attn(b: &mut Builder<'_>, scale: f32, max_bias: f32, softcap: f32) -> Planned {
    b.bind_dst()?;
    let q = b.bind_src(0)?;
    b.bind_src(1)?;
    let v = b.bind_src(2)?;
    if b.d.srcs[3].is_some() {
        b.bind_src(3)?;
    }
    if b.d.srcs[4].is_some() {
        let sinks = b.bind_src(4)?;
        if sinks.dtype != DType::F32 || sinks.ne != [q.ne[2], 1, 1, 1] {
            return Err(format!("attention sinks {} {:?} for {} heads", sinks.dtype, sinks.ne, q.ne[2]));
        }
    }
    if q.ne[0] > MAX_DK || v.ne[0] > MAX_DV {
        return Err(format!("head sizes {} / {} above {MAX_DK} / {MAX_DV}", q.ne[0], v.ne[0]));
    }
    let (n_head_log2, m0, m1) = alibi(q.ne[2], max_bias);
    b.params.f[..5].copy_from_slice(&[scale, max_bias, m0, m1, softcap]);
    b.params.u[0] = n_head_log2;
    b.finish(Kernel::FlashAttn, DType::F32, (q.ne[1] * q.ne[2] * q.ne[3]) as u64)
}
