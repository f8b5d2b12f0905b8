//! The angle tables of recent ROPE nodes, kept for later nodes that rotate
//! by the same positions with the same parameters: every layer of a decoder
//! rotates its queries and its keys by one positions tensor, so a graph of
//! 30 layers computed the same `[cos, sin]` of every token and pair 60
//! times — in f64, a `sin_cos` per pair, the larger part of ROPE's time
//! when 16 sequences decode together (10 of 14 µs per node, Zen 4).
//!
//! An entry is found by what the table is computed from — the parameters,
//! the position values and the frequency factors, compared by content —
//! never by tensor or address, so a table is reused exactly where it would
//! be recomputed to the same bits, across nodes and across computes, and
//! nothing has to be invalidated when the host writes new positions.

use gantry_engine::RopeParams;

use super::rope::RopeRows;
use crate::parallel::{Par, SendPtr};

/// Tables kept: one per rope base of a model that has two (Gemma-3's
/// local and global layers). A decode step's positions are new each step,
/// so each step replaces the least recently used ones, whose vectors
/// already have the room: from the third step on nothing is allocated.
const ENTRIES: usize = 2;

/// One table and what it was computed from.
#[derive(Default)]
struct Entry {
    params: Option<RopeParams>,
    positions: Vec<i32>,
    factors: Vec<f32>,
    /// `n_dims` floats (`[cos, sin]` per pair) per position.
    table: Vec<f32>,
    /// When it was last used ([`RopeAngleMemo::clock`]).
    used: u64,
}

/// The tables of the last few distinct ROPE inputs (see the module docs).
/// Steady state allocates nothing: an entry replaced keeps its vectors'
/// room.
#[derive(Default)]
pub struct RopeAngleMemo {
    entries: [Entry; ENTRIES],
    /// Lookups so far: the entry used longest ago is replaced.
    clock: u64,
}

impl RopeAngleMemo {
    /// The table of `rope`'s angles: `n_dims` floats per token, as
    /// [`RopeRows::token_angles`] gives them (the same bits), computed over
    /// `par`'s threads unless an entry holds it already.
    pub(super) fn table(&mut self, rope: &RopeRows<'_>, par: &Par<'_>) -> &[f32] {
        let n_dims = rope.cache_len();
        let n = rope.tokens();
        let found = self.entries.iter().position(|e| {
            e.params == Some(*rope.params())
                && e.positions.len() == n
                && (0..n).all(|i| e.positions[i] == rope.position(i))
                && rope.factors_equal(&e.factors)
        });
        self.clock += 1;
        let at = match found {
            Some(at) => at,
            None => {
                let at = (0..ENTRIES).min_by_key(|&i| self.entries[i].used).unwrap_or(0);
                let e = &mut self.entries[at];
                e.params = Some(*rope.params());
                e.positions.clear();
                e.positions.extend((0..n).map(|i| rope.position(i)));
                rope.copy_factors(&mut e.factors);
                e.table.clear();
                e.table.resize(n * n_dims, 0.0);
                let out = SendPtr(e.table.as_mut_ptr());
                // A few sines and cosines per pair: worth the threads for a prompt.
                par.for_each(n, 64 * n_dims, 0, |tokens, _| {
                    for i in tokens {
                        // SAFETY: the table holds `n · n_dims` floats; each task
                        // writes its own tokens' rows.
                        let row = unsafe { std::slice::from_raw_parts_mut(out.get().add(i * n_dims), n_dims) };
                        rope.token_angles(i, row);
                    }
                });
                at
            }
        };
        self.entries[at].used = self.clock;
        &self.entries[at].table
    }
}

#[cfg(test)]
mod tests {
    use gantry_engine::{BufferUsage, Context, DType, Op, RopeMode};

    use super::*;
    use crate::parallel::PerThreadScratch;

    /// A table from the memo holds the bits the op computes token by token;
    /// new positions (written into the same tensor) get a new table, and
    /// the old positions find theirs again.
    #[test]
    fn tables_match_token_angles_and_follow_the_positions() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let scratch = PerThreadScratch::new(2);
        let par = Par::new(&pool, 2, &scratch);
        let mut ctx = Context::new();
        let x = ctx.tensor(DType::F32, [64, 3, 5, 1]).unwrap();
        let pos = ctx.tensor(DType::I32, [5, 1, 1, 1]).unwrap();
        let p = RopeParams::new(64, RopeMode::Neox, 10000.0);
        let r = ctx.rope(x, pos, None, p).unwrap();
        ctx.alloc_tensors(&[x, pos, r], &crate::buffer_type(), BufferUsage::Any).unwrap();
        let mut memo = RopeAngleMemo::default();
        let mut check = |ctx: &mut Context, positions: [i32; 5]| {
            ctx.write_tensor_bytes(pos, 0, bytemuck::cast_slice(&positions)).unwrap();
            let d = *ctx.desc(r).unwrap();
            let Op::Rope(p) = d.op else { unreachable!() };
            let rope = RopeRows::bind(ctx, r, &d, &p).unwrap();
            let table = memo.table(&rope, &par).to_vec();
            let mut one = vec![0.0; 64];
            for (i, row) in table.chunks_exact(64).enumerate() {
                rope.token_angles(i, &mut one);
                assert_eq!(row, &one[..], "token {i} at position {}", positions[i]);
            }
            table
        };
        let first = check(&mut ctx, [0, 1, 2, 3, 4]);
        let moved = check(&mut ctx, [7, 100, 2, 3, 4000]);
        assert_ne!(first, moved);
        assert_eq!(check(&mut ctx, [0, 1, 2, 3, 4]), first);
    }
}
