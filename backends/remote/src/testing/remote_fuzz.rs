//! The server's decoder under fuzzing: bytes arriving from the network,
//! through a session serving a CPU device, as `gantry rpc-server` handles
//! them (the same decoder, checks and rebuild; [`Session::handle_frame`]).
//!
//! An input is either raw frames (first byte even) — each a `u32` length
//! then that many bytes of frame, as a client could send on a stream — or
//! (first byte odd) a graph built from the bytes with `arbitrary`: tensors
//! of small, often valid shapes and ops, wired to earlier tensors, at
//! offsets in or out of the session's buffers, encoded as a compute (or an
//! op query) the way a client would. The raw form finds what the decoder
//! lets through; the structured one gets past it, into the op rules, the
//! location checks and the kernels.
//!
//! A structured input whose first byte also has bit 1 set (3, 7, ...) is a
//! hostile graph: the same tensors, bent towards what careless code gets
//! wrong — zero dimensions beside huge ones (an empty tensor of 2^60 rows),
//! zero and huge strides, broadcasts to large shapes, out-of-range source
//! indices (the tensor itself, later ones, past the end), buffer handles
//! that were never given or were freed, offsets at and past a buffer's end
//! — over a few ready-made gadgets (GET_ROWS, SET_ROWS, MUL_MAT_ID, ADD_ID
//! and SSM_SCAN whose I32 indices or ids the input writes into the buffer
//! first, in range, negative or huge; a row sum over an empty tensor; a
//! broadcast product; a repeat). Inputs of the plain structured form (first
//! byte 1, 5, ...) keep their meaning.
//!
//! What must hold ([`run`] returns an `Err` naming what broke): every frame
//! gets a response that decodes, and afterwards the session still serves a
//! plain read of its buffer. A panic anywhere is a finding too (libFuzzer
//! reports it).

use std::sync::{Arc, OnceLock};

use arbitrary::{Result as ArbResult, Unstructured};
use gantry_cpu::{CpuBackend, CpuDevice};
use gantry_engine::{
    BinaryOp, ConvParams, DType, Device, GluOp, MAX_DIMS, MAX_SRC, Op, PoolOp, RopeMode, RopeParams, ScaleMode,
    SortOrder, TriType, UnaryOp, tensor::contiguous_strides,
};

use crate::server::{ServedDevice, ServerState, Session, WeightCache};
use crate::wire::{Limits, PROTOCOL_VERSION, Request, Response, WireGraph, WireLocation, WireTensor};

/// Bytes of each of the two buffers a fuzzed session starts with.
pub const BUFFER_BYTES: usize = 16 << 10;

/// Handles of the two buffers (the session's first two).
pub const BUFFERS: [u64; 2] = [1, 2];

/// Limits small enough that every input computes in well under a millisecond.
pub fn fuzz_limits() -> Limits {
    Limits { max_graph_tensors: 64, max_tensor_elements: 1 << 14, max_buffers: 16, ..Limits::default() }
}

/// One CPU device with one thread, shared by every input (a pool per input would dominate).
fn state() -> Arc<ServerState> {
    static STATE: OnceLock<Arc<ServerState>> = OnceLock::new();
    STATE
        .get_or_init(|| {
            let device: Arc<dyn Device> = Arc::new(CpuDevice::new());
            let backend = match CpuBackend::with_threads(1) {
                Ok(b) => Arc::new(b),
                Err(e) => panic!("a CPU backend for fuzzing: {e}"),
            };
            Arc::new(ServerState {
                devices: vec![ServedDevice { device, backend }],
                weights: WeightCache::new(),
                limits: fuzz_limits(),
                name: "fuzz".into(),
            })
        })
        .clone()
}

/// One frame: `request`'s length, the request, its payload.
pub(crate) fn frame(request: &Request<'_>, payload: &[u8]) -> Vec<u8> {
    let m = request.encode();
    let mut f = Vec::with_capacity(4 + m.len() + payload.len());
    f.extend_from_slice(&(m.len() as u32).to_le_bytes());
    f.extend_from_slice(&m);
    f.extend_from_slice(payload);
    f
}

/// The response in a server's reply, and its payload.
pub(crate) fn response(out: &[u8]) -> Result<(Response, &[u8]), String> {
    let (len, rest) = out.split_first_chunk::<4>().ok_or("a reply shorter than its length")?;
    let len = u32::from_le_bytes(*len) as usize;
    if len > rest.len() {
        return Err(format!("a reply of {len} bytes in {} bytes", rest.len()));
    }
    let (message, payload) = rest.split_at(len);
    Response::decode(message).map(|r| (r, payload)).map_err(|e| format!("a reply that does not decode: {e}"))
}

