//! Copies between backends (ggml's `ggml_backend_tensor_copy_async`): the
//! destination backend's own asynchronous copy where it has one, else both
//! backends are synchronized and the bytes copied on the host, which is
//! what an asynchronous copy would have done once both streams were done.

use gantry_arenas::TensorId;

use crate::{Backend, Context, Result};

/// Copies `src` (written by `src_backend`) into `dst` (in `dst_backend`'s
/// memory) as a queued operation of `dst_backend`: through its
/// [`Backend::cpy_tensor_async`] when it can, else after synchronizing both
/// backends. Layouts must match ([`Context::copy_tensor`]); an error names
/// the tensors.
pub fn tensor_copy_async(
    ctx: &Context,
    src_backend: &dyn Backend,
    dst_backend: &dyn Backend,
    src: TensorId,
    dst: TensorId,
) -> Result<()> {
    tensor_copy_async_with(ctx, src_backend, dst_backend, src, dst, &|| dst_backend.synchronize())
}

/// [`tensor_copy_async`] with the caller's way of waiting for the
/// destination before a host copy (`wait_dst`): the scheduler waits only
/// until its backend is done with the copy slot being overwritten.
pub fn tensor_copy_async_with(
    ctx: &Context,
    src_backend: &dyn Backend,
    dst_backend: &dyn Backend,
    src: TensorId,
    dst: TensorId,
    wait_dst: &dyn Fn() -> Result<()>,
) -> Result<()> {
    if src == dst {
        return Ok(());
    }
    copy_or_fallback(
        || dst_backend.cpy_tensor_async(src_backend, ctx, src, dst),
        || src_backend.synchronize(),
        wait_dst,
        || ctx.copy_tensor(src, dst),
    )
}

/// The protocol of [`tensor_copy_async`] over its steps (generic, so the
/// loom model of the scheduler's pipeline runs this code): `stream_copy`
/// queues the copy and says whether it could; when it could not, the
/// source is synchronized, the destination waited for, and the host copies.
pub fn copy_or_fallback(
    stream_copy: impl FnOnce() -> Result<bool>,
    sync_source: impl FnOnce() -> Result<()>,
    wait_dst: &dyn Fn() -> Result<()>,
    host_copy: impl FnOnce() -> Result<()>,
) -> Result<()> {
    if stream_copy()? {
        return Ok(());
    }
    sync_source()?;
    wait_dst()?;
    host_copy()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::any::Any;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::testing::TestBufferType;
    use crate::testing::mock_devices::cpu;
    use crate::{BufferUsage, ComputeStatus, DType, Device, EventId, Graph};

    /// A backend that counts synchronizations and may copy by itself.
    struct Counting {
        inner: Arc<dyn Backend>,
        copies_itself: bool,
        syncs: AtomicUsize,
        own_copies: AtomicUsize,
    }

    impl Backend for Counting {
        fn name(&self) -> &str {
            "counting"
        }
        fn device(&self) -> &dyn Device {
            self.inner.device()
        }
        fn graph_compute(&self, _: &Context, _: Graph<'_>) -> ComputeStatus {
            ComputeStatus::Success
        }
        fn synchronize(&self) -> Result<()> {
            self.syncs.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
        fn cpy_tensor_async(&self, _: &dyn Backend, ctx: &Context, src: TensorId, dst: TensorId) -> Result<bool> {
            if self.copies_itself {
                self.own_copies.fetch_add(1, Ordering::Relaxed);
                ctx.copy_tensor(src, dst)?;
            }
            Ok(self.copies_itself)
        }
        fn event_record(&self, _: EventId) -> Result<()> {
            Ok(())
        }
        fn event_wait(&self, _: EventId) -> Result<()> {
            Ok(())
        }
        fn as_any(&self) -> &dyn Any {
            self
        }
    }

    fn counting(copies_itself: bool) -> Counting {
        Counting { inner: cpu(), copies_itself, syncs: AtomicUsize::new(0), own_copies: AtomicUsize::new(0) }
    }

    #[test]
    fn the_destination_copies_itself_or_both_are_synchronized_first() {
        let mut ctx = Context::new();
        let a = ctx.tensor(DType::F32, [2]).unwrap();
        let b = ctx.tensor(DType::F32, [2]).unwrap();
        let c = ctx.tensor(DType::F32, [3]).unwrap();
        ctx.set_name(c, "longer").unwrap();
        ctx.alloc_tensors(&[a, b, c], &TestBufferType::host("test", 8).shared(), BufferUsage::Any).unwrap();
        ctx.set_f32(a, &[1.0, 2.0]).unwrap();
        let (src, dst) = (counting(false), counting(true));
        tensor_copy_async(&ctx, &src, &dst, a, b).unwrap();
        assert_eq!(ctx.read_f32(b).unwrap(), [1.0, 2.0]);
        assert_eq!((dst.own_copies.load(Ordering::Relaxed), src.syncs.load(Ordering::Relaxed)), (1, 0));

        ctx.set_f32(a, &[3.0, 4.0]).unwrap();
        let (src, dst) = (counting(false), counting(false));
        tensor_copy_async(&ctx, &src, &dst, a, b).unwrap();
        assert_eq!(ctx.read_f32(b).unwrap(), [3.0, 4.0]);
        assert_eq!((src.syncs.load(Ordering::Relaxed), dst.syncs.load(Ordering::Relaxed)), (1, 1));

        let err = tensor_copy_async(&ctx, &src, &dst, a, c).unwrap_err().to_string();
        assert!(err.contains("'longer'"), "{err}");
        tensor_copy_async(&ctx, &src, &dst, a, a).unwrap();
        assert_eq!(src.syncs.load(Ordering::Relaxed), 2, "a tensor copied onto itself costs nothing");
    }
}
