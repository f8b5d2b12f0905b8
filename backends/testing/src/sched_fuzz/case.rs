//! One fuzz case: a small program of ops over `[k, n]` activations, the
//! devices it runs on (which ops each test GPU supports, whose memory it
//! uses), where weights and pre-allocated tensors live, pins, pipeline
//! copies, and how the scheduler is driven over a few runs.
//!
//! Decoded from bytes with `arbitrary`: every byte string is a valid case
//! (choices are taken modulo what exists), so the fuzzer never wastes
//! inputs on decoding errors.

use arbitrary::{Arbitrary, Result, Unstructured};

/// Most test GPUs in one case (the CPU comes last, always).
pub const MAX_GPUS: usize = 3;

/// Rows of every pre-allocated destination (a tiny KV cache).
pub const DST_ROWS: usize = 4;

/// What a test GPU's memory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuMemory {
    /// A buffer type of its own, not host memory.
    Own,
    /// The previous GPU's buffer type (two backends sharing one); the first GPU gets its own.
    SharePrevious,
    /// The CPU's buffer type (an accelerator over host memory, like a BLAS backend).
    Host,
}

/// One test GPU.
#[derive(Debug, Clone, Copy)]
pub struct GpuSpec {
    /// Bit `c` set when it computes op class `c` (see [`OpClass`]).
    pub supports: u32,
    /// Its memory.
    pub memory: GpuMemory,
}

/// The op classes a program uses; a test GPU supports an arbitrary subset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum OpClass {
    /// ADD.
    Add,
    /// SUB.
    Sub,
    /// MUL.
    Mul,
    /// SCALE.
    Scale,
    /// Unary SILU.
    Silu,
    /// Unary GELU.
    Gelu,
    /// Unary NEG.
    Neg,
    /// Unary TANH.
    Tanh,
    /// Unary RELU.
    Relu,
    /// RMS_NORM.
    RmsNorm,
    /// NORM.
    Norm,
    /// SOFT_MAX.
    SoftMax,
    /// MUL_MAT.
    MulMat,
    /// CONT.
    Cont,
    /// DUP.
    Dup,
    /// CPY.
    Cpy,
    /// CONCAT.
    Concat,
    /// GET_ROWS.
    GetRows,
    /// SET_ROWS.
    SetRows,
    /// ROPE.
    Rope,
}

/// Number of op classes.
pub const N_OP_CLASSES: u32 = 20;

/// The shape of a weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightShape {
    /// `[k, k]`: multiplied with activations.
    Square,
    /// `[k]`: broadcast over rows (and rope frequency factors).
    Row,
    /// `[k, DST_ROWS]`: an embedding table read with GET_ROWS.
    Table,
}

/// One weight tensor.
#[derive(Debug, Clone, Copy)]
pub struct WeightSpec {
    /// Its shape.
    pub shape: WeightShape,
    /// F16 instead of F32 (square and table weights only).
    pub f16: bool,
    /// The backend whose buffer type holds it (modulo the number of backends; the CPU is last).
    pub home: u8,
}

/// One pre-allocated destination `[k, DST_ROWS]` written by CPY and SET_ROWS
/// (a KV cache: `BufferUsage::Any`, kept between runs).
#[derive(Debug, Clone, Copy)]
pub struct DstSpec {
    /// F16 instead of F32.
    pub f16: bool,
    /// The backend whose buffer type holds it.
    pub home: u8,
}

/// One instruction. Operands are indices into the values made so far (and
/// into the weights or destinations of the right kind), taken modulo their
/// number; an instruction whose operands do not exist is skipped.
#[derive(Debug, Clone, Copy)]
#[expect(missing_docs, reason = "fields are operand indices and flags, described once per variant")]
pub enum Instr {
    /// `a (op) b`; op 0 ADD, 1 SUB, 2 MUL.
    Binary { op: u8, a: u8, b: u8, inplace: bool },
    /// `a (op) w` with a row weight broadcast over `a`'s rows.
    BinaryRow { op: u8, a: u8, w: u8, inplace: bool },
    /// An element-wise function; op 0 SILU, 1 GELU, 2 NEG, 3 TANH, 4 RELU.
    Unary { op: u8, a: u8, inplace: bool },
    /// `a * s + b` with a small constant pair picked by `s`.
    Scale { a: u8, s: u8, inplace: bool },
    /// RMS_NORM (in place allowed) or NORM.
    Norm { rms: bool, a: u8, inplace: bool },
    /// SOFT_MAX with an optional mask (another value).
    SoftMax { a: u8, mask: Option<u8>, inplace: bool },
    /// `w^T a` with a square weight.
    MulMat { w: u8, a: u8 },
    /// `cont(transpose(a))` reshaped back to `[k, n]`: a view, a copy and a reshape.
    Transpose { a: u8 },
    /// The first part of `a` and the rest of `b` (views with offsets), joined
    /// along rows (`rows`, when `n > 1`) or along the row length.
    Concat { a: u8, b: u8, rows: bool },
    /// CONT of `a`.
    Cont { a: u8 },
    /// DUP of `a`.
    Dup { a: u8 },
    /// Copies `a` into rows `row0..row0 + n` of a destination.
    Cpy { a: u8, dst: u8, row0: u8 },
    /// Embedding rows of a table weight picked by the index input.
    GetRows { w: u8 },
    /// Writes the rows of `a` into a destination at the index input.
    SetRows { a: u8, dst: u8 },
    /// Rotary embedding of `a` (one head of `k`) at the index input's positions,
    /// with a row weight as frequency factors when `ff` names one.
    Rope { a: u8, ff: Option<u8>, inplace: bool },
    /// Marks value `a` as a graph output (compared with the reference).
    Output { a: u8 },
}