/// A greeted session holding [`BUFFERS`], filled with a ramp of bytes.
pub(crate) fn session() -> Result<Session, String> {
    let mut s = Session::new(state());
    let hello = Request::Hello { version: PROTOCOL_VERSION, client: "fuzz" };
    if !matches!(response(&s.handle_frame(&frame(&hello, &[])))?.0, Response::Welcome { .. }) {
        return Err("hello was refused".into());
    }
    let ramp: Vec<u8> = (0..BUFFER_BYTES).map(|i| (i % 251) as u8).collect();
    for &b in &BUFFERS {
        let alloc = Request::AllocBuffer { device: 0, size: BUFFER_BYTES as u64 };
        match response(&s.handle_frame(&frame(&alloc, &[])))?.0 {
            Response::Buffer { buffer } if buffer == b => {}
            other => return Err(format!("alloc gave {other:?}")),
        }
        let write = Request::WriteBuffer { buffer: b, offset: 0, len: BUFFER_BYTES as u64 };
        response(&s.handle_frame(&frame(&write, &ramp)))?;
    }
    Ok(s)
}

/// Runs one input; `Err` names the invariant it broke.
pub fn run(data: &[u8]) -> Result<(), String> {
    let mut s = session()?;
    let frames = match data.split_first() {
        Some((mode, rest)) if mode % 4 == 3 => hostile::frames(rest),
        Some((mode, rest)) if mode % 2 == 1 => structured_frames(rest),
        Some((_, rest)) => raw_frames(rest),
        None => Vec::new(),
    };
    for f in &frames {
        response(&s.handle_frame(f))?;
    }
    // The session serves on: a plain read of a buffer that still exists, or of a new one.
    let probe = Request::AllocBuffer { device: 0, size: 64 };
    let buffer = match response(&s.handle_frame(&frame(&probe, &[])))?.0 {
        Response::Buffer { buffer } => buffer,
        // Every buffer slot taken by the input: the limit answered, which is serving too.
        Response::Error(m) if m.contains("buffers") || m.contains("memory") => return Ok(()),
        other => return Err(format!("after the input, alloc gave {other:?}")),
    };
    let read = Request::ReadBuffer { buffer, offset: 0, len: 64 };
    match response(&s.handle_frame(&frame(&read, &[])))? {
        (Response::Done, bytes) if bytes.len() == 64 => Ok(()),
        (other, _) => Err(format!("after the input, a read gave {other:?}")),
    }
}

/// `[u32 length][frame]...` until the bytes run out (a short tail is one last frame).
fn raw_frames(mut data: &[u8]) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    while let Some((len, rest)) = data.split_first_chunk::<4>() {
        let n = (u32::from_le_bytes(*len) as usize).min(rest.len());
        frames.push(rest[..n].to_vec());
        data = &rest[n..];
    }
    if !data.is_empty() {
        frames.push(data.to_vec());
    }
    frames
}

/// Floats that break careless code.
const FLOATS: [f32; 10] = [0.0, 1.0, -1.0, 0.5, 1e-5, 10000.0, f32::NAN, f32::INFINITY, -0.0, 1e30];

fn float(u: &mut Unstructured<'_>) -> ArbResult<f32> {
    Ok(FLOATS[u.choose_index(FLOATS.len())?])
}

/// A small count, stride or padding (0 included, which the builders refuse where it is wrong).
fn small(u: &mut Unstructured<'_>) -> ArbResult<u32> {
    u.int_in_range(0..=5)
}

fn conv(u: &mut Unstructured<'_>) -> ArbResult<ConvParams> {
    Ok(ConvParams { stride: [small(u)?, small(u)?], pad: [small(u)?, small(u)?], dilation: [small(u)?, small(u)?] })
}

fn pool_op(u: &mut Unstructured<'_>) -> ArbResult<PoolOp> {
    Ok(if u.arbitrary()? { PoolOp::Max } else { PoolOp::Avg })
}

