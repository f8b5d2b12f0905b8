//! Conversations whose graph reads a data-dependent index the client wrote
//! into a buffer: `GET_ROWS`, `SET_ROWS`, `MUL_MAT_ID`'s and `ADD_ID`'s
//! expert ids, `SSM_SCAN`'s state ids. ggml's RPC server read and wrote out
//! of bounds through exactly these (2026 reports on GET_ROWS/SET_ROWS and
//! SSM_SCAN ids): the shapes pass every check, only the values are wrong,
//! so only the kernel can catch them.
//!
//! Each conversation writes its indices, computes the graph and reads the
//! result buffer back. With the indices in range the compute succeeds; with
//! one out of range (one past the end, −1, `i32::MAX`) the server answers an
//! error naming the op and keeps serving. The out-of-range forms are the
//! fuzz target's seeds `fuzz/seeds/remote_server/index-*` (raw frames,
//! mode 0), so the fuzzer starts from graphs that reach the index checks.

use gantry_engine::{DType, MAX_DIMS, Op};

use super::remote_fuzz::{BUFFERS, frame, wire_tensor};
use crate::wire::{Request, WireGraph, WireTensor};

/// Where in the first buffer the conversations write their indices.
const IDS_AT: u64 = 8192;

/// One index conversation: the op it exercises, and its frames for a given
/// bad (or good) index value.
pub struct IndexConversation {
    /// The fuzz seed's file name.
    pub name: &'static str,
    /// ggml's name of the op whose kernel reads the indices.
    pub op: &'static str,
    /// The indices, valid ones, with `slot` the one the hostile forms replace.
    pub ids: Vec<i32>,
    /// Which index the hostile forms replace.
    pub slot: usize,
    /// One past the largest valid index.
    pub bound: i32,
    graph: fn() -> WireGraph<'static>,
}

impl IndexConversation {
    /// The frames: write `ids` (with `ids[slot] = value` when given), compute, read back.
    pub fn frames(&self, value: Option<i32>) -> Vec<Vec<u8>> {
        let mut ids = self.ids.clone();
        if let Some(v) = value {
            ids[self.slot] = v;
        }
        let bytes: Vec<u8> = ids.iter().flat_map(|i| i.to_le_bytes()).collect();
        let write = Request::WriteBuffer { buffer: BUFFERS[0], offset: IDS_AT, len: bytes.len() as u64 };
        let compute = Request::GraphCompute { device: 0, graph: (self.graph)() };
        let read = Request::ReadBuffer { buffer: BUFFERS[1], offset: 0, len: 1024 };
        vec![frame(&write, &bytes), frame(&compute, &[]), frame(&read, &[])]
    }

    /// The hostile index values: one past the end, −1 and `i32::MAX`.
    pub fn bad_values(&self) -> [i32; 3] {
        [self.bound, -1, i32::MAX]
    }

    /// The fuzz seed: raw frames (mode 0) with the index one past the end.
    pub fn seed(&self) -> Vec<u8> {
        let mut data = vec![0u8];
        for f in self.frames(Some(self.bound)) {
            data.extend_from_slice(&(f.len() as u32).to_le_bytes());
            data.extend_from_slice(&f);
        }
        data
    }
}

/// A dense tensor at `offset` of buffer `buffer` (0 or 1 of [`BUFFERS`]).
fn at(dtype: DType, ne: [usize; MAX_DIMS], op: Op, srcs: &[u32], buffer: usize, offset: u64) -> WireTensor<'static> {
    wire_tensor(dtype, ne, op, srcs, (BUFFERS[buffer], offset), "index")
}

fn get_rows() -> WireGraph<'static> {
    WireGraph {
        tensors: vec![
            at(DType::F32, [8, 4, 1, 1], Op::None, &[], 0, 0),
            at(DType::I32, [3, 1, 1, 1], Op::None, &[], 0, IDS_AT),
            at(DType::F32, [8, 3, 1, 1], Op::GetRows, &[0, 1], 1, 0),
        ],
    }
}

fn set_rows() -> WireGraph<'static> {
    WireGraph {
        tensors: vec![
            at(DType::F32, [8, 3, 1, 1], Op::None, &[], 0, 0),
            at(DType::I32, [3, 1, 1, 1], Op::None, &[], 0, IDS_AT),
            at(DType::F32, [8, 4, 1, 1], Op::SetRows, &[0, 1], 1, 0),
        ],
    }
}

/// Three experts `[k 8, m 4]`, two tokens choosing two each.
fn mul_mat_id() -> WireGraph<'static> {
    WireGraph {
        tensors: vec![
            at(DType::F32, [8, 4, 3, 1], Op::None, &[], 0, 0),
            at(DType::F32, [8, 2, 2, 1], Op::None, &[], 0, 512),
            at(DType::I32, [2, 2, 1, 1], Op::None, &[], 0, IDS_AT),
            at(DType::F32, [4, 2, 2, 1], Op::MulMatId, &[0, 1, 2], 1, 0),
        ],
    }
}

