//! The small ops' planner on wgpu: what it leaves to the CPU on purpose.

use super::support::Harness;
use gantry_engine::DType;

/// SET's kernel finds an element's place in the view dim by dim from the
/// top, which needs nested strides: an interleaved view (dim 2 stepping
/// inside dim 1's rows, without overlap, so the CPU takes it) is refused
/// with its reason, and a nested one of the same shape is planned.
#[test]
fn set_with_interleaved_view_strides_is_left_to_the_cpu() {
    let dev = device_or_skip!();
    let mut h = Harness::new(dev);
    let a = h.input(DType::F32, &[8, 2], &[0.0; 16]);
    let v = h.input(DType::F32, &[2, 2, 2], &[1.0; 8]);
    // Element offsets i0 + 4·i1 + 2·i2: 0, 1, 4, 5, 2, 3, 6, 7.
    let interleaved = h.ctx.set(a, v, [16, 8, 64], 0).unwrap();
    let reason = dev.unsupported_reason(&h.ctx, interleaved).expect("refused");
    assert!(reason.contains("not nested"), "{reason}");
    let nested = h.ctx.set(a, v, [8, 16, 64], 0).unwrap();
    assert_eq!(dev.unsupported_reason(&h.ctx, nested), None);
}
