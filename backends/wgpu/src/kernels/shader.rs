//! Composing a kernel's WGSL: the prelude (parameters, the five bindings
//! typed for the dtypes of this instance, load/store functions), the
//! kernel's constants (first those it shares with its plan, from
//! `shared_constants`), helper libraries (a dequantizer and what it
//! calls), then its body.
//!
//! Bodies never touch the binding arrays directly: they call
//! `src0_ld(i)` / `dst_st(i, v)` (float values at unit index `i`),
//! `src1_ldi(i)` (i32), `src0_u32(byte)` and friends (quantized bytes), and
//! `src0_at(vec4(i0, i1, i2, i3))` for a unit index from a 4-d position.
//! So one body serves F32, F16 and the packed forms.

use std::fmt::Write;

use super::params::PARAMS_WGSL;
use crate::gpu::STORAGE_SLOTS;

/// How a bound tensor is typed in WGSL and indexed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Store {
    /// Not used by the kernel.
    Unused,
    /// `array<f32>`, indexed by element.
    F32,
    /// `array<f16>` (needs `shader-f16`), indexed by element.
    F16,
    /// F16 as `array<u32>` without `shader-f16`: read only, indexed by element.
    F16Packed,
    /// BF16 as `array<u32>`: read only, indexed by element.
    Bf16,
    /// F16 without `shader-f16`, written: `array<atomic<u32>>`, each
    /// element's half of its word set with `atomicAnd` / `atomicOr` so two
    /// invocations can write the two halves of one word.
    F16Atomic,
    /// BF16 written, as [`Store::F16Atomic`] (rounded to nearest even).
    Bf16Atomic,
    /// `array<i32>`, indexed by element.
    I32,
    /// Quantized blocks as `array<u32>`, indexed by byte.
    Bytes,
    /// Quantized blocks written: `array<atomic<u32>>`, indexed by byte,
    /// written two bytes at a time (`dst_st16`) with `atomicAnd` /
    /// `atomicOr`, as blocks are not 4-byte aligned and neighbours share words.
    BytesAtomic,
}

impl Store {
    /// Bytes per index unit.
    pub const fn unit(self) -> usize {
        match self {
            Store::F32 | Store::I32 => 4,
            Store::F16 | Store::F16Packed | Store::Bf16 | Store::F16Atomic | Store::Bf16Atomic => 2,
            Store::Bytes | Store::BytesAtomic | Store::Unused => 1,
        }
    }

    /// Whether kernels can write this store.
    pub const fn writable(self) -> bool {
        matches!(self, Store::F32 | Store::F16 | Store::I32 | Store::F16Atomic | Store::Bf16Atomic | Store::BytesAtomic)
    }
}

/// Names of the storage slots, in binding order (bindings 1 to 8).
pub const SLOT_NAMES: [&str; STORAGE_SLOTS] = ["dst", "src0", "src1", "src2", "src3", "src4", "src5", "src6"];
const SLOT_OFFSETS: [&str; STORAGE_SLOTS] =
    ["p.offs.x", "p.offs.y", "p.offs.z", "p.offs.w", "p.offs2.x", "p.offs2.y", "p.offs2.z", "p.offs2.w"];