fn op(u: &mut Unstructured<'_>) -> ArbResult<Op> {
    Ok(match u.int_in_range(0u8..=69)? {
        0 => Op::None,
        1 => Op::View,
        2 => Op::Reshape,
        3 => {
            let mut axes = [0u8, 1, 2, 3];
            for i in (1..4).rev() {
                axes.swap(i, u.int_in_range(0..=i)?);
            }
            if u.ratio(1, 8)? {
                axes[0] = u.arbitrary()?;
            }
            Op::Permute { axes }
        }
        4 => Op::Transpose,
        5 => Op::Cpy,
        6 => Op::Cont,
        7 => Op::Dup,
        8 => Op::GetRows,
        9 => Op::SetRows,
        10 => Op::Binary(BinaryOp::ALL[u.choose_index(BinaryOp::ALL.len())?]),
        11 => Op::Scale { scale: float(u)?, bias: float(u)? },
        12 => Op::Clamp { min: float(u)?, max: float(u)? },
        13 => Op::Unary(UnaryOp::ALL[u.choose_index(UnaryOp::ALL.len())?]),
        14 => Op::Glu { op: GluOp::ALL[u.choose_index(GluOp::ALL.len())?], swapped: u.arbitrary()? },
        15 => Op::Sum,
        16 => Op::SumRows,
        17 => Op::Mean,
        18 => Op::Argmax,
        19 => Op::Norm { eps: float(u)? },
        20 => Op::RmsNorm { eps: float(u)? },
        21 => Op::SoftMax { scale: float(u)?, max_bias: float(u)? },
        22 => Op::DiagMaskInf { n_past: u.int_in_range(0..=8)? },
        23 => {
            let mode = if u.arbitrary()? { RopeMode::Normal } else { RopeMode::Neox };
            let mut p = RopeParams::new(u.int_in_range(0..=16)? * 2, mode, float(u)?);
            p.ext_factor = float(u)?;
            p.n_ctx_orig = u.int_in_range(0..=64)?;
            Op::Rope(p)
        }
        24 => Op::MulMat,
        25 => Op::Concat { dim: u.int_in_range(0..=4)? },
        26 => Op::Repeat,
        27 => Op::LeakyRelu { negative_slope: float(u)? },
        28 => Op::MulMatId,
        29 => Op::AddId,
        30 => Op::Argsort { order: if u.arbitrary()? { SortOrder::Asc } else { SortOrder::Desc } },
        31 => Op::TopK,
        32 => Op::Cumsum,
        33 => Op::SwigluOai { alpha: float(u)?, limit: float(u)?, swapped: u.arbitrary()? },
        34 => Op::Im2col { conv: conv(u)?, is_2d: u.arbitrary()? },
        35 => Op::Conv2d(conv(u)?),
        36 => Op::Conv2dDw(conv(u)?),
        37 => Op::ConvTranspose1d { stride: u.int_in_range(0..=4)? },
        38 => Op::ConvTranspose2d { stride: u.int_in_range(0..=4)? },
        39 => Op::Pool1d { op: pool_op(u)?, k: small(u)?, s: small(u)?, p: small(u)? },
        40 => Op::Pool2d {
            op: pool_op(u)?,
            k: [small(u)?, small(u)?],
            s: [small(u)?, small(u)?],
            p: [small(u)?, small(u)?],
        },
        41 => Op::Upscale {
            mode: if u.arbitrary()? { ScaleMode::Nearest } else { ScaleMode::Bilinear },
            align_corners: u.arbitrary()?,
        },
        42 => Op::Pad {
            lp: [small(u)?, small(u)?, small(u)?, small(u)?],
            rp: [small(u)?, small(u)?, small(u)?, small(u)?],
            circular: u.arbitrary()?,
        },
        43 => Op::PadReflect1d { p0: small(u)?, p1: small(u)? },
        44 => Op::Roll {
            shift: [u.int_in_range(-8..=8)?, u.int_in_range(-8..=8)?, u.int_in_range(-8..=8)?, u.int_in_range(-8..=8)?],
        },
        45 => Op::GroupNorm { n_groups: small(u)?, eps: float(u)? },
        46 => Op::L2Norm { eps: float(u)? },
        47 => Op::Arange { start: float(u)?, stop: float(u)?, step: float(u)? },
        48 => Op::TimestepEmbedding { dim: u.int_in_range(0..=16)?, max_period: u.int_in_range(-2..=10000)? },
        49 => Op::Xielu { alpha_n: float(u)?, alpha_p: float(u)?, beta: float(u)?, eps: float(u)? },
        50 => Op::Fill { c: float(u)? },
        51 => Op::Tri(TriType::ALL[u.choose_index(TriType::ALL.len())?]),
        52 => Op::Diag,
        53 => Op::DiagMaskZero { n_past: u.int_in_range(0..=8)? },
        54 => Op::Set {
            nb: [u.int_in_range(0..=256)?, u.int_in_range(0..=256)?, u.int_in_range(0..=1024)?],
            offset: u.int_in_range(0..=256)?,
        },
        55 => Op::Acc {
            nb: [u.int_in_range(0..=256)?, u.int_in_range(0..=256)?, u.int_in_range(0..=1024)?],
            offset: u.int_in_range(0..=256)?,
        },
        56 => Op::Add1,
        57 => Op::CountEqual,
        58 => Op::SsmConv,
        59 => Op::SsmScan { states: u.int_in_range(0..=4)? },
        60 => Op::SolveTri,
        61 => Op::RwkvWkv6,
        62 => Op::GatedLinearAttn { scale: float(u)? },
        63 => Op::RwkvWkv7,
        64 => Op::GatedDeltaNet { states: u.int_in_range(0..=4)? },
        65 => Op::WinPart { npx: small(u)?, npy: small(u)?, w: small(u)? },
        66 => Op::WinUnpart { w: small(u)? },
        67 => Op::GetRelPos,
        68 => Op::AddRelPos,
        _ => Op::FlashAttnExt { scale: float(u)?, max_bias: float(u)?, softcap: float(u)? },
    })
}

