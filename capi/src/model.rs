//! The high-level model API: load a llama-family GGUF, tokenize, generate
//! with a token callback.

use std::ffi::{c_char, c_void};
use std::sync::{Arc, LazyLock};

use gantry::engine::{DeviceType, Registry, platform_extension};
use gantry::model::decoder::{DecoderModel, LogitsFor, Session, SessionParams};
use gantry::model::sampler::{Sampler, SamplerParams};
use gantry::{Backend, Context, DType, RegistryDefaults, SetThreadCount};

use crate::entry::{Failure, entry};
use crate::handles::{Table, lock};
use crate::ptr::{read_in, read_str, slice, slice_mut, write_out, write_string};
use crate::reentry::in_callback;
use crate::status::GantryStatus;

/// A loaded model with its context, backends and one generation session.
///
/// A zero-initialized value (`{0}`) is the null handle.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GantryModel {
    /// The handle's number (0 = null). Opaque: only copy or compare it.
    pub id: u64,
}

/// How a model is loaded; zero (or null) fields take the defaults.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GantryModelParams {
    /// Backends in priority order, CPU last: device or platform names,
    /// comma-separated (`"wgpu0,cpu"`); null takes every device found.
    pub backends: *const c_char,
    /// Positions the KV cache holds (0: 2048, capped at the model's training length).
    pub n_ctx: u32,
    /// Threads of the CPU backend (0: every core).
    pub n_threads: u32,
    /// Keep the KV cache in f32 instead of f16 (slower, exact).
    pub kv_f32: bool,
}

/// Everything a loaded model needs, dropped together.
struct ModelEntry {
    session: Session,
    ctx: Context,
    model: DecoderModel,
    _backends: Vec<Arc<dyn Backend>>,
}

static MODELS: LazyLock<Table<ModelEntry>> = LazyLock::new(|| Table::new("model", 0x4d4f));

/// Called with each generated token and its text (`piece`, `len` bytes of
/// UTF-8, not NUL-terminated; empty while a character's bytes are
/// incomplete); return `true` to go on, `false` to stop. It runs while the
/// generation holds its model: a call into the API from inside it returns
/// `GANTRY_ERROR_REENTRANT` (only `gantry_last_error` and
/// `gantry_status_name` answer there).
pub type GantryTokenCallback =
    Option<unsafe extern "C" fn(token: u32, piece: *const c_char, len: usize, user_data: *mut c_void) -> bool>;

fn load(path: &str, p: &GantryModelParams, backends: Option<&str>) -> Result<ModelEntry, Failure> {
    let registry = Registry::with_defaults()?;
    let backends = match backends {
        Some(names) => registry.backends_by_names(&names.split(',').collect::<Vec<_>>())?,
        None => registry.backends_by_priority()?,
    };
    if p.n_threads > 0 {
        let set =
            registry.find_platform("CPU").and_then(|cpu| platform_extension::<SetThreadCount>(cpu.as_ref()).copied());
        for b in backends.iter().filter(|b| b.device().device_type() == DeviceType::Cpu) {
            if let Some(set) = set {
                (set.0)(b.as_ref(), p.n_threads as usize)?;
            }
        }
    }
    let first = backends.first().ok_or_else(|| Failure::invalid("no backends"))?;
    let mut ctx = Context::new();
    let model = DecoderModel::load(path, &mut ctx, first.device(), None)?;
    // Capped, as documented, at the length the model was trained for (which
    // its loader bounds): a larger count from C only sizes a larger cache.
    let asked = if p.n_ctx == 0 { 2048 } else { p.n_ctx as usize };
    let params = SessionParams {
        n_ctx: asked.min(model.hp.n_ctx_train.max(1)),
        kv_dtype: if p.kv_f32 { DType::F32 } else { DType::F16 },
        ..SessionParams::default()
    };
    let session = Session::new(&mut ctx, model.hp, model.weights.clone(), &backends, params)?;
    Ok(ModelEntry { session, ctx, model, _backends: backends })
}

