//! The case file `scripts/ggml_parity/driver.c` reads: one case's graph as
//! ggml tensors, every tensor in topological order (leafs, then nodes, views
//! included) with its type, shape, strides, op (by ggml's name), op_params
//! in ggml's layout, sources, view source and offset, and the leafs' bytes.
//!
//! Little-endian: `"GGPARITY"`, u32 version; the case name, u32 tensor count,
//! u32 output index; per tensor: type name, op name, i64 ne[4], u64 nb[4],
//! i32 op_params[16], i32 src[MAX_SRC = 8] (-1: none), i32 view source (-1: none), u64
//! view offset, u64 data length and the data (leafs only). A name is a u32
//! length and its bytes.
//!
//! Tensors keep Gantry's types and strides, except COUNT_EQUAL's result,
//! which ggml computes as an I64.

use gantry_engine::{Context, Error, Graph, MAX_SRC, Op, Result, TensorId};

// scripts/ggml_parity/driver.c reads this many sources per tensor (its N_SRC).
const _: () = assert!(MAX_SRC == 8, "change N_SRC in scripts/ggml_parity/driver.c with MAX_SRC");

use super::op_params::ggml_op_params;

const MAGIC: &[u8; 8] = b"GGPARITY";
const VERSION: u32 = 1;

/// The case file of `graph` computing `output`; `leaf_bytes` holds the bytes
/// of each of the graph's leafs, in `graph.leafs()` order (taken before the
/// compute, which may write into them).
pub fn case_file(
    ctx: &Context,
    graph: Graph<'_>,
    output: TensorId,
    name: &str,
    leaf_bytes: &[Vec<u8>],
) -> Result<Vec<u8>> {
    let tensors: Vec<TensorId> = graph.leafs().iter().chain(graph.nodes()).copied().collect();
    let index = |t: TensorId| -> Result<i32> {
        tensors.iter().position(|&x| x == t).map(|i| i as i32).ok_or_else(|| Error::InvalidTensor {
            tensor: ctx.describe(t),
            reason: "is read but not in the graph".into(),
        })
    };
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    put_u32(&mut out, VERSION);
    put_str(&mut out, name);
    put_u32(&mut out, tensors.len() as u32);
    put_u32(&mut out, index(output)? as u32);
    for (i, &t) in tensors.iter().enumerate() {
        let d = ctx.desc(t)?;
        // COUNT_EQUAL: ggml's result is one I64 (its CPU kernel asserts it),
        // Gantry's one I32.
        let (dtype, nb) = if d.op == Op::CountEqual { ("i64", [8; 4]) } else { (d.dtype.info().name, d.nb) };
        put_str(&mut out, dtype);
        put_str(&mut out, d.op.name());
        for &ne in &d.ne {
            out.extend_from_slice(&(ne as i64).to_le_bytes());
        }
        for &nb in &nb {
            out.extend_from_slice(&(nb as u64).to_le_bytes());
        }
        for p in ggml_op_params(&d.op, d.view_offset) {
            out.extend_from_slice(&p.to_le_bytes());
        }
        let mut srcs = [-1i32; MAX_SRC];
        for (slot, src) in srcs.iter_mut().zip(&d.srcs) {
            if let Some(s) = src {
                *slot = index(*s)?;
            }
        }
        // ggml_set_rows keeps its destination in src[2] (Gantry only as the
        // view source); ggml's CPU kernel writes through the result's data
        // pointer, so the view source stands in for a destination view.
        if d.op == Op::SetRows
            && let Some(v) = d.view_src
        {
            srcs[2] = index(v)?;
        }
        for s in srcs {
            out.extend_from_slice(&s.to_le_bytes());
        }
        let view_src = d.view_src.map(index).transpose()?.unwrap_or(-1);
        out.extend_from_slice(&view_src.to_le_bytes());
        out.extend_from_slice(&(d.view_offset as u64).to_le_bytes());
        let data: &[u8] = match leaf_bytes.get(i) {
            Some(bytes) if i < graph.leafs().len() => bytes,
            _ => &[],
        };
        out.extend_from_slice(&(data.len() as u64).to_le_bytes());
        out.extend_from_slice(data);
    }
    Ok(out)
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u32(out, s.len() as u32);
    out.extend_from_slice(s.as_bytes());
}
