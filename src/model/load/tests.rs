//! Loader tests over an in-test device: a host device that lends buffers
//! over caller memory (and repacks weights as the CPU does), one that
//! cannot, and a non-host device.

use std::any::{Any, TypeId};
use std::sync::Arc;

use gantry_engine::testing::TestBufferType;
use gantry_engine::{
    Backend, Buffer, BufferType, BufferUsage, Context, DType, Device, DeviceCaps, DeviceType, Error, HostMemory,
    MemoryInfo, Result, TensorId, WeightRepack,
};

use super::*;
use crate::model::gguf::{Gguf, GgufWriter};

/// A buffer type of `alignment` and `max_size`, host memory or not, whose
/// new buffers hold 0xAA (so bytes the loader never wrote show).
fn test_buft(name: &str, alignment: usize, host: bool, max_size: usize) -> Arc<TestBufferType> {
    let buft = if host { TestBufferType::host(name, alignment) } else { TestBufferType::device(name, alignment) };
    Arc::new(buft.with_max_size(max_size).filled_with(0xAA))
}

struct TestDevice {
    buft: Arc<TestBufferType>,
    /// Registered for buffers over host memory; `None` keeps the trait's default.
    mapped_buft: Option<Arc<TestBufferType>>,
    lends_host_memory: bool,
}