fn tensor<'a>(u: &mut Unstructured<'a>, index: usize) -> ArbResult<WireTensor<'a>> {
    let dtype = if u.ratio(3, 4)? {
        [DType::F32, DType::F16, DType::I32][u.choose_index(3)?]
    } else {
        DType::ALL[u.choose_index(DType::ALL.len())?]
    };
    let mut ne = [1usize; MAX_DIMS];
    let dims = u.int_in_range(1..=MAX_DIMS)?;
    for n in ne.iter_mut().take(dims) {
        *n = u.int_in_range(0..=8)?;
    }
    if dtype.is_quantized() {
        ne[0] = dtype.block_size() * u.int_in_range(0..=2)?;
    }
    let nb = match contiguous_strides(dtype, ne) {
        Ok(nb) if u.ratio(7, 8)? => nb,
        _ => {
            let mut nb = [0usize; MAX_DIMS];
            for s in &mut nb {
                *s = u.int_in_range(0..=64)? * if u.arbitrary()? { dtype.bytes_per_block() } else { 1 };
            }
            nb
        }
    };
    let computed = index > 0 && u.ratio(2, 3)?;
    let op = if computed { op(u)? } else { Op::None };
    let mut srcs = [None; MAX_SRC];
    if computed || u.ratio(1, 16)? {
        for s in srcs.iter_mut().take(u.int_in_range(0..=MAX_SRC)?) {
            *s = if index == 0 || u.ratio(1, 16)? {
                Some(u.int_in_range(0..=u32::MAX)?)
            } else {
                Some(u.int_in_range(0..=index as u32 - 1)?)
            };
        }
    }
    let location = if u.ratio(15, 16)? {
        let buffer = if u.ratio(15, 16)? { BUFFERS[u.choose_index(2)?] } else { u.arbitrary()? };
        let offset = if u.ratio(7, 8)? { u.int_in_range(0..=(BUFFER_BYTES / 64) as u64)? * 64 } else { u.arbitrary()? };
        Some(WireLocation { buffer, offset })
    } else {
        None
    };
    let view = u.ratio(1, 4)?;
    Ok(WireTensor { computed, view, dtype, ne, nb, op, srcs, location, name: "" })
}

/// A compute (or an op query) of a graph made from the bytes, as one frame,
/// then a read of what it wrote.
fn structured_frames(data: &[u8]) -> Vec<Vec<u8>> {
    let mut u = Unstructured::new(data);
    let n = u.int_in_range(1..=12usize).unwrap_or(1);
    let mut tensors = Vec::with_capacity(n);
    for i in 0..n {
        match tensor(&mut u, i) {
            Ok(t) => tensors.push(t),
            Err(_) => break,
        }
    }
    let query = u.ratio(1, 8).unwrap_or(false);
    let graph = WireGraph { tensors };
    let request =
        if query { Request::SupportsOp { device: 0, graph } } else { Request::GraphCompute { device: 0, graph } };
    let read = Request::ReadBuffer { buffer: BUFFERS[0], offset: 0, len: BUFFER_BYTES as u64 };
    vec![frame(&request, &[]), frame(&read, &[])]
}

