//! The key/value cache: one K and one V matrix per layer, in backend buffers
//! (one per buffer type the layers' caches go to).

use std::sync::Arc;

use gantry_engine::{BufferId, BufferType, BufferUsage, Context, DType, TensorId, same_buffer_type};

use super::DecoderHparams;
use crate::{Error, Result};

/// Keys and values of every cached token, per layer: `[n_head_kv *
/// head_dim, n_ctx]`, cell `c` (a row) holding one token's roped keys or
/// values. Rows are written by SET_ROWS at the cells the batch names
/// ([`super::KvCells`] decides which), so a graph does not change as the
/// cache fills, and tokens of different sequences share one cache.
#[derive(Debug, Clone)]
pub struct KvCache {
    /// Keys per layer.
    pub k: Vec<TensorId>,
    /// Values per layer.
    pub v: Vec<TensorId>,
    /// Cells the cache holds.
    pub n_ctx: usize,
    /// Element type (F16, F32 or Q8_0).
    pub dtype: DType,
    /// The buffers holding the layers: one per buffer type used.
    pub buffers: Vec<BufferId>,
}

/// The element types a cache may hold.
pub const KV_DTYPES: [DType; 3] = [DType::F16, DType::F32, DType::Q8_0];

impl KvCache {
    /// Allocates a zeroed cache of `n_ctx` cells in one buffer of `buft`.
    pub fn new(
        ctx: &mut Context,
        hp: &DecoderHparams,
        n_ctx: usize,
        dtype: DType,
        buft: &Arc<dyn BufferType>,
    ) -> Result<Self> {
        // `hp` sizes the table of buffer types: bounded first.
        hp.validate()?;
        Self::new_per_layer(ctx, hp, n_ctx, dtype, &vec![buft.clone(); hp.n_layer])
    }

    /// Allocates a zeroed cache of `n_ctx` cells with layer `l`'s keys and
    /// values in memory of `bufts[l]` (the layer's device, when the layers
    /// are spread over several): one buffer per distinct buffer type.
    pub fn new_per_layer(
        ctx: &mut Context,
        hp: &DecoderHparams,
        n_ctx: usize,
        dtype: DType,
        bufts: &[Arc<dyn BufferType>],
    ) -> Result<Self> {
        if !KV_DTYPES.contains(&dtype) {
            return Err(Error::Model(format!("a KV cache holds f16, f32 or q8_0, not {dtype}")));
        }
        if dtype.is_quantized() && !hp.head_dim.is_multiple_of(dtype.block_size()) {
            return Err(Error::Model(format!(
                "a {dtype} KV cache needs heads of a multiple of {} values, not {}",
                dtype.block_size(),
                hp.head_dim
            )));
        }
        if n_ctx == 0 {
            return Err(Error::Model("a KV cache needs at least one cell".into()));
        }
        if bufts.len() != hp.n_layer {
            return Err(Error::Model(format!("{} buffer types given for {} layers", bufts.len(), hp.n_layer)));
        }
        let width = hp.n_head_kv * hp.head_dim;
        let mut k = Vec::with_capacity(hp.n_layer);
        let mut v = Vec::with_capacity(hp.n_layer);
        for l in 0..hp.n_layer {
            let kt = ctx.tensor(dtype, [width, n_ctx])?;
            ctx.set_name(kt, &format!("cache_k_l{l}"))?;
            let vt = ctx.tensor(dtype, [width, n_ctx])?;
            ctx.set_name(vt, &format!("cache_v_l{l}"))?;
            k.push(kt);
            v.push(vt);
        }
        // Layers grouped by buffer type, in order of first use.
        let mut groups: Vec<(Arc<dyn BufferType>, Vec<usize>)> = Vec::new();
        for (l, buft) in bufts.iter().enumerate() {
            match groups.iter_mut().find(|(b, _)| same_buffer_type(b, buft)) {
                Some((_, layers)) => layers.push(l),
                None => groups.push((buft.clone(), vec![l])),
            }
        }
        let mut buffers = Vec::with_capacity(groups.len());
        for (buft, layers) in &groups {
            let align = buft.alignment();
            let mut offsets = Vec::with_capacity(2 * layers.len());
            let mut size = 0usize;
            for &t in layers.iter().map(|&l| &k[l]).chain(layers.iter().map(|&l| &v[l])) {
                offsets.push(size);
                let n = buft.alloc_size(&ctx.desc(t)?.layout());
                size = (size + n).next_multiple_of(align);
            }
            let buffer = ctx.alloc_buffer(buft, size, BufferUsage::Any)?;
            for (&t, &off) in layers.iter().map(|&l| &k[l]).chain(layers.iter().map(|&l| &v[l])).zip(&offsets) {
                ctx.place(t, buffer, off)?;
            }
            ctx.buffer(buffer)?.buffer.clear(0)?;
            buffers.push(buffer);
        }
        Ok(Self { k, v, n_ctx, dtype, buffers })
    }

    /// Zeroes every cell.
    pub fn clear(&self, ctx: &Context) -> Result<()> {
        for &b in &self.buffers {
            ctx.buffer(b)?.buffer.clear(0)?;
        }
        Ok(())
    }

    /// Bytes the cache takes.
    pub fn size_bytes(&self, ctx: &Context) -> usize {
        self.buffers.iter().map(|&b| ctx.buffer(b).map_or(0, |e| e.buffer.size())).sum()
    }
}