const COMMON: &str = "
fn flat_group(wid: vec3<u32>, nwg: vec3<u32>) -> u32 { return wid.x + nwg.x * (wid.y + nwg.y * wid.z); }
fn unravel(i: u32, ne: vec4<u32>) -> vec4<u32> {
    let i0 = i % ne.x; let r1 = i / ne.x;
    let i1 = r1 % ne.y; let r2 = r1 / ne.y;
    let i2 = r2 % ne.z; let i3 = r2 / ne.z;
    return vec4<u32>(i0, i1, i2, i3);
}
fn n_elements(ne: vec4<u32>) -> u32 { return ne.x * ne.y * ne.z * ne.w; }
// f32 to bf16 bits, rounding to nearest even; NaN stays a (quiet) NaN.
fn bf16_bits(v: f32) -> u32 {
    let b = bitcast<u32>(v);
    if ((b & 0x7fffffffu) > 0x7f800000u) { return (b >> 16u) | 0x40u; }
    return (b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u;
}
";

fn accessors(out: &mut String, slot: usize, store: Store) {
    let n = SLOT_NAMES[slot];
    let off = SLOT_OFFSETS[slot];
    let binding = slot + 1;
    let array = match store {
        Store::Unused => return,
        Store::F32 => "array<f32>",
        Store::F16 => "array<f16>",
        Store::I32 => "array<i32>",
        Store::F16Packed | Store::Bf16 | Store::Bytes => "array<u32>",
        Store::F16Atomic | Store::Bf16Atomic | Store::BytesAtomic => "array<atomic<u32>>",
    };
    let _ = writeln!(out, "@group(0) @binding({binding}) var<storage, read_write> {n}: {array};");
    let _ = writeln!(out, "fn {n}_at(c: vec4<u32>) -> u32 {{ return {off} + dot(c, p.{n}.nb); }}");
    let _ = writeln!(out, "fn {n}_off() -> u32 {{ return {off}; }}");
    match store {
        Store::Unused => {}
        Store::F32 => {
            let _ = writeln!(out, "fn {n}_ld(i: u32) -> f32 {{ return {n}[i]; }}");
            let _ = writeln!(out, "fn {n}_st(i: u32, v: f32) {{ {n}[i] = v; }}");
        }
        Store::F16 => {
            let _ = writeln!(out, "fn {n}_ld(i: u32) -> f32 {{ return f32({n}[i]); }}");
            let _ = writeln!(out, "fn {n}_st(i: u32, v: f32) {{ {n}[i] = f16(v); }}");
        }
        Store::F16Packed => {
            let _ = writeln!(out, "fn {n}_ld(i: u32) -> f32 {{ return unpack2x16float({n}[i >> 1u])[i & 1u]; }}");
        }
        Store::Bf16 => {
            let _ = writeln!(
                out,
                "fn {n}_ld(i: u32) -> f32 {{ return bitcast<f32>((({n}[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu) << 16u); }}"
            );
        }
        Store::F16Atomic | Store::Bf16Atomic => {
            let (bits, unbits) = if store == Store::F16Atomic {
                ("pack2x16float(vec2<f32>(v, 0.0)) & 0xffffu", "unpack2x16float(h).x")
            } else {
                ("bf16_bits(v)", "bitcast<f32>(h << 16u)")
            };
            let _ = writeln!(
                out,
                "fn {n}_st(i: u32, v: f32) {{ let s = (i & 1u) * 16u; let w = i >> 1u; \
                 atomicAnd(&{n}[w], ~(0xffffu << s)); atomicOr(&{n}[w], ({bits}) << s); }}"
            );
            let _ = writeln!(
                out,
                "fn {n}_ld(i: u32) -> f32 {{ let h = (atomicLoad(&{n}[i >> 1u]) >> ((i & 1u) * 16u)) & 0xffffu; return {unbits}; }}"
            );
        }
        Store::BytesAtomic => {
            let _ = writeln!(
                out,
                "fn {n}_st16(b: u32, v: u32) {{ let s = (b & 2u) * 8u; let w = b >> 2u; \
                 atomicAnd(&{n}[w], ~(0xffffu << s)); atomicOr(&{n}[w], (v & 0xffffu) << s); }}"
            );
        }
        Store::I32 => {
            let _ = writeln!(out, "fn {n}_ld(i: u32) -> f32 {{ return f32({n}[i]); }}");
            let _ = writeln!(out, "fn {n}_ldi(i: u32) -> i32 {{ return {n}[i]; }}");
            let _ = writeln!(out, "fn {n}_sti(i: u32, v: i32) {{ {n}[i] = v; }}");
            let _ = writeln!(out, "fn {n}_st(i: u32, v: f32) {{ {n}[i] = i32(v); }}");
        }
        Store::Bytes => {
            // Little-endian loads at byte addresses; u16 loads need an even address.
            let _ = writeln!(out, "fn {n}_u8(b: u32) -> u32 {{ return ({n}[b >> 2u] >> ((b & 3u) * 8u)) & 0xffu; }}");
            let _ =
                writeln!(out, "fn {n}_u16(b: u32) -> u32 {{ return ({n}[b >> 2u] >> ((b & 2u) * 8u)) & 0xffffu; }}");
            let _ = writeln!(
                out,
                "fn {n}_u32(b: u32) -> u32 {{ let w = b >> 2u; let s = (b & 3u) * 8u; \
                 if (s == 0u) {{ return {n}[w]; }} return ({n}[w] >> s) | ({n}[w + 1u] << (32u - s)); }}"
            );
            let _ = writeln!(out, "fn {n}_f16(b: u32) -> f32 {{ return unpack2x16float({n}_u16(b)).x; }}");
        }
    }
}

/// The full source of one kernel instance.
pub fn compose(stores: &[Store; STORAGE_SLOTS], consts: &str, libs: &[&str], body: &str) -> String {
    let mut s = String::with_capacity(8192);
    if stores.contains(&Store::F16) {
        s.push_str("enable f16;\n");
    }
    s.push_str(PARAMS_WGSL);
    s.push_str(COMMON);
    for (slot, &store) in stores.iter().enumerate() {
        accessors(&mut s, slot, store);
    }
    s.push_str(consts);
    s.push('\n');
    for lib in libs {
        s.push_str(lib);
        s.push('\n');
    }
    s.push_str(body);
    s
}