/// Loads the llama-family GGUF file at `path` (its weights mapped, not
/// copied, where the first backend reads host memory); `params` may be null.
///
/// Threading: any thread; blocks while the file is read.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `path` is a NUL-terminated string; `params` is null or valid for one read
/// (its `backends` null or a NUL-terminated string); `out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_model_load(
    path: *const c_char,
    params: *const GantryModelParams,
    out: *mut GantryModel,
) -> GantryStatus {
    entry("gantry_model_load", || {
        // SAFETY: the caller's contract.
        let path = unsafe { read_str(path, "path")? };
        let p = if params.is_null() {
            GantryModelParams { backends: std::ptr::null(), n_ctx: 0, n_threads: 0, kv_f32: false }
        } else {
            // SAFETY: the caller's contract.
            unsafe { read_in(params, "params")? }
        };
        // SAFETY: the caller's contract.
        let backends = if p.backends.is_null() { None } else { Some(unsafe { read_str(p.backends, "backends")? }) };
        if out.is_null() {
            return Err(Failure::invalid("out is a null pointer"));
        }
        let entry = load(path, &p, backends)?;
        // SAFETY: the caller's contract.
        unsafe { write_out(out, GantryModel { id: MODELS.insert(entry) }, "out") }
    })
}

/// Frees a model, its memory and backends.
///
/// Threading: any thread; waits for calls in flight on it.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
#[unsafe(no_mangle)]
pub extern "C" fn gantry_model_free(model: GantryModel) -> GantryStatus {
    entry("gantry_model_free", || MODELS.remove(model.id).map(drop))
}

/// The model's vocabulary size.
///
/// Threading: as the model (calls on one model are serialized).
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `n_vocab` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_model_n_vocab(model: GantryModel, n_vocab: *mut usize) -> GantryStatus {
    entry("gantry_model_n_vocab", || {
        let m = MODELS.get(model.id)?;
        let n = lock(&m, "model")?.model.hp.n_vocab;
        // SAFETY: the caller's contract.
        unsafe { write_out(n_vocab, n, "n_vocab") }
    })
}

/// Token ids of `text` into `tokens` (room for `cap`; the count goes to
/// `n_out`). `add_special` puts the model's BOS first where it wants one.
/// When `cap` is too small the count is still written and the call fails
/// with `GANTRY_ERROR_BUFFER_TOO_SMALL`.
///
/// Threading: as the model.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `text` is a NUL-terminated string; `tokens` is null or valid for `cap`
/// writes; `n_out` is null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_model_tokenize(
    model: GantryModel,
    text: *const c_char,
    add_special: bool,
    tokens: *mut u32,
    cap: usize,
    n_out: *mut usize,
) -> GantryStatus {
    entry("gantry_model_tokenize", || {
        // SAFETY: the caller's contract.
        let text = unsafe { read_str(text, "text")? };
        let m = MODELS.get(model.id)?;
        let ids = lock(&m, "model")?.model.tokenizer.encode(text, add_special, true)?;
        // SAFETY: the caller's contract.
        unsafe { write_out(n_out, ids.len(), "n_out")? };
        if cap < ids.len() {
            return Err(Failure::new(
                GantryStatus::GantryErrorBufferTooSmall,
                format!("{} tokens, room for {cap}", ids.len()),
            ));
        }
        // SAFETY: the caller's contract.
        unsafe { slice_mut(tokens, ids.len(), "tokens")? }.copy_from_slice(&ids);
        Ok(())
    })
}

/// The text of the `n` tokens into `text` (`cap` bytes, NUL-terminated; the
/// length to `len` when not null).
///
/// Threading: as the model.
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `tokens` is null or valid for `n` reads; `text` null or valid for `cap`
/// writes; `len` null or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_model_detokenize(
    model: GantryModel,
    tokens: *const u32,
    n: usize,
    text: *mut c_char,
    cap: usize,
    len: *mut usize,
) -> GantryStatus {
    entry("gantry_model_detokenize", || {
        // SAFETY: the caller's contract.
        let tokens = unsafe { slice(tokens, n, "tokens")? };
        let m = MODELS.get(model.id)?;
        let s = lock(&m, "model")?.model.tokenizer.decode_string(tokens, false, false)?;
        // SAFETY: the caller's contract.
        unsafe { write_string(text, cap, len, &s) }
    })
}

