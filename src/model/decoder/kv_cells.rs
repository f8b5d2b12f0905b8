//! Which sequence and position each KV cache cell holds (llama.cpp's
//! `llama_kv_cells`): kept on the host, it gives each batch token its cell
//! and position and fills the masks that keep sequences apart.

use std::collections::HashMap;

use half::f16;

use crate::model::blocks::{MaskRule, mask_value};
use crate::{Error, Result};

/// A sequence's id: tokens of one sequence attend to each other only.
pub type SeqId = u32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cell {
    seq: SeqId,
    pos: usize,
}

/// The cache's cells: free, or holding one token of one sequence.
#[derive(Debug, Clone)]
pub struct KvCells {
    cells: Vec<Option<Cell>>,
    /// The next position of each sequence that has tokens.
    next_pos: HashMap<SeqId, usize>,
    /// No free cell lies below this one.
    first_free: usize,
    /// Cells in use.
    used: usize,
}

/// Where a batch's tokens went: a cell and a position each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchPlacement {
    /// The cell of each token (SET_ROWS' row indices).
    pub cells: Vec<i32>,
    /// The position of each token in its sequence (rope's positions).
    pub positions: Vec<i32>,
}

impl KvCells {
    /// `n_ctx` free cells.
    pub fn new(n_ctx: usize) -> Self {
        Self { cells: vec![None; n_ctx], next_pos: HashMap::new(), first_free: 0, used: 0 }
    }

    /// Cells in all.
    pub fn capacity(&self) -> usize {
        self.cells.len()
    }

    /// Cells in use.
    pub fn used(&self) -> usize {
        self.used
    }

    /// The position the next token of `seq` gets (its tokens so far).
    pub fn next_pos(&self, seq: SeqId) -> usize {
        self.next_pos.get(&seq).copied().unwrap_or(0)
    }

    /// One past the highest cell in use: graphs attend over this many cells.
    pub fn extent(&self) -> usize {
        self.cells.iter().rposition(Option::is_some).map_or(0, |i| i + 1)
    }

    /// Gives each token of sequence `seqs[i]` the lowest free cell and its
    /// sequence's next position. When the cache cannot hold them all,
    /// nothing changes and the error says how full it is.
    pub fn place(&mut self, seqs: &[SeqId], out: &mut BatchPlacement) -> Result<()> {
        if self.used + seqs.len() > self.cells.len() {
            return Err(Error::Model(format!(
                "the context is full: {} of {} cells used, {} more asked",
                self.used,
                self.cells.len(),
                seqs.len()
            )));
        }
        out.cells.clear();
        out.positions.clear();
        let mut at = self.first_free;
        for &seq in seqs {
            while self.cells[at].is_some() {
                at += 1;
            }
            let pos = self.next_pos.entry(seq).or_insert(0);
            self.cells[at] = Some(Cell { seq, pos: *pos });
            out.cells.push(at as i32);
            out.positions.push(*pos as i32);
            *pos += 1;
            at += 1;
        }
        self.used += seqs.len();
        self.first_free = at.min(self.cells.len());
        while self.first_free < self.cells.len() && self.cells[self.first_free].is_some() {
            self.first_free += 1;
        }
        Ok(())
    }

    /// Writes the F16 mask `[n_kv, n_tokens]` of a batch: token `i` (of
    /// sequence `seqs[i]` at `positions[i]`) sees cell `j` when the cell
    /// holds a token of the same sequence that `rule` lets it see.
    pub fn fill_mask(&self, seqs: &[SeqId], positions: &[i32], n_kv: usize, rule: MaskRule, out: &mut Vec<f16>) {
        out.clear();
        out.reserve(seqs.len() * n_kv);
        for (&seq, &pos) in seqs.iter().zip(positions) {
            out.extend(
                self.cells[..n_kv]
                    .iter()
                    .map(|cell| mask_value(cell.is_some_and(|c| c.seq == seq && rule.sees(pos as usize, c.pos)))),
            );
        }
    }

