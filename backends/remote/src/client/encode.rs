//! Describing a split of the client's graph for the server: its nodes in
//! order, preceded by every tensor they read that the split does not
//! compute, each with where it is on the server.

use std::collections::HashMap;

use gantry_engine::{Context, Error, MAX_SRC, Op, Result, TensorDesc, TensorId};

use crate::wire::{WireGraph, WireLocation, WireTensor};

fn external<'c>(desc: &'c TensorDesc, location: Option<WireLocation>, name: bool) -> WireTensor<'c> {
    WireTensor {
        computed: false,
        view: false,
        dtype: desc.dtype,
        ne: desc.ne,
        nb: desc.nb,
        op: Op::None,
        srcs: [None; MAX_SRC],
        location,
        name: if name { desc.name.as_str() } else { "" },
    }
}

fn computed<'c>(
    desc: &'c TensorDesc,
    srcs: [Option<u32>; MAX_SRC],
    location: Option<WireLocation>,
    name: bool,
) -> WireTensor<'c> {
    WireTensor {
        computed: true,
        view: desc.view_src.is_some(),
        dtype: desc.dtype,
        ne: desc.ne,
        nb: desc.nb,
        op: desc.op,
        srcs,
        location,
        name: if name { desc.name.as_str() } else { "" },
    }
}

/// The split `nodes` (topologically ordered) with their external sources;
/// `locate` says where each tensor is on the server. Tensors keep their names.
pub fn encode_split<'c>(
    ctx: &'c Context,
    nodes: &[TensorId],
    locate: &mut dyn FnMut(TensorId) -> Result<WireLocation>,
) -> Result<WireGraph<'c>> {
    let mut index: HashMap<TensorId, u32> = HashMap::with_capacity(nodes.len() * 2);
    let mut tensors = Vec::with_capacity(nodes.len() * 2);
    // Where each node of the split is in `nodes`, to tell a later node from an external.
    let position: HashMap<TensorId, usize> = nodes.iter().enumerate().map(|(i, &n)| (n, i)).collect();
    for (i, &n) in nodes.iter().enumerate() {
        let desc = ctx.desc(n)?;
        let mut srcs = [None; MAX_SRC];
        for (k, src) in desc.srcs.iter().enumerate() {
            let Some(s) = *src else { continue };
            let at = match index.get(&s) {
                Some(&at) => at,
                None => {
                    if position.get(&s).is_some_and(|&p| p >= i) {
                        return Err(Error::Unsupported(format!(
                            "{} reads {}, which comes later in the split",
                            ctx.describe(n),
                            ctx.describe(s)
                        )));
                    }
                    let at = tensors.len() as u32;
                    tensors.push(external(ctx.desc(s)?, Some(locate(s)?), true));
                    index.insert(s, at);
                    at
                }
            };
            srcs[k] = Some(at);
        }
        index.insert(n, tensors.len() as u32);
        tensors.push(computed(desc, srcs, Some(locate(n)?), true));
    }
    Ok(WireGraph { tensors })
}

/// `node` with its sources as externals and no locations or names: what
/// asking whether a device supports the node needs, and nothing that varies
/// between nodes of the same kind (so the answer can be cached by it).
pub fn encode_query(ctx: &Context, node: TensorId) -> Result<WireGraph<'_>> {
    let desc = ctx.desc(node)?;
    let mut tensors = Vec::with_capacity(MAX_SRC + 1);
    let mut srcs = [None; MAX_SRC];
    for (k, src) in desc.srcs.iter().enumerate() {
        let Some(s) = *src else { continue };
        // The same source twice is one tensor, as in the graph.
        let at = match desc.srcs[..k].iter().position(|&p| p == Some(s)) {
            Some(first) => srcs[first],
            None => {
                tensors.push(external(ctx.desc(s)?, None, false));
                Some(tensors.len() as u32 - 1)
            }
        };
        srcs[k] = at;
    }
    tensors.push(computed(desc, srcs, None, false));
    Ok(WireGraph { tensors })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_engine::DType;

    #[test]
    fn externals_come_first_once_and_nodes_keep_their_order() {
        let mut ctx = Context::new();
        let w = ctx.tensor(DType::F32, [4, 3]).unwrap();
        let x = ctx.tensor(DType::F32, [4, 2]).unwrap();
        let y = ctx.mul_mat(w, x).unwrap();
        let z = ctx.mul(y, y).unwrap();
        let mut asked = Vec::new();
        let mut locate = |t: TensorId| {
            asked.push(t);
            Ok(WireLocation { buffer: 1, offset: 64 * asked.len() as u64 })
        };
        let g = encode_split(&ctx, &[y, z], &mut locate).unwrap();
        let kinds: Vec<(bool, Op)> = g.tensors.iter().map(|t| (t.computed, t.op)).collect();
        assert_eq!(
            kinds,
            vec![(false, Op::None), (false, Op::None), (true, Op::MulMat), (true, ctx.desc(z).unwrap().op)]
        );
        assert_eq!(g.tensors[2].srcs[..3], [Some(0), Some(1), None]);
        assert!(g.tensors[2].srcs[3..].iter().all(Option::is_none));
        assert_eq!(g.tensors[3].srcs[..3], [Some(2), Some(2), None]);
        assert!(g.tensors[3].srcs[3..].iter().all(Option::is_none));
        assert!(encode_split(&ctx, &[z, y], &mut |_| Ok(WireLocation { buffer: 1, offset: 0 })).is_err());
        let q = encode_query(&ctx, z).unwrap();
        assert_eq!(q.tensors.len(), 2, "y read twice is one external");
        assert!(q.tensors.iter().all(|t| t.location.is_none() && t.name.is_empty()));
    }
}