/// Generates up to `n_predict` tokens after the `n_prompt` tokens `prompt`
/// (the KV cache starts empty each call): `temperature` 0 is greedy, else
/// sampling among the 40 most likely with `seed`. Each token goes to
/// `callback` (may be null) as it is made; generation stops at an
/// end-of-generation token (not passed on), when the callback returns
/// `false`, or when the context is full. The count goes to `n_generated`
/// when not null.
///
/// Threading: as the model. The callback runs on the calling thread, between
/// decode steps. A call into Gantry from inside it returns
/// `GANTRY_ERROR_REENTRANT` and does nothing; generation goes on. Other
/// threads may call Gantry meanwhile (this model's functions wait for it).
///
/// Callbacks: not from inside one of Gantry's callbacks on its thread
/// (`GANTRY_ERROR_REENTRANT`, nothing done).
///
/// # Safety
/// `prompt` is null or valid for `n_prompt` reads; `callback` null or a
/// function of that signature, called with `user_data`; `n_generated` null
/// or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gantry_model_generate(
    model: GantryModel,
    prompt: *const u32,
    n_prompt: usize,
    n_predict: usize,
    temperature: f32,
    seed: u64,
    callback: GantryTokenCallback,
    user_data: *mut c_void,
    n_generated: *mut usize,
) -> GantryStatus {
    entry("gantry_model_generate", || {
        // SAFETY: the caller's contract.
        let prompt = unsafe { slice(prompt, n_prompt, "prompt")? };
        if prompt.is_empty() {
            return Err(Failure::invalid("the prompt has no tokens"));
        }
        if !temperature.is_finite() || temperature < 0.0 {
            return Err(Failure::invalid(format!("temperature must be 0 or more, not {temperature}")));
        }
        let m = MODELS.get(model.id)?;
        let mut m = lock(&m, "model")?;
        let ModelEntry { session, ctx, model, .. } = &mut *m;
        // The count first: it bounds the scan of the tokens below.
        if prompt.len() >= session.n_ctx() {
            return Err(Failure::invalid(format!(
                "{} prompt tokens do not fit a context of {}",
                prompt.len(),
                session.n_ctx()
            )));
        }
        let n_vocab = model.hp.n_vocab;
        if let Some(&bad) = prompt.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(Failure::invalid(format!("token {bad} is outside the vocabulary ({n_vocab})")));
        }
        session.clear(ctx)?;
        let mut sampler = Sampler::new(SamplerParams { temperature, top_k: 40, seed, ..SamplerParams::default() });
        let mut decoder = model.tokenizer.stream_decoder(false);
        let mut next = sampler.sample(session.eval(ctx, prompt, LogitsFor::Last)?);
        let mut generated = 0;
        while generated < n_predict && !model.tokenizer.is_eog(next) {
            generated += 1;
            let piece = decoder.push(next)?;
            if let Some(cb) = callback {
                // The model is locked: calls back into the API from the
                // callback are refused, not deadlocked.
                let go_on = in_callback("the token callback", || {
                    // SAFETY: the caller's contract: a valid callback; the piece
                    // outlives the call.
                    unsafe { cb(next, piece.as_ptr().cast(), piece.len(), user_data) }
                });
                if !go_on {
                    break;
                }
            }
            if generated == n_predict || session.n_past() >= session.n_ctx() {
                break;
            }
            next = sampler.sample(session.eval(ctx, &[next], LogitsFor::Last)?);
        }
        if !n_generated.is_null() {
            // SAFETY: the caller's contract.
            unsafe { write_out(n_generated, generated, "n_generated")? };
        }
        Ok(())
    })
}