/// How one run drives the scheduler.
#[derive(Debug, Clone, Copy)]
pub struct RunSpec {
    /// Calls `reset` before `alloc_graph`.
    pub reset_first: bool,
    /// Calls `reserve` with the graph before `alloc_graph`.
    pub reserve_first: bool,
    /// Builds the graph again into a new arena (same tensors).
    pub rebuild_graph: bool,
    /// `graph_compute_async` + `synchronize` instead of `graph_compute`.
    pub compute_async: bool,
    /// Changes the number of pipeline copies first (1 to 4) when set.
    pub set_n_copies: Option<u8>,
    /// Installs an eval callback that wants node `i` when bit `i % 8` is set
    /// (and checks each node handed over against the reference); 0: none.
    pub observe: u8,
    /// With a callback: stop the compute at the `stop_after`-th node handed over.
    pub stop_after: Option<u8>,
    /// Seed of this run's input values.
    pub input_seed: u8,
}

/// A whole case.
#[derive(Debug, Clone)]
pub struct SchedCase {
    /// Row length of activations (4, 8, 16 or 32).
    pub k: usize,
    /// Rows of activations (1 to 4, at most `DST_ROWS`).
    pub n: usize,
    /// Test GPUs, in priority order (1 to 3); the CPU follows.
    pub gpus: Vec<GpuSpec>,
    /// Activation inputs (1 or 2), besides the I32 index input.
    pub n_inputs: usize,
    /// Weights (1 to 4).
    pub weights: Vec<WeightSpec>,
    /// Pre-allocated destinations (0 to 2).
    pub dsts: Vec<DstSpec>,
    /// Pipeline copies (1 to 4).
    pub n_copies: usize,
    /// Inputs one split may copy in (4 to 8, or the default 30).
    pub max_split_inputs: usize,
    /// Op offload to higher-priority backends.
    pub op_offload: bool,
    /// Pins: (value index, backend index), both taken modulo what exists.
    pub pins: Vec<(u8, u8)>,
    /// Runs (1 to 3).
    pub runs: Vec<RunSpec>,
    /// Seed of weights and destination contents.
    pub seed: u64,
    /// The program (1 to 24 instructions).
    pub program: Vec<Instr>,
}

fn opt<'a, T>(u: &mut Unstructured<'a>, f: impl FnOnce(&mut Unstructured<'a>) -> Result<T>) -> Result<Option<T>> {
    Ok(if u.arbitrary::<bool>()? { Some(f(u)?) } else { None })
}

impl<'a> Arbitrary<'a> for GpuSpec {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        // Mostly GPUs that support a lot, so that splits are long and varied.
        let mut supports = u32::MAX;
        for _ in 0..u.int_in_range(0..=3)? {
            supports &= u.arbitrary::<u32>()?;
        }
        let memory = match u.int_in_range(0..=5)? {
            0 => GpuMemory::SharePrevious,
            1 => GpuMemory::Host,
            _ => GpuMemory::Own,
        };
        Ok(Self { supports: supports & ((1 << N_OP_CLASSES) - 1), memory })
    }
}

impl<'a> Arbitrary<'a> for WeightSpec {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let shape = *u.choose(&[WeightShape::Square, WeightShape::Square, WeightShape::Row, WeightShape::Table])?;
        Ok(Self { shape, f16: shape != WeightShape::Row && u.arbitrary()?, home: u.arbitrary()? })
    }
}

impl<'a> Arbitrary<'a> for DstSpec {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(Self { f16: u.arbitrary()?, home: u.arbitrary()? })
    }
}