impl Device for TestDevice {
    fn name(&self) -> &str {
        "test"
    }
    fn description(&self) -> &str {
        "in-test device"
    }
    fn memory(&self) -> MemoryInfo {
        MemoryInfo::default()
    }
    fn device_type(&self) -> DeviceType {
        if self.buft.is_host() { DeviceType::Cpu } else { DeviceType::Gpu }
    }
    fn caps(&self) -> DeviceCaps {
        DeviceCaps { buffer_from_host_ptr: self.lends_host_memory, ..Default::default() }
    }
    fn init_backend(&self, _: Option<&str>) -> Result<Arc<dyn Backend>> {
        Err(Error::Unsupported("no backend".into()))
    }
    fn buffer_type(&self) -> Arc<dyn BufferType> {
        self.buft.clone()
    }
    fn host_memory_buffer_type(&self) -> Arc<dyn BufferType> {
        match &self.mapped_buft {
            Some(b) => b.clone(),
            None => self.buffer_type(),
        }
    }
    fn buffer_from_host_memory(&self, memory: HostMemory, _: usize) -> Result<Box<dyn Buffer>> {
        if self.lends_host_memory {
            Ok(self.host_memory_buffer_type_of().buffer_over(memory))
        } else {
            Err(Error::Unsupported("test device lends no host memory".into()))
        }
    }
    fn supports_op(&self, _: &Context, _: TensorId) -> bool {
        true
    }
    fn supports_buft(&self, buft: &dyn BufferType) -> bool {
        buft.is_host() == self.buft.is_host()
    }
    /// A host device offers the CPU's repacked weight layout.
    fn extension(&self, type_id: TypeId) -> Option<&(dyn Any + Send + Sync)> {
        static CPU_REPACK: WeightRepack = WeightRepack {
            repacks: gantry_backends::cpu::repacks_layout,
            buffer_type: gantry_backends::cpu::repack_buffer_type,
        };
        (self.buft.is_host() && type_id == TypeId::of::<WeightRepack>()).then_some(&CPU_REPACK as _)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl TestDevice {
    /// The buffer type buffers over host memory belong to.
    fn host_memory_buffer_type_of(&self) -> &TestBufferType {
        self.mapped_buft.as_deref().unwrap_or(&self.buft)
    }
}

fn cpu_like() -> TestDevice {
    TestDevice {
        buft: test_buft("TEST_HOST", 64, true, usize::MAX),
        mapped_buft: Some(test_buft("TEST_MAPPED", 32, true, usize::MAX)),
        lends_host_memory: true,
    }
}

fn model_file() -> Gguf {
    let mut w = GgufWriter::new();
    w.add_str("general.architecture", "test");
    let bytes = |n: usize, seed: u8| (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect::<Vec<u8>>();
    w.add_tensor("token_embd.weight", &[64, 3], DType::Q8_0, bytes(2 * 34 * 3, 1)).unwrap();
    w.add_tensor("blk.0.attn_norm.weight", &[5], DType::F32, bytes(20, 2)).unwrap();
    w.add_tensor("blk.0.ffn_up.weight", &[32, 4, 2], DType::Q4_0, bytes(18 * 8, 3)).unwrap();
    w.add_tensor("pos", &[7], DType::I32, bytes(28, 4)).unwrap();
    w.add_tensor("h", &[3, 1, 1, 2], DType::F16, bytes(12, 5)).unwrap();
    Gguf::parse(&w.to_bytes()).unwrap()
}

/// The loader's options without repacking (the tests of mapping and copying).
fn plain() -> LoadOptions<'static> {
    LoadOptions { repack: false, ..LoadOptions::default() }
}

fn check_contents(gguf: &Gguf, ctx: &Context, weights: &LoadedWeights) {
    assert_eq!(weights.len(), gguf.tensors().len());
    for info in gguf.tensors() {
        let t = weights.get(&info.name).unwrap();
        let d = ctx.desc(t).unwrap();
        assert_eq!((d.name.as_str(), d.dtype, d.ne), (info.name.as_str(), info.dtype, info.ne));
        assert!(d.is_contiguous());
        assert_eq!(ctx.get_bytes(t).unwrap(), gguf.tensor_data(info).unwrap(), "{}", info.name);
        let (entry, _) = ctx.tensor_buffer(t).unwrap();
        assert_eq!(entry.usage, BufferUsage::Weights);
    }
    assert!(weights.get("nope").unwrap_err().to_string().contains("'nope'"));
}

#[test]
fn host_device_gets_tensors_over_the_file_bytes() {
    let gguf = model_file();
    let device = cpu_like();
    let mut ctx = Context::new();
    let weights = load_tensors(&gguf, &mut ctx, &device, plain()).unwrap();
    assert!(weights.is_mapped());
    assert_eq!(weights.buffers().len(), 1);
    assert_eq!(device.buft.buffers_allocated(), 0, "nothing allocated");
    check_contents(&gguf, &ctx, &weights);
    let base = gguf.bytes().as_ptr();
    for info in gguf.tensors() {
        let t = weights.get(&info.name).unwrap();
        let want = base.wrapping_add(gguf.tensor_file_offset(info));
        assert_eq!(ctx.host_ptr(t).unwrap() as *const u8, want, "{} points into the file", info.name);
        let (entry, _) = ctx.tensor_buffer(t).unwrap();
        assert_eq!(entry.buffer_type.name(), "TEST_MAPPED");
    }
    let t = weights.get("pos").unwrap();
    assert!(ctx.write_tensor_bytes(t, 0, &[0; 4]).is_err(), "the mapping is read-only");
}

#[test]
fn a_cpu_device_gets_its_matrices_and_expert_stacks_repacked() {
    let gguf = model_file();
    for use_mmap in [true, false] {
        let device = cpu_like();
        let mut ctx = Context::new();
        let options = LoadOptions { use_mmap, repack: true, ..LoadOptions::default() };
        let weights = load_tensors(&gguf, &mut ctx, &device, options).unwrap();
        // Reading a repacked tensor back gives the file's bytes.
        check_contents(&gguf, &ctx, &weights);
        for info in gguf.tensors() {
            let t = weights.get(&info.name).unwrap();
            let (entry, _) = ctx.tensor_buffer(t).unwrap();
            // The Q8_0 matrix and the Q4_0 stack of two have a repacked layout.
            let want = if info.name == "token_embd.weight" || info.name == "blk.0.ffn_up.weight" {
                "CPU_REPACK"
            } else if use_mmap {
                "TEST_MAPPED"
            } else {
                "TEST_HOST"
            };
            assert_eq!(entry.buffer_type.name(), want, "{}", info.name);
        }
        let t = weights.get("token_embd.weight").unwrap();
        assert!(ctx.host_ptr(t).is_err(), "repacked bytes are not host memory to others");
        // Unloading frees the repack buffer with the rest.
        weights.unload(&mut ctx);
        assert_eq!(ctx.buffers().count(), 0);
        assert_eq!(ctx.tensor_count(), 0);
    }
    // A device with no repacked layout keeps its own buffers whatever the option says.
    let gpu =
        TestDevice { buft: test_buft("GPU", 256, false, usize::MAX), mapped_buft: None, lends_host_memory: false };
    let mut ctx = Context::new();
    let weights = load_tensors(&gguf, &mut ctx, &gpu, LoadOptions { repack: true, ..LoadOptions::default() }).unwrap();
    for (_, t) in weights.iter() {
        assert_eq!(ctx.tensor_buffer(t).unwrap().0.buffer_type.name(), "GPU");
    }
}

/// A model with expert stacks in two layers beside other weights.
fn experts_file() -> Gguf {
    let mut w = GgufWriter::new();
    w.add_str("general.architecture", "test");
    let bytes = |n: usize, seed: u8| (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect::<Vec<u8>>();
    w.add_tensor("blk.0.attn_q.weight", &[32, 4], DType::Q4_0, bytes(18 * 4, 1)).unwrap();
    w.add_tensor("blk.0.ffn_up_exps.weight", &[32, 4, 2], DType::Q4_0, bytes(18 * 8, 2)).unwrap();
    w.add_tensor("blk.0.ffn_down_exps.bias", &[4, 2], DType::F32, bytes(32, 3)).unwrap();
    w.add_tensor("blk.1.ffn_up_exps.weight", &[32, 4, 2], DType::Q4_0, bytes(18 * 8, 4)).unwrap();
    Gguf::parse(&w.to_bytes()).unwrap()
}

#[test]
fn host_kept_experts_stay_in_cpu_memory_beside_a_gpu() {
    let gguf = experts_file();
    let gpu =
        || TestDevice { buft: test_buft("GPU", 256, false, usize::MAX), mapped_buft: None, lends_host_memory: false };
    for repack in [true, false] {
        let device = gpu();
        let mut ctx = Context::new();
        let options =
            LoadOptions { repack, host_tensors: HostTensors::experts_of_first_layers(1), ..LoadOptions::default() };
        let weights = load_tensors(&gguf, &mut ctx, &device, options).unwrap();
        check_contents(&gguf, &ctx, &weights);
        let home = |name: &str| ctx.tensor_buffer(weights.get(name).unwrap()).unwrap().0.buffer_type.name().to_owned();
        assert_eq!(home("blk.0.ffn_up_exps.weight"), if repack { "CPU_REPACK" } else { "CPU" });
        assert_eq!(home("blk.0.ffn_down_exps.bias"), "CPU", "biases are experts' too, and not repacked");
        assert_eq!(home("blk.0.attn_q.weight"), "GPU");
        assert_eq!(home("blk.1.ffn_up_exps.weight"), "GPU", "only the first layer's experts");
        weights.unload(&mut ctx);
        assert_eq!(ctx.buffers().count(), 0);
    }
    // On a device whose buffers are host memory there is nothing to keep apart.
    let device = cpu_like();
    let mut ctx = Context::new();
    let options = LoadOptions { host_tensors: HostTensors::ALL_EXPERTS, ..plain() };
    let weights = load_tensors(&gguf, &mut ctx, &device, options).unwrap();
    for (name, t) in weights.iter() {
        assert_eq!(ctx.tensor_buffer(t).unwrap().0.buffer_type.name(), "TEST_MAPPED", "{name}");
    }
}

#[test]
fn devices_that_cannot_map_get_copies() {
    let gguf = model_file();
    let cases = [
        // A GPU-like device.
        (
            TestDevice { buft: test_buft("GPU", 256, false, usize::MAX), mapped_buft: None, lends_host_memory: true },
            true,
        ),
        // A host device without buffers over caller memory.
        (
            TestDevice { buft: test_buft("HOST", 32, true, usize::MAX), mapped_buft: None, lends_host_memory: false },
            true,
        ),
        // A host device whose buffer type wants 64-byte offsets the file does not give.
        (
            TestDevice { buft: test_buft("HOST64", 64, true, usize::MAX), mapped_buft: None, lends_host_memory: true },
            true,
        ),
        // Mapping turned off by the caller.
        (cpu_like(), false),
    ];
    for (device, use_mmap) in cases {
        let mut ctx = Context::new();
        let options = LoadOptions { use_mmap, ..plain() };
        let weights = load_tensors(&gguf, &mut ctx, &device, options).unwrap();
        assert!(!weights.is_mapped(), "{}", device.buft.name());
        assert_eq!(device.buft.buffers_allocated(), 1);
        check_contents(&gguf, &ctx, &weights);
        for (_, t) in weights.iter() {
            let (entry, p) = ctx.tensor_buffer(t).unwrap();
            assert_eq!(entry.buffer_type.name(), device.buft.name());
            assert_eq!(p.offset % device.buft.alignment(), 0);
        }
    }
}

#[test]
fn small_max_size_splits_buffers_and_too_large_tensors_fail_cleanly() {
    let gguf = model_file();
    let device = TestDevice { buft: test_buft("SMALL", 32, false, 256), mapped_buft: None, lends_host_memory: false };
    let mut ctx = Context::new();
    let weights = load_tensors(&gguf, &mut ctx, &device, LoadOptions::default()).unwrap();
    assert!(weights.buffers().len() > 1);
    for &b in weights.buffers() {
        assert!(ctx.buffer(b).unwrap().buffer.size() <= 256);
    }
    check_contents(&gguf, &ctx, &weights);

    let tiny = TestDevice { buft: test_buft("TINY", 32, false, 100), mapped_buft: None, lends_host_memory: false };
    let mut ctx = Context::new();
    let keep = ctx.tensor(DType::F32, [3]).unwrap();
    let err = load_tensors(&gguf, &mut ctx, &tiny, LoadOptions::default()).unwrap_err();
    assert!(matches!(err, crate::Error::Engine(Error::OutOfMemory { .. })), "{err}");
    assert_eq!(ctx.tensor_count(), 1, "the failed load left nothing behind");
    assert!(ctx.contains(keep));
    assert_eq!(ctx.buffers().count(), 0);
}

#[test]
fn progress_reaches_the_total() {
    let gguf = model_file();
    for device in [
        cpu_like(),
        TestDevice { buft: test_buft("GPU", 32, false, usize::MAX), mapped_buft: None, lends_host_memory: false },
    ] {
        let mut seen = Vec::new();
        let mut record = |p: LoadProgress| seen.push(p);
        let mut ctx = Context::new();
        load_tensors(&gguf, &mut ctx, &device, LoadOptions { progress: Some(&mut record), ..LoadOptions::default() })
            .unwrap();
        let last = *seen.last().unwrap();
        assert_eq!(last.bytes_done, gguf.tensor_bytes());
        assert_eq!(last.bytes_total, gguf.tensor_bytes());
        assert_eq!((last.tensors_done, last.tensors_total), (5, 5));
        assert!(seen.windows(2).all(|w| w[0].bytes_done <= w[1].bytes_done));
    }
}

#[test]
fn loads_smollm2_mapped_and_copied() {
    let path = match crate::model::fetch::smollm2_path() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("SKIPPED: SmolLM2 could not be fetched: {e}");
            return;
        }
    };
    let gguf = Gguf::open(path).unwrap();
    let mut ctx = Context::new();
    let mapped = load_tensors(&gguf, &mut ctx, &cpu_like(), plain()).unwrap();
    assert!(mapped.is_mapped());
    assert_eq!(mapped.len(), 272);
    let embd = mapped.get("token_embd.weight").unwrap();
    let d = ctx.desc(embd).unwrap();
    assert_eq!((d.dtype, d.ne), (DType::Q8_0, [576, 49152, 1, 1]));
    let info = gguf.tensor("token_embd.weight").unwrap();
    let in_file = gguf.bytes().as_ptr().wrapping_add(gguf.tensor_file_offset(info));
    assert_eq!(ctx.host_ptr(embd).unwrap() as *const u8, in_file);

    // Repacked for the CPU: every 2-d Q4_1 / Q8_0 matrix (7 per layer, and
    // the embeddings), read back as the file's bytes.
    let mut ctx = Context::new();
    let options = LoadOptions { repack: true, ..LoadOptions::default() };
    let repacked = load_tensors(&gguf, &mut ctx, &cpu_like(), options).unwrap();
    let in_repack = |t| ctx.tensor_buffer(t).unwrap().0.buffer_type.name() == "CPU_REPACK";
    assert_eq!(repacked.iter().filter(|&(_, t)| in_repack(t)).count(), 30 * 7 + 1);
    for name in ["token_embd.weight", "blk.7.attn_k.weight", "blk.29.ffn_down.weight"] {
        let t = repacked.get(name).unwrap();
        assert!(in_repack(t), "{name}");
        assert_eq!(ctx.get_bytes(t).unwrap(), gguf.tensor_data(gguf.tensor(name).unwrap()).unwrap(), "{name}");
    }
    assert!(!in_repack(repacked.get("output_norm.weight").unwrap()));

    // A device with 64 MiB buffers: the 30 MB embedding and the rest split over buffers.
    let gpu =
        TestDevice { buft: test_buft("GPU64M", 256, false, 64 << 20), mapped_buft: None, lends_host_memory: false };
    let mut ctx = Context::new();
    let copied = load_tensors(&gguf, &mut ctx, &gpu, LoadOptions::default()).unwrap();
    assert!(!copied.is_mapped());
    assert_eq!(copied.buffers().len(), 2);
    for name in ["token_embd.weight", "blk.29.ffn_down.weight", "output_norm.weight"] {
        let t = copied.get(name).unwrap();
        assert_eq!(ctx.get_bytes(t).unwrap(), gguf.tensor_data(gguf.tensor(name).unwrap()).unwrap(), "{name}");
    }
}
