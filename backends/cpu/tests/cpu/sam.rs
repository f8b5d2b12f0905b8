//! SAM's vision ops on the CPU (WIN_PART, WIN_UNPART, GET_REL_POS,
//! ADD_REL_POS): their conformance cases on their own, hand-checkable
//! values, and shapes the builders must refuse.

use gantry_engine::{Context, DType, TensorId};

use super::seq::compute;

const OPS: &str = "WIN_PART,WIN_UNPART,GET_REL_POS,ADD_REL_POS";

#[test]
fn sam_cases_pass() {
    super::op_cases_pass(OPS, 3, 18);
}

#[test]
fn windows_are_cut_padded_and_put_back() {
    // A 3 × 2 image (value x + 10·y) in windows of 2: two windows across,
    // the second half padding.
    let image: [f32; 6] = [0.0, 1.0, 2.0, 10.0, 11.0, 12.0];
    let mut ctx = Context::new();
    let a = ctx.tensor(DType::F32, [1, 3, 2]).unwrap();
    let parts = ctx.win_part(a, 2).unwrap();
    assert_eq!(ctx.desc(parts).unwrap().ne, [1, 2, 2, 2]);
    let got = compute(&mut ctx, parts, &[(a, &image)], &[]).unwrap();
    assert_eq!(got, [0.0, 1.0, 10.0, 11.0, 2.0, 0.0, 12.0, 0.0]);

    let mut ctx = Context::new();
    let a = ctx.tensor(DType::F32, [1, 3, 2]).unwrap();
    let parts = ctx.win_part(a, 2).unwrap();
    let back = ctx.win_unpart(parts, 3, 2, 2).unwrap();
    assert_eq!(compute(&mut ctx, back, &[(a, &image)], &[]).unwrap(), image);
}

#[test]
fn rel_pos_looks_up_and_adds_the_terms() {
    let mut ctx = Context::new();
    let table = ctx.tensor(DType::F16, [1, 3]).unwrap();
    let out = ctx.get_rel_pos(table, 2, 2).unwrap();
    assert_eq!(ctx.desc(out).unwrap().dtype, DType::F16);
    // out[k, q] = table[1 - k + q].
    assert_eq!(compute(&mut ctx, out, &[(table, &[1.0, 2.0, 3.0])], &[]).unwrap(), [2.0, 1.0, 3.0, 2.0]);

    let mut ctx = Context::new();
    let a = ctx.tensor(DType::F32, [4, 1, 1]).unwrap();
    let pw = ctx.tensor(DType::F32, [2, 1, 1, 1]).unwrap();
    let ph = ctx.tensor(DType::F32, [2, 1, 1, 1]).unwrap();
    let out = ctx.add_rel_pos(a, pw, ph).unwrap();
    let f32s: [(TensorId, &[f32]); 3] = [(a, &[0.5; 4]), (pw, &[1.0, 2.0]), (ph, &[10.0, 20.0])];
    // out[y·2 + x] = a + ph[y] + pw[x].
    assert_eq!(compute(&mut ctx, out, &f32s, &[]).unwrap(), [11.5, 12.5, 21.5, 22.5]);
}

#[test]
fn sam_builders_refuse_mismatched_shapes() {
    let mut ctx = Context::new();
    let image = ctx.tensor(DType::F32, [2, 5, 5]).unwrap();
    assert!(ctx.win_part(image, 0).unwrap_err().to_string().contains("WIN_PART"));
    let batch = ctx.tensor(DType::F32, [2, 5, 5, 2]).unwrap();
    assert!(ctx.win_part(batch, 2).unwrap_err().to_string().contains("WIN_PART"));
    // A 5 × 5 image needs 3 · 3 windows of 2.
    let eight = ctx.tensor(DType::F32, [2, 2, 2, 8]).unwrap();
    let err = ctx.win_unpart(eight, 5, 5, 2).unwrap_err().to_string();
    assert!(err.contains("WIN_UNPART") && err.contains("at least"), "{err}");
    assert!(ctx.win_unpart(eight, 4, 4, 2).is_ok());
    assert!(ctx.win_unpart(eight, 4, 4, 3).is_err());

    let table = ctx.tensor(DType::F16, [4, 5]).unwrap();
    assert!(ctx.get_rel_pos(table, 3, 3).is_ok());
    assert!(ctx.get_rel_pos(table, 3, 2).unwrap_err().to_string().contains("GET_REL_POS"));
    assert!(ctx.get_rel_pos(table, 2, 2).unwrap_err().to_string().contains("GET_REL_POS"));
    let table32 = ctx.tensor(DType::F32, [4, 5]).unwrap();
    assert!(ctx.get_rel_pos(table32, 3, 3).unwrap_err().to_string().contains("GET_REL_POS"));

    let a = ctx.tensor(DType::F32, [9, 6, 2]).unwrap();
    let p = ctx.tensor(DType::F32, [3, 3, 2, 2]).unwrap();
    let p_other = ctx.tensor(DType::F32, [3, 2, 3, 2]).unwrap();
    let p_wide = ctx.tensor(DType::F32, [4, 3, 2, 2]).unwrap();
    assert!(ctx.add_rel_pos(a, p, p).is_ok());
    assert!(ctx.add_rel_pos(a, p, p_other).unwrap_err().to_string().contains("ADD_REL_POS"));
    assert!(ctx.add_rel_pos(a, p_wide, p_wide).unwrap_err().to_string().contains("ADD_REL_POS"));
}