/// A dense tensor of `ne` at `(buffer, offset)`, computed by `op` from the
/// tensors at `srcs` (earlier indices in its graph), named `name`.
pub(crate) fn wire_tensor<'a>(
    dtype: DType,
    ne: [usize; MAX_DIMS],
    op: Op,
    srcs: &[u32],
    (buffer, offset): (u64, u64),
    name: &'a str,
) -> WireTensor<'a> {
    let mut s = [None; MAX_SRC];
    for (slot, &v) in s.iter_mut().zip(srcs) {
        *slot = Some(v);
    }
    WireTensor {
        computed: op != Op::None,
        view: false,
        dtype,
        ne,
        nb: contiguous_strides(dtype, ne).unwrap_or([0; MAX_DIMS]),
        op,
        srcs: s,
        location: Some(WireLocation { buffer, offset }),
        name,
    }
}

fn f32_tensor<'a>(ne: [usize; MAX_DIMS], op: Op, srcs: &[u32], buffer: u64, offset: u64) -> WireTensor<'a> {
    wire_tensor(DType::F32, ne, op, srcs, (buffer, offset), "seed")
}

/// Valid conversations for the fuzzer to start from (raw frames, mode 0),
/// by name: what `fuzz/seeds/remote_server` holds.
pub fn seed_inputs() -> Vec<(&'static str, Vec<u8>)> {
    let [b1, b2] = BUFFERS;
    let product = WireGraph {
        tensors: vec![
            f32_tensor([8, 4, 1, 1], Op::None, &[], b1, 0),
            f32_tensor([8, 3, 1, 1], Op::None, &[], b1, 256),
            f32_tensor([4, 3, 1, 1], Op::MulMat, &[0, 1], b2, 0),
            f32_tensor([4, 3, 1, 1], Op::Unary(UnaryOp::Silu), &[2], b2, 64),
            f32_tensor([4, 3, 1, 1], Op::RmsNorm { eps: 1e-5 }, &[3], b2, 128),
        ],
    };
    let query = WireGraph {
        tensors: product
            .tensors
            .iter()
            .take(3)
            .cloned()
            .map(|mut t| {
                t.location = None;
                t
            })
            .collect(),
    };
    let raw = |frames: &[Vec<u8>]| {
        let mut data = vec![0u8];
        for f in frames {
            data.extend_from_slice(&(f.len() as u32).to_le_bytes());
            data.extend_from_slice(f);
        }
        data
    };
    vec![
        (
            "compute-product",
            raw(&[
                frame(&Request::GraphCompute { device: 0, graph: product }, &[]),
                frame(&Request::ReadBuffer { buffer: b2, offset: 0, len: 192 }, &[]),
            ]),
        ),
        (
            "query-and-buffers",
            raw(&[
                frame(&Request::SupportsOp { device: 0, graph: query }, &[]),
                frame(&Request::DeviceMemory { device: 0 }, &[]),
                frame(&Request::AllocBuffer { device: 0, size: 128 }, &[]),
                frame(&Request::WriteBuffer { buffer: 3, offset: 8, len: 4 }, &[1, 2, 3, 4]),
                frame(&Request::CopyBuffer { src: 3, src_offset: 8, dst: b1, dst_offset: 0, len: 4 }, &[]),
                frame(&Request::FillBuffer { buffer: b2, offset: 4, len: 8, value: 7 }, &[]),
                frame(&Request::FreeBuffer { buffer: 3 }, &[]),
            ]),
        ),
    ]
}

/// The hostile form of the structured input (first byte 3 mod 4).
mod hostile {
    use arbitrary::{Result as ArbResult, Unstructured};
    use gantry_engine::{BinaryOp, DType, MAX_DIMS, MAX_SRC, Op};

    use super::{BUFFER_BYTES, BUFFERS, frame, tensor};
    use crate::wire::{Request, WireGraph, WireTensor};

    /// I32 indices written into the buffers for GET_ROWS and SET_ROWS to read.
    const IDS: [i32; 9] = [0, 1, 3, 7, 8, -1, i32::MIN, i32::MAX, 1 << 20];
    /// Dimensions an empty neighbour could hide, and broadcast targets.
    const HUGE_DIMS: [usize; 8] = [100, 1 << 12, 1 << 20, 1 << 31, 1 << 32, 1 << 60, usize::MAX / 2, usize::MAX];
    /// Strides that are no strides.
    const BAD_STRIDES: [usize; 6] = [0, 1, 3, 1 << 40, usize::MAX / 2, usize::MAX - 3];
    /// Buffer handles a client was never given (0, the next one, far ones).
    const BAD_HANDLES: [u64; 5] = [0, 3, 4, 1 << 32, u64::MAX];
    /// Offsets at, near and past the end of a buffer.
    const BAD_OFFSETS: [u64; 6] =
        [BUFFER_BYTES as u64 - 4, BUFFER_BYTES as u64, BUFFER_BYTES as u64 + 64, 1 << 40, u64::MAX - 3, u64::MAX];

