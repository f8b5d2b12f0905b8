//! Plans for SAM's index ops: WIN_PART and WIN_UNPART (`window.wgsl`),
//! GET_REL_POS and ADD_REL_POS (`get_rel_pos.wgsl`, `add_rel_pos.wgsl`), one
//! invocation per result element. Shapes and dtypes are checked as the CPU
//! checks them: the kernels index the sources by the result's position.

use gantry_engine::{DType, Op};

use super::{Builder, Kernel, Launch, Refusal, groups_for};

type Planned = Result<Option<Launch>, Refusal>;

/// WIN_PART and WIN_UNPART of F32 images.
pub(super) fn window(b: &mut Builder<'_>) -> Planned {
    let name = b.d.op.name();
    b.bind_dst()?;
    let a = b.bind_src(0)?;
    let dst = b.d;
    if a.dtype != DType::F32 || dst.dtype != DType::F32 {
        return Err(format!("{name} of {} into {} has no wgpu kernel", a.dtype, dst.dtype));
    }
    let ch = a.ne[0];
    let (unpart, npx, w) = match dst.op {
        Op::WinPart { npx, npy, w } => {
            let [npx_n, npy_n, w_n] = [npx, npy, w].map(|x| x as usize);
            let fits = w_n >= 1
                && npx_n == a.ne[1].div_ceil(w_n)
                && npy_n == a.ne[2].div_ceil(w_n)
                && a.ne[3] == 1
                && dst.ne == [ch, w_n, w_n, npx_n * npy_n];
            // The kernel's pixel positions (up to npx · w and npy · w) fit 32 bits.
            let positions_fit =
                [npx_n, npy_n].iter().all(|&n| n.checked_mul(w_n).is_some_and(|x| x <= u32::MAX as usize));
            if !(fits && positions_fit) {
                return Err(format!("{name} of image {:?} into windows {:?} does not fit", a.ne, dst.ne));
            }
            (false, npx, w)
        }
        Op::WinUnpart { w } => {
            let w_n = w as usize;
            let npx = dst.ne[1].div_ceil(w_n.max(1));
            let needed = npx.checked_mul(dst.ne[2].div_ceil(w_n.max(1)));
            let fits = w_n >= 1
                && a.ne[1] == w_n
                && a.ne[2] == w_n
                && needed.is_some_and(|n| a.ne[3] >= n)
                && dst.ne[0] == ch
                && dst.ne[3] == 1;
            if !fits {
                return Err(format!("{name} of windows {:?} into an image of {:?} does not fit", a.ne, dst.ne));
            }
            (true, u32::try_from(npx).map_err(|e| e.to_string())?, w)
        }
        _ => return Err(format!("{name} is not a window op")),
    };
    b.params.u[..2].copy_from_slice(&[npx, w]);
    b.finish(Kernel::Window { unpart }, DType::F32, groups_for(dst.nelements()))
}

/// GET_REL_POS: an F16 table into F16.
pub(super) fn get_rel_pos(b: &mut Builder<'_>) -> Planned {
    b.bind_dst()?;
    let a = b.bind_src(0)?;
    let dst = b.d;
    if a.dtype != DType::F16 || dst.dtype != DType::F16 {
        return Err(format!("GET_REL_POS of {} into {} has no wgpu kernel", a.dtype, dst.dtype));
    }
    let kh = dst.ne[1];
    let fits = kh >= 1 && dst.ne == [a.ne[0], kh, kh, 1] && kh.checked_mul(2).map(|n| n - 1) == Some(a.ne[1]);
    if !fits {
        return Err(format!("GET_REL_POS of table {:?} into {:?} does not fit", a.ne, dst.ne));
    }
    b.finish(Kernel::GetRelPos, DType::F32, groups_for(dst.nelements()))
}

/// ADD_REL_POS: F32 scores and terms into F32.
pub(super) fn add_rel_pos(b: &mut Builder<'_>) -> Planned {
    b.bind_dst()?;
    let a = b.bind_src(0)?;
    let pw = b.bind_src(1)?;
    let ph = b.bind_src(2)?;
    let dst = b.d;
    if [a.dtype, pw.dtype, ph.dtype, dst.dtype].iter().any(|&t| t != DType::F32) {
        return Err(format!(
            "ADD_REL_POS of {} with {} terms into {} has no wgpu kernel",
            a.dtype, pw.dtype, dst.dtype
        ));
    }
    let [n, q1, q2, batch] = pw.ne;
    let fits = ph.ne == pw.ne
        && n.checked_mul(n) == Some(a.ne[0])
        && q1.checked_mul(q2) == Some(a.ne[1])
        && a.ne[2] == batch
        && a.ne[3] == 1
        && dst.ne == a.ne;
    if !fits {
        return Err(format!("ADD_REL_POS of scores {:?} with terms {:?} does not fit", a.ne, pw.ne));
    }
    b.finish(Kernel::AddRelPos, DType::F32, groups_for(dst.nelements()))
}
