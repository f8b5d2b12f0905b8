//! Every error class is an `Err` with a message naming what is wrong.

use gantry_engine::{Context, DType, Error};

#[test]
fn stale_ids_are_errors() {
    let mut ctx = Context::new();
    let a = ctx.tensor(DType::F32, [4]).unwrap();
    ctx.set_name(a, "weights").unwrap();
    ctx.remove(a).unwrap();
    assert!(matches!(ctx.desc(a), Err(Error::StaleHandle { kind: "tensor", .. })));
    let b = ctx.tensor(DType::F32, [4]).unwrap();
    assert_ne!(a, b, "the slot is reused with a new version");
    let err = ctx.add(b, a).unwrap_err().to_string();
    assert!(err.starts_with("ADD") && err.contains("stale"), "{err}");
}

#[test]
fn bad_shapes_and_dims() {
    let mut ctx = Context::new();
    assert!(ctx.tensor(DType::F32, [1, 2, 3, 4, 5]).unwrap_err().to_string().contains("1 to 4 dimensions"));
    assert!(ctx.tensor(DType::F32, [] as [usize; 0]).is_err());
    let err = ctx.tensor(DType::Q4_0, [33]).unwrap_err().to_string();
    assert!(err.contains("block size 32"), "{err}");
    let err = ctx.tensor(DType::F32, [usize::MAX / 8, 16]).unwrap_err().to_string();
    assert!(err.contains("overflows"), "{err}");
}

#[test]
fn views_out_of_bounds() {
    let mut ctx = Context::new();
    let a = ctx.tensor(DType::F32, [8, 4]).unwrap();
    ctx.set_name(a, "cache").unwrap();
    assert!(ctx.view_2d(a, 8, 4, 32, 0).is_ok());
    let err = ctx.view_2d(a, 8, 4, 32, 4).unwrap_err().to_string();
    assert!(err.starts_with("VIEW") && err.contains("'cache'"), "{err}");
    assert!(ctx.view_1d(a, 1, usize::MAX).is_err(), "offset overflow");
    assert!(ctx.permute(a, [0, 0, 1, 2]).is_err());
    assert!(ctx.permute(a, [0, 1, 2, 4]).is_err());
    let q = ctx.tensor(DType::Q8_0, [64, 2]).unwrap();
    assert!(ctx.view_1d(q, 16, 0).is_err(), "a quantized view covers whole blocks");
}

#[test]
fn dtypes_an_op_does_not_take() {
    let mut ctx = Context::new();
    let i = ctx.tensor(DType::I32, [4, 4]).unwrap();
    let f = ctx.tensor(DType::F32, [4, 4]).unwrap();
    let err = ctx.mul_mat(i, f).unwrap_err().to_string();
    assert!(err.contains("i32"), "{err}");
    let err = ctx.soft_max(i).unwrap_err();
    assert!(matches!(err, Error::InvalidOp { op: "SOFT_MAX", .. }), "{err}");
    let q = ctx.tensor(DType::Q4_K, [256]).unwrap();
    assert!(ctx.concat(q, q, 0).is_err());
    assert!(ctx.repeat_to(q, [512]).is_err());
}
