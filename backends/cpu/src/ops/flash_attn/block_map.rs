//! Which blocks of [`KV_BLOCK`] keys each query of an attention node sees,
//! read from the mask once per node: the tiles skip the blocks their
//! queries do not see without loading their mask values, and the node's
//! split over threads counts only the keys somebody sees.

use half::f16;

use gantry_engine::DType;

use super::{Attention, KV_BLOCK};

// A block's keys are the bits of a `u64` (see `first_bits`).
const _: () = assert!(KV_BLOCK <= 64);

/// Bits `0 .. n` set.
pub(super) fn first_bits(n: usize) -> u64 {
    if n >= 64 { u64::MAX } else { (1 << n) - 1 }
}

/// Most bits of a [`BlockMap`] (1 KiB on the stack): 512 queries over 16
/// blocks of keys, or 16 over 512.
const BLOCK_MAP_BITS: usize = 8192;

/// Which blocks of [`KV_BLOCK`] keys each query sees (any mask value not
/// −inf), read from the mask once per node: the tiles of every K/V head and
/// of every query run then skip the blocks their queries do not see without
/// loading their mask values. Decoding 16 sequences over a cache of 2560
/// cells, each query sees 1 to 3 of 40 blocks, and converting and scanning
/// the other blocks' mask values per tile was most of the attention's time.
pub(super) struct BlockMap {
    /// Bit `b · n_q + q`: whether query `q` sees block `b`.
    bits: [u64; BLOCK_MAP_BITS / 64],
    n_q: usize,
    /// Blocks of keys (the last may be short).
    blocks: usize,
}

impl BlockMap {
    /// The map of `a`'s mask, when there is one with one head and one batch
    /// (the decoders' own), dense F16 or F32 rows, and the map fits.
    pub(super) fn of(a: &Attention) -> Option<Self> {
        let m = a.mask.as_ref()?;
        let blocks = a.n_kv.div_ceil(KV_BLOCK);
        let dense = m.rows_are_dense() && matches!(m.dtype, DType::F16 | DType::F32);
        if m.ne[2] != 1 || m.ne[3] != 1 || !dense || a.n_q * blocks > BLOCK_MAP_BITS {
            return None;
        }
        let mut map = BlockMap { bits: [0; BLOCK_MAP_BITS / 64], n_q: a.n_q, blocks };
        for q in 0..a.n_q {
            for b in 0..blocks {
                let (c0, len) = (b * KV_BLOCK, KV_BLOCK.min(a.n_kv - b * KV_BLOCK));
                // SAFETY: mask row q holds n_kv dense values of its dtype (checked at binding).
                let sees = unsafe {
                    match m.dtype {
                        DType::F16 => {
                            let row = std::slice::from_raw_parts((m.row(q, 0, 0) as *const u16).add(c0), len);
                            sees_any(row, f16::NEG_INFINITY.to_bits())
                        }
                        _ => {
                            let row = std::slice::from_raw_parts((m.row(q, 0, 0) as *const u32).add(c0), len);
                            sees_any(row, f32::NEG_INFINITY.to_bits())
                        }
                    }
                };
                let bit = b * a.n_q + q;
                map.bits[bit / 64] |= u64::from(sees) << (bit % 64);
            }
        }
        Some(map)
    }

    /// How many blocks some query sees.
    pub(super) fn blocks_seen(&self) -> usize {
        (0..self.blocks).filter(|&b| (0..self.n_q).any(|q| self.sees(b, q))).count()
    }

    /// Whether query `q` sees block `b`.
    fn sees(&self, b: usize, q: usize) -> bool {
        let bit = b * self.n_q + q;
        self.bits.get(bit / 64).is_some_and(|w| w >> (bit % 64) & 1 == 1)
    }

    /// Which of queries `q0 .. q0 + nq` (`nq` ≤ 64) see any key of block
    /// `b`: bit `i` for query `q0 + i`.
    pub(super) fn queries_seeing(&self, b: usize, q0: usize, nq: usize) -> u64 {
        let bit = b * self.n_q + q0;
        let (word, shift) = (bit / 64, bit % 64);
        let low = self.bits[word] >> shift;
        // The bits past the word's end, from the next word (when there is one).
        let high = match (shift, self.bits.get(word + 1)) {
            (1.., Some(&next)) => next << (64 - shift),
            _ => 0,
        };
        (low | high) & first_bits(nq)
    }
}

/// Whether any of `values` (a mask's bits) is not `neg_inf`: an OR of
/// differences, which vectorizes, rather than a search that stops early.
fn sees_any<T>(values: &[T], neg_inf: T) -> bool
where
    T: Copy + std::ops::BitXor<Output = T> + std::ops::BitOr<Output = T> + Default + PartialEq,
{
    values.iter().fold(T::default(), |acc, &v| acc | (v ^ neg_inf)) != T::default()
}