/// Three experts' biases of 8, two tokens choosing two each.
fn add_id() -> WireGraph<'static> {
    WireGraph {
        tensors: vec![
            at(DType::F32, [8, 2, 2, 1], Op::None, &[], 0, 512),
            at(DType::F32, [8, 3, 1, 1], Op::None, &[], 0, 0),
            at(DType::I32, [2, 2, 1, 1], Op::None, &[], 0, IDS_AT),
            at(DType::F32, [8, 2, 2, 1], Op::AddId, &[0, 1, 2], 1, 0),
        ],
    }
}

/// Mamba-2 shaped: d_state 4, head_dim 2, 2 heads, 2 tokens, 2 sequences
/// over a cache of 2 states.
fn ssm_scan() -> WireGraph<'static> {
    let f = DType::F32;
    WireGraph {
        tensors: vec![
            at(f, [4, 2, 2, 2], Op::None, &[], 0, 0),
            at(f, [2, 2, 2, 2], Op::None, &[], 0, 1024),
            at(f, [2, 2, 2, 1], Op::None, &[], 0, 1536),
            at(f, [1, 2, 1, 1], Op::None, &[], 0, 1600),
            at(f, [4, 1, 2, 2], Op::None, &[], 0, 2048),
            at(f, [4, 1, 2, 2], Op::None, &[], 0, 2304),
            at(DType::I32, [2, 1, 1, 1], Op::None, &[], 0, IDS_AT),
            at(f, [48, 1, 1, 1], Op::SsmScan { states: 1 }, &[0, 1, 2, 3, 4, 5, 6], 1, 0),
        ],
    }
}

/// Every index conversation.
pub fn index_conversations() -> Vec<IndexConversation> {
    vec![
        IndexConversation {
            name: "index-get-rows",
            op: "GET_ROWS",
            ids: vec![3, 0, 2],
            slot: 1,
            bound: 4,
            graph: get_rows,
        },
        IndexConversation {
            name: "index-set-rows",
            op: "SET_ROWS",
            ids: vec![1, 3, 0],
            slot: 2,
            bound: 4,
            graph: set_rows,
        },
        IndexConversation {
            name: "index-mul-mat-id",
            op: "MUL_MAT_ID",
            ids: vec![2, 0, 1, 2],
            slot: 3,
            bound: 3,
            graph: mul_mat_id,
        },
        IndexConversation {
            name: "index-add-id",
            op: "ADD_ID",
            ids: vec![0, 2, 1, 0],
            slot: 1,
            bound: 3,
            graph: add_id,
        },
        IndexConversation {
            name: "index-ssm-scan",
            op: "SSM_SCAN",
            ids: vec![1, 0],
            slot: 0,
            bound: 2,
            graph: ssm_scan,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::super::remote_fuzz::{response, run, session};
    use super::*;
    use crate::wire::Response;

    /// Runs the frames on a fresh session; the compute's response.
    fn compute(c: &IndexConversation, value: Option<i32>) -> Response {
        let mut s = session().unwrap();
        let mut replies = c.frames(value).iter().map(|f| response(&s.handle_frame(f)).unwrap().0).collect::<Vec<_>>();
        assert!(matches!(replies[0], Response::Done), "{}: the write gave {:?}", c.name, replies[0]);
        replies.swap_remove(1)
    }

    #[test]
    fn valid_indices_compute() {
        for c in index_conversations() {
            let r = compute(&c, None);
            assert!(matches!(r, Response::Done), "{}: {r:?}", c.name);
        }
    }

    #[test]
    fn out_of_range_indices_are_refused_by_name_and_the_server_serves_on() {
        for c in index_conversations() {
            for bad in c.bad_values() {
                match compute(&c, Some(bad)) {
                    Response::Error(m) => assert!(m.contains(c.op), "{} with {bad}: {m}", c.name),
                    other => panic!("{} with index {bad}: {other:?}", c.name),
                }
            }
            run(&c.seed()).unwrap();
        }
    }

    /// `fuzz/seeds/remote_server/index-*` are these conversations: checked to
    /// be current, rewritten with `GANTRY_WRITE_SEEDS=1`.
    #[test]
    fn fuzz_seeds_are_current() {
        let dir = gantry_engine::testing::repo_root().join("fuzz/seeds/remote_server");
        let write = std::env::var_os("GANTRY_WRITE_SEEDS").is_some();
        for c in index_conversations() {
            let path = dir.join(c.name);
            if write {
                std::fs::write(&path, c.seed()).unwrap();
            }
            assert_eq!(
                std::fs::read(&path).ok(),
                Some(c.seed()),
                "{} is stale: rerun with GANTRY_WRITE_SEEDS=1",
                c.name
            );
        }
    }
}
