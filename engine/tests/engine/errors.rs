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

#[test]
fn an_empty_source_gives_an_empty_result_or_an_error() {
    let mut ctx = Context::new();
    let empty = ctx.tensor(DType::F32, [0, 1 << 20]).unwrap();
    ctx.set_name(empty, "nothing").unwrap();
    // A reduction over rows of nothing would loop over 2^20 rows to write
    // values nobody defined: refused, naming the source.
    let err = ctx.sum_rows(empty).unwrap_err().to_string();
    assert!(err.starts_with("SUM_ROWS") && err.contains("'nothing'") && err.contains("empty"), "{err}");
    let w = ctx.tensor(DType::F32, [0, 8]).unwrap();
    let x = ctx.tensor(DType::F32, [0, 3]).unwrap();
    assert!(ctx.mul_mat(w, x).is_err(), "a product over rows of length 0");
    let ids = ctx.tensor(DType::I32, [2]).unwrap();
    let no_rows = ctx.tensor(DType::F32, [8, 0]).unwrap();
    assert!(ctx.get_rows(no_rows, ids).is_err(), "rows from a table without rows");
    // Empty in, empty out is fine, and so is a concat with an empty part.
    let out = ctx.scale(empty, 2.0, 0.0).unwrap();
    assert_eq!(ctx.desc(out).unwrap().nelements(), 0);
    let a = ctx.tensor(DType::F32, [4, 3]).unwrap();
    let none = ctx.tensor(DType::F32, [4, 0]).unwrap();
    let joined = ctx.concat(a, none, 1).unwrap();
    assert_eq!(ctx.desc(joined).unwrap().ne, [4, 3, 1, 1]);
}

#[test]
fn a_node_never_writes_one_byte_twice() {
    let mut ctx = Context::new();
    let dst = ctx.tensor(DType::F32, [8, 4]).unwrap();
    ctx.set_name(dst, "cache").unwrap();
    let src = ctx.tensor(DType::F32, [8, 4]).unwrap();
    // Every row of the view at the first row's bytes: four writers of one row.
    let aliased = ctx.view(dst, [8, 4, 1, 1], [4, 0, 0, 0], 0).unwrap();
    let err = ctx.cpy(src, aliased).unwrap_err().to_string();
    assert!(err.starts_with("CPY") && err.contains("'cache'") && err.contains("one byte"), "{err}");
    assert!(ctx.scale_inplace(aliased, 2.0, 0.0).is_err(), "an in-place op writes its source");
    // Rows that overlap half-way alias too; reading such a view is fine.
    let half = ctx.view(dst, [8, 3, 1, 1], [4, 16, 48, 48], 0).unwrap();
    assert!(ctx.cpy(src, half).is_err());
    assert!(ctx.scale(half, 2.0, 0.0).is_ok(), "a zero or small stride may be read");
    // A transposed view is written one element per byte: allowed.
    let t = ctx.transpose(dst).unwrap();
    let src_t = ctx.tensor(DType::F32, [4, 8]).unwrap();
    assert!(ctx.cpy(src_t, t).is_ok());
}
