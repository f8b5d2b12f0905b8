//! The devices of a case: test GPUs with arbitrary op support and memory,
//! then the CPU, each backend wrapped in a [`CheckedBackend`].

use std::sync::Arc;

use gantry_engine::{Backend, BinaryOp, BufferType, Device, DeviceType, Op, TensorDesc, UnaryOp};

use super::case::{GpuMemory, OpClass, SchedCase};
use super::checked_backend::{CheckedBackend, SharedJournal};
use crate::{SupportFn, TestGpuDevice};
use gantry_cpu::{self as cpu, CpuBackend};

/// The op class of a node (`None` for ops no program makes, which no test
/// GPU supports).
pub fn op_class(d: &TensorDesc) -> Option<OpClass> {
    Some(match d.op {
        Op::Binary(BinaryOp::Add) => OpClass::Add,
        Op::Binary(BinaryOp::Sub) => OpClass::Sub,
        Op::Binary(BinaryOp::Mul) => OpClass::Mul,
        Op::Scale { .. } => OpClass::Scale,
        Op::Unary(UnaryOp::Silu) => OpClass::Silu,
        Op::Unary(UnaryOp::Gelu) => OpClass::Gelu,
        Op::Unary(UnaryOp::Neg) => OpClass::Neg,
        Op::Unary(UnaryOp::Tanh) => OpClass::Tanh,
        Op::Unary(UnaryOp::Relu) => OpClass::Relu,
        Op::RmsNorm { .. } => OpClass::RmsNorm,
        Op::Norm { .. } => OpClass::Norm,
        Op::SoftMax { .. } => OpClass::SoftMax,
        Op::MulMat => OpClass::MulMat,
        Op::Cont => OpClass::Cont,
        Op::Dup => OpClass::Dup,
        Op::Cpy => OpClass::Cpy,
        Op::Concat { .. } => OpClass::Concat,
        Op::GetRows => OpClass::GetRows,
        Op::SetRows => OpClass::SetRows,
        Op::Rope(_) => OpClass::Rope,
        _ => return None,
    })
}

/// The backends of a case in priority order (GPUs, then the CPU), checked,
/// with the unchecked originals' buffer types.
pub struct CaseDevices {
    /// Checked backends, the CPU last.
    pub backends: Vec<Arc<dyn Backend>>,
    /// Each backend's buffer type (where weights and destinations homed on it live).
    pub bufts: Vec<Arc<dyn BufferType>>,
}

impl CaseDevices {
    /// Makes the case's devices; every backend reports to `journal`.
    pub fn new(case: &SchedCase, journal: &SharedJournal) -> gantry_engine::Result<Self> {
        let mut backends: Vec<Arc<dyn Backend>> = Vec::new();
        let mut bufts: Vec<Arc<dyn BufferType>> = Vec::new();
        for (i, g) in case.gpus.iter().enumerate() {
            let mask = g.supports;
            let supports: SupportFn =
                Arc::new(move |d: &TensorDesc| op_class(d).is_some_and(|c| mask & 1 << c as u32 != 0));
            let name = format!("GPU{i}");
            let device = match (g.memory, bufts.last()) {
                (GpuMemory::SharePrevious, Some(prev)) if !prev.is_host() => {
                    TestGpuDevice::with_buffer_type(&name, supports, prev.clone(), DeviceType::Gpu)
                }
                (GpuMemory::Host, _) => {
                    TestGpuDevice::with_buffer_type(&name, supports, cpu::buffer_type(), DeviceType::Accel)
                }
                _ => TestGpuDevice::new(&name, supports),
            };
            let backend: Arc<dyn Backend> = Arc::new(CheckedBackend::new(device.init_backend(None)?, journal.clone()));
            bufts.push(backend.device().buffer_type());
            backends.push(backend);
        }
        let cpu: Arc<dyn Backend> = Arc::new(CpuBackend::with_threads(1)?);
        bufts.push(cpu.device().buffer_type());
        backends.push(Arc::new(CheckedBackend::new(cpu, journal.clone())));
        Ok(Self { backends, bufts })
    }
}