impl<'a> Arbitrary<'a> for Instr {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let v = |u: &mut Unstructured<'a>| u.arbitrary::<u8>();
        Ok(match u.int_in_range(0..=17)? {
            0 | 1 => Instr::Binary { op: u.int_in_range(0..=2)?, a: v(u)?, b: v(u)?, inplace: u.arbitrary()? },
            2 => Instr::BinaryRow { op: u.int_in_range(0..=2)?, a: v(u)?, w: v(u)?, inplace: u.arbitrary()? },
            3 | 4 => Instr::Unary { op: u.int_in_range(0..=4)?, a: v(u)?, inplace: u.arbitrary()? },
            5 => Instr::Scale { a: v(u)?, s: v(u)?, inplace: u.arbitrary()? },
            6 => Instr::Norm { rms: u.arbitrary()?, a: v(u)?, inplace: u.arbitrary()? },
            7 => Instr::SoftMax { a: v(u)?, mask: opt(u, v)?, inplace: u.arbitrary()? },
            8 | 9 => Instr::MulMat { w: v(u)?, a: v(u)? },
            10 => Instr::Transpose { a: v(u)? },
            11 => Instr::Concat { a: v(u)?, b: v(u)?, rows: u.arbitrary()? },
            12 => {
                if u.arbitrary()? {
                    Instr::Cont { a: v(u)? }
                } else {
                    Instr::Dup { a: v(u)? }
                }
            }
            13 => Instr::Cpy { a: v(u)?, dst: v(u)?, row0: v(u)? },
            14 => Instr::GetRows { w: v(u)? },
            15 => Instr::SetRows { a: v(u)?, dst: v(u)? },
            16 => Instr::Rope { a: v(u)?, ff: opt(u, v)?, inplace: u.arbitrary()? },
            _ => Instr::Output { a: v(u)? },
        })
    }
}

impl<'a> Arbitrary<'a> for RunSpec {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let observe = if u.ratio(1, 3)? { u.arbitrary::<u8>()? | 1 } else { 0 };
        Ok(Self {
            reset_first: u.arbitrary()?,
            reserve_first: u.ratio(1, 4)?,
            rebuild_graph: u.arbitrary()?,
            compute_async: u.arbitrary()?,
            set_n_copies: if u.ratio(1, 6)? { Some(u.int_in_range(1..=4)?) } else { None },
            observe,
            stop_after: if observe != 0 && u.ratio(1, 4)? { Some(u.arbitrary()?) } else { None },
            input_seed: u.arbitrary()?,
        })
    }
}

impl<'a> Arbitrary<'a> for SchedCase {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let k = *u.choose(&[4, 8, 16, 32])?;
        let n = u.int_in_range(1..=DST_ROWS)?;
        let n_gpus = u.int_in_range(1..=MAX_GPUS)?;
        let gpus = (0..n_gpus).map(|_| u.arbitrary()).collect::<Result<Vec<GpuSpec>>>()?;
        let n_inputs = u.int_in_range(1..=2)?;
        let n_weights = u.int_in_range(1..=4)?;
        let weights = (0..n_weights).map(|_| u.arbitrary()).collect::<Result<Vec<WeightSpec>>>()?;
        let n_dsts = u.int_in_range(0..=2)?;
        let dsts = (0..n_dsts).map(|_| u.arbitrary()).collect::<Result<Vec<DstSpec>>>()?;
        let n_copies = u.int_in_range(1..=4)?;
        // At least one node's sources: the scheduler refuses fewer. The byte
        // is read from the range it had when MAX_SRC was 5, so kept inputs
        // decode as they did then.
        let max_split_inputs =
            if u.arbitrary()? { 30 } else { u.int_in_range(5..=8usize)?.max(gantry_engine::MAX_SRC) };
        let op_offload = u.arbitrary()?;
        let n_pins = u.int_in_range(0..=4)?;
        let pins = (0..n_pins).map(|_| Ok((u.arbitrary()?, u.arbitrary()?))).collect::<Result<Vec<_>>>()?;
        let n_runs = u.int_in_range(1..=3)?;
        let runs = (0..n_runs).map(|_| u.arbitrary()).collect::<Result<Vec<RunSpec>>>()?;
        let seed = u.arbitrary()?;
        let mut program = Vec::new();
        while program.len() < 24 && !u.is_empty() {
            program.push(u.arbitrary()?);
        }
        if program.is_empty() {
            program.push(Instr::Unary { op: 0, a: 0, inplace: false });
        }
        Ok(Self {
            k,
            n,
            gpus,
            n_inputs,
            weights,
            dsts,
            n_copies,
            max_split_inputs,
            op_offload,
            pins,
            runs,
            seed,
            program,
        })
    }
}
