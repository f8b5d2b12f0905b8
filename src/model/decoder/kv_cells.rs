//! Which sequence and position each KV cache cell holds (llama.cpp's
//! `llama_kv_cells`): kept on the host, it gives each batch token its cell
//! and position and fills the masks that keep sequences apart.

use std::collections::HashMap;

use half::f16;

use crate::model::blocks::{MaskRule, mask_value};
use crate::{Error, Result};

/// A sequence's id: tokens of one sequence attend to each other only.
pub type SeqId = u32;

/// The most sequences that share one cache and decode together
/// (`gantry serve --parallel`, `gantry bench --parallel`): past this a
/// step's per-sequence bookkeeping and masks outgrow what a batch is worth.
pub const MAX_PARALLEL_SEQUENCES: usize = 1024;

/// Cells are handed out so that each run of this many (aligned) holds one
/// sequence's tokens while there is room: the CPU's flash attention takes
/// keys in blocks of 64 and skips a block a query sees nothing of, so a
/// query of one of 16 sequences decoding together reads its own blocks,
/// not 16 times as many keys with 15 in 16 masked.
pub const PAGE: usize = 64;

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
    /// The cell each sequence's last token went to (a hint: checked before use).
    tail: HashMap<SeqId, usize>,
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
        Self { cells: vec![None; n_ctx], next_pos: HashMap::new(), first_free: 0, used: 0, tail: HashMap::new() }
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

    /// Gives each token of sequence `seqs[i]` a free cell (see
    /// [`KvCells::cell_for`]) and its sequence's next position. When the
    /// cache cannot hold them all, nothing changes and the error says how
    /// full it is.
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
        for &seq in seqs {
            let at = self.cell_for(seq);
            let pos = self.next_pos.entry(seq).or_insert(0);
            self.cells[at] = Some(Cell { seq, pos: *pos });
            out.cells.push(at as i32);
            out.positions.push(*pos as i32);
            *pos += 1;
            self.tail.insert(seq, at);
            while self.first_free < self.cells.len() && self.cells[self.first_free].is_some() {
                self.first_free += 1;
            }
        }
        self.used += seqs.len();
        Ok(())
    }

    /// The free cell the next token of `seq` goes to: the one after the
    /// sequence's last token while that is free and in the same [`PAGE`];
    /// else the lowest free cell of a page that holds no other sequence's
    /// tokens; else (a crowded cache) the lowest free cell. One sequence
    /// alone fills the cells in order. There must be a free cell.
    fn cell_for(&self, seq: SeqId) -> usize {
        let n = self.cells.len();
        if let Some(&last) = self.tail.get(&seq) {
            let next = last + 1;
            let ours = self.cells[last].is_some_and(|c| c.seq == seq);
            if ours && next < n && !next.is_multiple_of(PAGE) && self.cells[next].is_none() {
                return next;
            }
        }
        let mut start = self.first_free / PAGE * PAGE;
        while start < n {
            let page = &self.cells[start..(start + PAGE).min(n)];
            if page.iter().all(|c| c.is_none_or(|c| c.seq == seq))
                && let Some(free) = page.iter().position(Option::is_none)
            {
                return start + free;
            }
            start += PAGE;
        }
        self.first_free
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
        self.tail.remove(&seq);
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
        self.tail.clear();
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

    #[test]
    fn sequences_decoding_together_get_pages_of_their_own() {
        let mut cells = KvCells::new(32 * PAGE);
        let mut p = BatchPlacement::default();
        // One sequence alone fills the cells in order, across pages.
        cells.place(&[7; PAGE + 3], &mut p).unwrap();
        assert_eq!(p.cells, (0..PAGE as i32 + 3).collect::<Vec<_>>());
        cells.clear();
        // 12 sequences, a prompt token each, then 70 decode steps of one token each.
        let seqs: Vec<SeqId> = (0..12).collect();
        let mut where_: HashMap<SeqId, Vec<i32>> = HashMap::new();
        for _ in 0..71 {
            cells.place(&seqs, &mut p).unwrap();
            for (&s, &c) in seqs.iter().zip(&p.cells) {
                where_.entry(s).or_default().push(c);
            }
        }
        for (s, at) in &where_ {
            // Each sequence's cells run on in its first page, then a second one.
            let pages: Vec<usize> = at.iter().map(|&c| c as usize / PAGE).collect();
            assert!(pages.windows(2).all(|w| w[0] <= w[1]), "sequence {s}: {pages:?}");
            assert_eq!(pages.iter().collect::<std::collections::HashSet<_>>().len(), 2, "sequence {s}: {pages:?}");
            assert!(at.windows(2).all(|w| w[1] == w[0] + 1 || (w[1] as usize).is_multiple_of(PAGE)), "sequence {s}");
        }
        // No page holds two sequences.
        for page in 0..32 {
            let owners: std::collections::HashSet<SeqId> =
                cells.cells[page * PAGE..(page + 1) * PAGE].iter().flatten().map(|c| c.seq).collect();
            assert!(owners.len() <= 1, "page {page}: {owners:?}");
        }
        // 8 more sequences take the 8 pages left.
        let more: Vec<SeqId> = (100..108).collect();
        for _ in 0..21 {
            cells.place(&more, &mut p).unwrap();
            assert!(p.cells.iter().all(|&c| c as usize >= 24 * PAGE), "{:?}", p.cells);
        }
        // A crowded cache still uses every free cell: no page is free, and a
        // new sequence fills the gaps the others left.
        let left = cells.capacity() - cells.used();
        cells.place(&vec![200; left], &mut p).unwrap();
        assert_eq!(cells.used(), cells.capacity());
        assert!(cells.place(&[1], &mut p).is_err());
    }
}