    /// Pokes, the graph as a compute (or an op query), a read; a graph twice
    /// now and then (the second time over a buffer the input may have freed).
    pub(super) fn frames(data: &[u8]) -> Vec<Vec<u8>> {
        let mut u = Unstructured::new(data);
        let mut frames = Vec::new();
        let _ = build(&mut u, &mut frames);
        frames
    }

    fn build(u: &mut Unstructured<'_>, frames: &mut Vec<Vec<u8>>) -> ArbResult<()> {
        // Indices written first, where the gadgets' index tensors will lie.
        let ids_at = u.int_in_range(0..=(BUFFER_BYTES / 64 - 1) as u64)? * 64;
        let n_ids = u.int_in_range(1..=8usize)?;
        let ids: Vec<u8> = (0..n_ids)
            .map(|_| Ok(IDS[u.choose_index(IDS.len())?]))
            .collect::<ArbResult<Vec<i32>>>()?
            .iter()
            .flat_map(|i| i.to_le_bytes())
            .collect();
        frames.push(frame(&Request::WriteBuffer { buffer: BUFFERS[0], offset: ids_at, len: ids.len() as u64 }, &ids));
        let mut tensors = gadget(u, ids_at, n_ids)?;
        let start = tensors.len();
        for i in start..start + u.int_in_range(0..=10usize)? {
            let mut t = tensor(u, i)?;
            bend(u, &mut t, i)?;
            tensors.push(t);
        }
        // Bend a gadget's tensors too, now and then.
        for i in 0..start {
            if u.int_in_range(0u8..=3)? == 3 {
                bend(u, &mut tensors[i], i)?;
            }
        }
        let buffers_freed = u.int_in_range(0u8..=7)? == 7;
        if buffers_freed {
            frames.push(frame(&Request::FreeBuffer { buffer: BUFFERS[1] }, &[]));
        }
        if u.int_in_range(0u8..=7)? == 7 {
            let size = *u.choose(&[0u64, 1, BUFFER_BYTES as u64, 1 << 40, u64::MAX])?;
            frames.push(frame(&Request::AllocBuffer { device: *u.choose(&[0, 1, u32::MAX])?, size }, &[]));
        }
        let graph = WireGraph { tensors };
        let query = u.int_in_range(0u8..=7)? == 7;
        let twice = u.int_in_range(0u8..=3)? == 3;
        let request = if query {
            Request::SupportsOp { device: 0, graph: graph.clone() }
        } else {
            Request::GraphCompute { device: *u.choose(&[0, 0, 0, 1, u32::MAX])?, graph: graph.clone() }
        };
        frames.push(frame(&request, &[]));
        if twice {
            frames.push(frame(&Request::FreeBuffer { buffer: BUFFERS[0] }, &[]));
            frames.push(frame(&Request::GraphCompute { device: 0, graph }, &[]));
        }
        let read = Request::ReadBuffer { buffer: BUFFERS[0], offset: 0, len: BUFFER_BYTES as u64 };
        frames.push(frame(&read, &[]));
        Ok(())
    }

    fn located<'a>(dtype: DType, ne: [usize; MAX_DIMS], op: Op, srcs: &[u32], at: (u64, u64)) -> WireTensor<'a> {
        super::wire_tensor(dtype, ne, op, srcs, at, "hostile")
    }