    /// Undoes a [`KvCells::place`] of `seqs` that gave `placement`: its
    /// cells are free again and each sequence continues where it was.
    pub fn unplace(&mut self, seqs: &[SeqId], placement: &BatchPlacement) {
        for ((&seq, &cell), &pos) in seqs.iter().zip(&placement.cells).zip(&placement.positions) {
            let cell = cell as usize;
            if self.cells.get(cell).is_some_and(|c| *c == Some(Cell { seq, pos: pos as usize })) {
                self.cells[cell] = None;
                self.used -= 1;
                self.first_free = self.first_free.min(cell);
                let next = self.next_pos.entry(seq).or_insert(0);
                *next = (*next).min(pos as usize);
            }
        }
        self.next_pos.retain(|_, &mut next| next > 0);
    }

    /// Frees every cell of `seq`; its next token starts at position 0.
    pub fn remove_seq(&mut self, seq: SeqId) {
        for (i, cell) in self.cells.iter_mut().enumerate() {
            if cell.is_some_and(|c| c.seq == seq) {
                *cell = None;
                self.used -= 1;
                self.first_free = self.first_free.min(i);
            }
        }
        self.next_pos.remove(&seq);
    }

    /// Keeps the first `n_keep` positions of `seq` and frees the rest; its
    /// next token goes to position `n_keep` (a conversation re-rendered
    /// with a different ending continues from the common prefix).
    pub fn truncate_seq(&mut self, seq: SeqId, n_keep: usize) {
        for (i, cell) in self.cells.iter_mut().enumerate() {
            if cell.is_some_and(|c| c.seq == seq && c.pos >= n_keep) {
                *cell = None;
                self.used -= 1;
                self.first_free = self.first_free.min(i);
            }
        }
        if let Some(next) = self.next_pos.get_mut(&seq) {
            *next = (*next).min(n_keep);
        }
        self.next_pos.retain(|_, &mut next| next > 0);
    }

    /// Frees every cell.
    pub fn clear(&mut self) {
        self.cells.fill(None);
        self.next_pos.clear();
        self.first_free = 0;
        self.used = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_get_their_own_positions_and_never_see_each_other() {
        let mut cells = KvCells::new(8);
        let mut p = BatchPlacement::default();
        cells.place(&[0, 0, 1], &mut p).unwrap();
        assert_eq!((p.cells.clone(), p.positions.clone()), (vec![0, 1, 2], vec![0, 1, 0]));
        cells.place(&[1, 0], &mut p).unwrap();
        assert_eq!((p.cells.clone(), p.positions.clone()), (vec![3, 4], vec![1, 2]));
        let mut mask = Vec::new();
        cells.fill_mask(&[1, 0], &p.positions, 5, MaskRule::CAUSAL, &mut mask);
        let seen = |mask: &[f16], row: usize| (0..5).filter(|&j| mask[row * 5 + j] == f16::ZERO).collect::<Vec<_>>();
        assert_eq!(seen(&mask, 0), [2, 3], "sequence 1 at position 1 sees its cells 2 and 3");
        assert_eq!(seen(&mask, 1), [0, 1, 4], "sequence 0 at position 2 sees its cells 0, 1, 4");
        let window = MaskRule { causal: true, window: 2 };
        cells.fill_mask(&[0], &[2], 5, window, &mut mask);
        assert_eq!(seen(&mask, 0), [1, 4], "a window of 2 hides position 0");

        let before = cells.clone();
        cells.place(&[0, 5], &mut p).unwrap();
        cells.unplace(&[0, 5], &p);
        assert_eq!((cells.used(), cells.next_pos(0), cells.next_pos(5)), (5, 3, 0), "unplace undoes place");
        assert_eq!(cells.cells, before.cells);

        let mut cut = cells.clone();
        cut.truncate_seq(0, 1);
        assert_eq!((cut.used(), cut.next_pos(0), cut.next_pos(1)), (3, 1, 2), "seq 0 keeps position 0 only");

        cells.remove_seq(0);
        assert_eq!((cells.used(), cells.next_pos(0), cells.extent()), (2, 0, 4));
        cells.place(&[2, 2, 2, 2], &mut p).unwrap();
        assert_eq!(p.cells, [0, 1, 4, 5], "freed cells are reused lowest first");
        assert!(cells.place(&[3, 3, 3], &mut p).is_err(), "two cells left");
        assert_eq!(cells.used(), 6, "a failed placement changes nothing");
    }
}
