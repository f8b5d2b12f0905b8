//! SSM_SCAN: Mamba's selective scan. Heads are split over the tasks (as in
//! ggml): each task carries the states of its heads through every token of
//! every sequence, one state row (`d_state` floats) at a time in scratch.
//! Every sequence's state index from `ids` is checked against the states
//! before anything is read: an index outside them is an error, never a read.

use gantry_engine::{Context, DType, Result, TensorDesc, TensorId};

use super::bound::Bound;
use super::unary::softplus;
use super::{shape_err, src, src_desc};
use crate::parallel::{Par, SendPtr};

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    (0..6).all(|i| src_desc(ctx, d, i).is_some_and(|s| s.dtype == DType::F32))
        && src_desc(ctx, d, 6).is_some_and(|s| s.dtype == DType::I32)
        && d.dtype == DType::F32
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, par: &Par<'_>) -> Result<()> {
    let [s0, x, dt, a, b, c, ids] = std::array::from_fn(|i| src(ctx, t, d, i));
    let (s0, x, dt, a, b, c, ids) = (
        Bound::src(ctx, s0?)?,
        Bound::src(ctx, x?)?,
        Bound::src(ctx, dt?)?,
        Bound::src(ctx, a?)?,
        Bound::src(ctx, b?)?,
        Bound::src(ctx, c?)?,
        Bound::src(ctx, ids?)?,
    );
    let dst = Bound::dst(ctx, t)?;
    let gantry_engine::Op::SsmScan { states } = d.op else {
        return Err(shape_err(ctx, t, d, "not SSM_SCAN"));
    };
    let k_states = states as usize;
    let [nc, nr, nh] = [s0.ne[0], s0.ne[1], s0.ne[2]];
    let [nt, ns, ng] = [x.ne[2], x.ne[3], b.ne[1]];
    let y_len = x.nelements();
    let state_len = nc * nr * nh;
    // The shapes again: the indexing below relies on each of them, and a
    // node may come from somewhere other than the builder.
    let mamba1 = a.ne[0] != 1;
    let fits = x.ne[0] == nr
        && x.ne[1] == nh
        && dt.ne == [nh, nt, ns, 1]
        && b.ne == c.ne
        && b.ne == [nc, ng, nt, ns]
        && (if ng == 0 { nh == 0 } else { nh.is_multiple_of(ng) })
        && a.ne == [a.ne[0], nh, 1, 1]
        && (!mamba1 || (a.ne[0] == nc && k_states == 1))
        && ids.ne == [ns, 1, 1, 1]
        && k_states >= 1
        && dst.is_contiguous()
        && Some(dst.nelements()) == k_states.checked_mul(state_len * ns).and_then(|n| n.checked_add(y_len));
    if !fits {
        return Err(shape_err(ctx, t, d, format!("state {:?}, x {:?}, B {:?}, A {:?}", s0.ne, x.ne, b.ne, a.ne)));
    }
    // Each sequence's initial state, checked before any task reads one.
    let mut first = Vec::new();
    first.try_reserve_exact(ns).map_err(|_| shape_err(ctx, t, d, "no memory for the state indices"))?;
    for i3 in 0..ns {
        // SAFETY: i3 < ids.ne[0]; ids holds I32 elements.
        let id = unsafe { *(ids.at(i3, 0, 0, 0) as *const i32) };
        match usize::try_from(id) {
            Ok(id) if id < s0.ne[3] => first.push(id),
            _ => {
                return Err(shape_err(
                    ctx,
                    t,
                    d,
                    format!(
                        "ids[{i3}] = {id} is outside the {} states of {}",
                        s0.ne[3],
                        ctx.describe(src(ctx, t, d, 0)?)
                    ),
                ));
            }
        }
    }
    let heads_per_group = nh.checked_div(ng).unwrap_or(1);
    let out = SendPtr(dst.base as *mut f32);
    par.for_each(nh, ns * nt * nr * nc, nc, |heads, st| {
        let out = out.get();
        for i3 in 0..ns {
            for h in heads.clone() {
                let g = h / heads_per_group;
                for i1 in 0..nr {
                    for (i0, v) in st.iter_mut().enumerate() {
                        // SAFETY: i0 < nc, i1 < nr, h < nh; first[i3] < s0.ne[3] (checked).
                        *v = unsafe { s0.get(i0, i1, h, first[i3]) };
                    }
                    for i2 in 0..nt {
                        // SAFETY: every index within the shapes checked above.
                        let (dt_sp, xv) = unsafe { (softplus(dt.get(h, i2, i3, 0)), x.get(i1, h, i2, i3)) };
                        let x_dt = xv * dt_sp;
                        // SAFETY: as above; A is [1, nh] for Mamba-2.
                        let da2 = if mamba1 { 0.0 } else { (dt_sp * unsafe { a.get(0, h, 0, 0) }).exp() };
                        let mut sum = 0.0f32;
                        for (i0, v) in st.iter_mut().enumerate() {
                            // SAFETY: i0 < nc = A's ne0 (Mamba-1), B's and C's ne0; g < ng.
                            let (da, bv, cv) = unsafe {
                                let da = if mamba1 { (dt_sp * a.get(i0, h, 0, 0)).exp() } else { da2 };
                                (da, b.get(i0, g, i2, i3), c.get(i0, g, i2, i3))
                            };
                            *v = *v * da + bv * x_dt;
                            sum += *v * cv;
                        }
                        let y_at = i1 + nr * (h + nh * (i2 + nt * i3));
                        // SAFETY: y_at < y_len <= dst's length; this task
                        // alone writes head h.
                        unsafe { *out.add(y_at) = sum };
                        // ggml keeps the state `slot` tokens before the end in
                        // snapshot `slot` (0 < slot < K).
                        let slot = nt - 1 - i2;
                        if slot > 0 && slot < k_states {
                            // SAFETY: as for the final state below, in snapshot `slot`.
                            unsafe { store_state(out, y_len, state_len, ns, [slot, i3], i1 * nc + h * nc * nr, st) };
                        }
                    }
                    // SAFETY: the final state of (i3, h, i1): inside dst,
                    // written by this task alone.
                    unsafe { store_state(out, y_len, state_len, ns, [0, i3], i1 * nc + h * nc * nr, st) };
                    // Snapshots from before the first token have no state in
                    // ggml (it leaves them unwritten): zeros here.
                    st.fill(0.0);
                    for slot in nt.max(1)..k_states {
                        // SAFETY: as above.
                        unsafe { store_state(out, y_len, state_len, ns, [slot, i3], i1 * nc + h * nc * nr, st) };
                    }
                }
            }
        }
    });
    Ok(())
}

/// Writes the state row `st` at `row` inside snapshot `slot` of sequence
/// `seq`.
///
/// # Safety
/// `out` must hold `y_len + K · ns · state_len` floats with `slot < K`,
/// `seq < ns` and `row + st.len() <= state_len`, and no other task may
/// touch that row.
unsafe fn store_state(
    out: *mut f32,
    y_len: usize,
    state_len: usize,
    ns: usize,
    [slot, seq]: [usize; 2],
    row: usize,
    st: &[f32],
) {
    let at = y_len + (slot * ns + seq) * state_len + row;
    // SAFETY: in range and exclusive, as the caller promises.
    unsafe { std::ptr::copy_nonoverlapping(st.as_ptr(), out.add(at), st.len()) };
}