    /// A few tensors of one shape careless code gets wrong, well formed
    /// apart from their sizes and indices.
    fn gadget<'a>(u: &mut Unstructured<'_>, ids_at: u64, n_ids: usize) -> ArbResult<Vec<WireTensor<'a>>> {
        let [b1, b2] = BUFFERS;
        let rows = *u.choose(&[4usize, 8, 0])?;
        let width = *u.choose(&[8usize, 1, 0])?;
        let ids = located(DType::I32, [n_ids, 1, 1, 1], Op::None, &[], (b1, ids_at));
        Ok(match u.int_in_range(0u8..=5)? {
            // (The expert and state gadgets hang under 0, so that inputs choosing 1..=5 keep their meaning.)
            0 => expert_or_state_gadget(u, ids, rows, width, n_ids)?,
            1 => vec![
                // GET_ROWS of a table by the poked indices.
                located(DType::F32, [width, rows, 1, 1], Op::None, &[], (b2, 0)),
                ids,
                located(DType::F32, [width, n_ids, 1, 1], Op::GetRows, &[0, 1], (b2, 8192)),
            ],
            2 => vec![
                // SET_ROWS of rows into a destination at the poked indices.
                located(DType::F32, [width, n_ids, 1, 1], Op::None, &[], (b2, 0)),
                ids,
                located(DType::F32, [width, rows, 1, 1], Op::SetRows, &[0, 1], (b2, 8192)),
            ],
            3 => {
                // A row sum (or mean, or soft max) over an empty tensor of many rows.
                let huge = HUGE_DIMS[u.choose_index(HUGE_DIMS.len())?];
                let mut empty = located(DType::F32, [0, huge, 1, 1], Op::None, &[], (b1, 0));
                empty.nb = [4, 0, 0, 0];
                let op =
                    *u.choose(&[Op::SumRows, Op::Mean, Op::Sum, Op::SoftMax { scale: 1.0, max_bias: 0.0 }, Op::Cont])?;
                vec![empty, located(DType::F32, [1, huge, 1, 1], op, &[0], (b2, 0))]
            }
            4 => {
                // A product broadcast over batch dimensions, one of them large.
                let big = HUGE_DIMS[u.choose_index(4)?];
                vec![
                    located(DType::F32, [8, 4, 1, 1], Op::None, &[], (b1, 0)),
                    located(DType::F32, [8, 2, big, 1], Op::None, &[], (b1, 256)),
                    located(DType::F32, [4, 2, big, 1], Op::MulMat, &[0, 1], (b2, 0)),
                ]
            }
            _ => {
                // One element repeated (or added) over a large shape.
                let big = HUGE_DIMS[u.choose_index(4)?];
                let op = *u.choose(&[Op::Repeat, Op::Binary(BinaryOp::Add), Op::Concat { dim: 1 }])?;
                vec![
                    located(DType::F32, [1, 1, 1, 1], Op::None, &[], (b1, 0)),
                    located(DType::F32, [big, 2, 1, 1], Op::None, &[], (b1, 0)),
                    located(DType::F32, [big, 2, 1, 1], op, &[1, 0], (b2, 0)),
                ]
            }
        })
    }

    /// Nothing, or an op whose expert or state ids the input poked: MUL_MAT_ID
    /// over `rows` experts, ADD_ID over `rows` bias rows, SSM_SCAN over
    /// `rows` cached states (one sequence per index).
    fn expert_or_state_gadget<'a>(
        u: &mut Unstructured<'_>,
        ids: WireTensor<'a>,
        rows: usize,
        width: usize,
        n_ids: usize,
    ) -> ArbResult<Vec<WireTensor<'a>>> {
        let b2 = BUFFERS[1];
        let f = DType::F32;
        Ok(match u.int_in_range(0u8..=3)? {
            0 => vec![],
            1 => vec![
                located(f, [width, 4, rows, 1], Op::None, &[], (b2, 0)),
                located(f, [width, n_ids, 1, 1], Op::None, &[], (b2, 4096)),
                ids,
                located(f, [4, n_ids, 1, 1], Op::MulMatId, &[0, 1, 2], (b2, 8192)),
            ],
            2 => vec![
                located(f, [width, n_ids, 1, 1], Op::None, &[], (b2, 0)),
                located(f, [width, rows, 1, 1], Op::None, &[], (b2, 4096)),
                ids,
                located(f, [width, n_ids, 1, 1], Op::AddId, &[0, 1, 2], (b2, 8192)),
            ],
            _ => {
                // Mamba-2 shaped, d_state 2, one head of one channel, one token per sequence.
                let ids = WireTensor { ne: [n_ids, 1, 1, 1], ..ids };
                vec![
                    located(f, [2, 1, 1, rows], Op::None, &[], (b2, 0)),
                    located(f, [1, 1, 1, n_ids], Op::None, &[], (b2, 1024)),
                    located(f, [1, 1, n_ids, 1], Op::None, &[], (b2, 2048)),
                    located(f, [1, 1, 1, 1], Op::None, &[], (b2, 3072)),
                    located(f, [2, 1, 1, n_ids], Op::None, &[], (b2, 4096)),
                    located(f, [2, 1, 1, n_ids], Op::None, &[], (b2, 5120)),
                    ids,
                    located(f, [3 * n_ids, 1, 1, 1], Op::SsmScan { states: 1 }, &[0, 1, 2, 3, 4, 5, 6], (b2, 8192)),
                ]
            }
        })
    }

    /// Bends tensor `index`: its dimensions, strides, sources, buffer or offset.
    fn bend(u: &mut Unstructured<'_>, t: &mut WireTensor<'_>, index: usize) -> ArbResult<()> {
        match u.int_in_range(0u8..=7)? {
            0 => {
                // Empty beside huge.
                let (z, h) = (u.choose_index(MAX_DIMS)?, u.choose_index(MAX_DIMS)?);
                t.ne[h] = HUGE_DIMS[u.choose_index(HUGE_DIMS.len())?];
                t.ne[z] = 0;
            }
            1 => t.ne = [0; MAX_DIMS],
            2 => {
                let d = u.choose_index(MAX_DIMS)?;
                t.ne[d] = HUGE_DIMS[u.choose_index(HUGE_DIMS.len())?];
            }
            _ => {}
        }
        match u.int_in_range(0u8..=7)? {
            0 => t.nb = [0; MAX_DIMS],
            1 => {
                let d = u.choose_index(MAX_DIMS)?;
                t.nb[d] = BAD_STRIDES[u.choose_index(BAD_STRIDES.len())?];
            }
            2 => t.view = true,
            _ => {}
        }
        if u.int_in_range(0u8..=3)? == 3 {
            let s = u.choose_index(MAX_SRC)?;
            t.srcs[s] = Some(*u.choose(&[index as u32, index as u32 + 1, index as u32 + 64, u32::MAX])?);
            t.computed = t.computed || u.arbitrary()?;
        }
        match u.int_in_range(0u8..=7)? {
            0 => {
                if let Some(l) = &mut t.location {
                    l.buffer = BAD_HANDLES[u.choose_index(BAD_HANDLES.len())?];
                }
            }
            1 => {
                if let Some(l) = &mut t.location {
                    l.offset = BAD_OFFSETS[u.choose_index(BAD_OFFSETS.len())?];
                }
            }
            2 => t.location = None,
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_are_valid_conversations() {
        for (name, data) in seed_inputs() {
            let mut s = session().unwrap();
            for f in raw_frames(&data[1..]) {
                let out = s.handle_frame(&f);
                let (r, _) = response(&out).unwrap();
                assert!(!matches!(r, Response::Error(_)), "seed {name}: {r:?}");
            }
            run(&data).unwrap();
        }
    }

    /// The hostile form reaches the expert and state gadgets: some random
    /// inputs compute a MUL_MAT_ID, an ADD_ID and an SSM_SCAN over poked ids.
    #[test]
    fn hostile_inputs_reach_the_id_reading_ops() {
        let mut rng = gantry_engine::SplitMix64::new(11);
        let mut seen = [0usize; 3];
        for _ in 0..3000 {
            let data: Vec<u8> = (0..64).map(|_| rng.next_u64() as u8).collect();
            for f in hostile::frames(&data) {
                let Some((len, rest)) = f.split_first_chunk::<4>() else { continue };
                let message = &rest[..(u32::from_le_bytes(*len) as usize).min(rest.len())];
                let Ok(Request::GraphCompute { graph, .. }) = Request::decode(message, &fuzz_limits()) else {
                    continue;
                };
                for t in &graph.tensors {
                    match t.op {
                        Op::MulMatId => seen[0] += 1,
                        Op::AddId => seen[1] += 1,
                        Op::SsmScan { .. } => seen[2] += 1,
                        _ => {}
                    }
                }
            }
            run(&[&[3u8][..], &data].concat()).unwrap();
        }
        assert!(seen.iter().all(|&n| n > 0), "MUL_MAT_ID, ADD_ID, SSM_SCAN computed {seen:?} times");
    }

    #[test]
    fn inputs_of_every_kind_keep_the_server_serving() {
        let mut rng = gantry_engine::SplitMix64::new(5);
        for len in [0usize, 1, 7, 64, 300, 2000] {
            for mode in [0u8, 1, 3] {
                let mut data = vec![mode];
                data.extend((0..len).map(|_| rng.next_u64() as u8));
                run(&data).unwrap();
            }
        }
    }
}
