//! The engine's read that does not block (`TensorRead`) of a CPU tensor:
//! the default path, with no staging — the tensor is readable from host
//! memory once its compute has finished, so submit does nothing, poll
//! answers at once, and take reads through the context (all of it, or its
//! first bytes); misuse is an error.

use gantry_cpu::{self as cpu, CpuBackend};
use gantry_engine::{Backend, BufferUsage, Context, DType, GraphArena, TensorRead};

#[test]
fn a_cpu_tensor_is_read_from_host_memory_without_staging() {
    let backend = CpuBackend::with_threads(2).unwrap();
    let mut ctx = Context::new();
    let x = ctx.tensor(DType::F32, [6]).unwrap();
    let y = ctx.scale(x, 2.0, 1.0).unwrap();
    ctx.alloc_tensors(&[x, y], &cpu::buffer_type(), BufferUsage::Compute).unwrap();
    ctx.set_f32(x, &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
    let arena = GraphArena::new();
    let graph = ctx.build_graph(&arena, &[y]).unwrap();

    let mut read = TensorRead::new();
    let err = read.submit().unwrap_err().to_string();
    assert!(err.contains("no async read was begun"), "{err}");
    for round in 0..3 {
        assert!(backend.graph_compute_async(&ctx, graph).is_success());
        assert!(!read.begin(&ctx, y).unwrap(), "host memory: not staged");
        assert!(!read.is_staged() && !read.is_prepared());
        assert_eq!((read.tensor(), read.len()), (Some(y), 24));
        backend.synchronize().unwrap();
        read.submit().unwrap();
        assert!(read.poll().unwrap(), "round {round}: readable at once");
        read.wait().unwrap();
        let mut got = [0f32; 6];
        read.take_f32(&ctx, &mut got).unwrap();
        assert_eq!(got, [1.0, 3.0, 5.0, 7.0, 9.0, 11.0], "round {round}");
        assert!(read.staged().is_none(), "nothing staged, nothing kept");
    }

    // The first values only; a take longer than the tensor, or a second one, is refused.
    read.begin(&ctx, y).unwrap();
    let err = read.take_f32(&ctx, &mut [0f32; 7]).unwrap_err().to_string();
    assert!(err.contains("holds 24 bytes"), "{err}");
    let mut two = [0f32; 2];
    read.take_f32(&ctx, &mut two).unwrap();
    assert_eq!(two, [1.0, 3.0]);
    let err = read.take_f32(&ctx, &mut two).unwrap_err().to_string();
    assert!(err.contains("no async read was begun"), "{err}");

    // A tensor with no memory is an error naming it; a discarded read cannot be taken.
    let loose = ctx.tensor(DType::F32, [2]).unwrap();
    assert!(read.begin(&ctx, loose).is_err());
    read.begin(&ctx, y).unwrap();
    read.discard().unwrap();
    assert!(read.poll().is_err());
}
