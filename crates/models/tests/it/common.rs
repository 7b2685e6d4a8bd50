//! Shared fixtures: the real models, loaded once per test binary.

use std::path::PathBuf;
use std::sync::OnceLock;

use glassbox_models::{Embedder, EmbedderOptions, LlmHandle, LlmOptions};

/// The models directory, checked: a missing model is a test failure with the
/// fix in the message.
pub fn models() -> PathBuf {
    let dir = glassbox_models::models_dir();
    let gguf = glassbox_models::smollm2_path(&dir);
    let minilm = glassbox_models::minilm_dir(&dir).join("model.safetensors");
    for f in [&gguf, &minilm] {
        assert!(
            f.is_file(),
            "model file {} is missing: run `glassbox models fetch` (or scripts/fetch-models.sh) \
             or set GLASSBOX_MODELS",
            f.display()
        );
    }
    dir
}

/// The SmolLM2 model on its worker, shared by every test (requests queue).
pub fn llm() -> &'static LlmHandle {
    static LLM: OnceLock<LlmHandle> = OnceLock::new();
    LLM.get_or_init(|| {
        let options = LlmOptions {
            threads: Some(2),
            n_ctx: 1024,
            ..LlmOptions::new(glassbox_models::smollm2_path(&models()))
        };
        match LlmHandle::load(options) {
            Ok(handle) => handle,
            Err(e) => panic!("loading SmolLM2: {e}"),
        }
    })
}

/// The MiniLM embedder, shared by every test.
pub fn embedder() -> &'static Embedder {
    static EMBEDDER: OnceLock<Embedder> = OnceLock::new();
    EMBEDDER.get_or_init(|| {
        match Embedder::load(
            &glassbox_models::minilm_dir(&models()),
            EmbedderOptions::default(),
        ) {
            Ok(e) => e,
            Err(e) => panic!("loading MiniLM: {e}"),
        }
    })
}

/// A small deterministic PRNG (xorshift64*), so tests need no `rand`.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Uniform in [-1, 1).
    pub fn signed(&mut self) -> f32 {
        self.uniform() * 2.0 - 1.0
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f32 {
        let u1 = self.uniform().max(1e-7);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
    }
}

/// `n` vectors of `dim` dimensions shaped like sentence embeddings: topics
/// (cluster centres), each with a few directions its members vary along, plus
/// a little isotropic noise. (Uniform noise is the worst case for any graph
/// index and nothing like real embeddings.) The same `seed` gives the same
/// topics, so base vectors and queries can share them.
pub fn clustered(
    n: usize,
    dim: usize,
    clusters: usize,
    seed: u64,
    sample_seed: u64,
) -> Vec<Vec<f32>> {
    let mut rng = Rng::new(seed);
    let centres: Vec<Vec<f32>> = (0..clusters)
        .map(|_| (0..dim).map(|_| rng.normal()).collect())
        .collect();
    let directions: Vec<Vec<Vec<f32>>> = (0..clusters)
        .map(|_| {
            (0..8)
                .map(|_| (0..dim).map(|_| rng.normal()).collect())
                .collect()
        })
        .collect();
    let mut rng = Rng::new(sample_seed);
    (0..n)
        .map(|_| {
            let c = (rng.next_u64() % clusters as u64) as usize;
            let mut v = centres[c].clone();
            for d in &directions[c] {
                let w = 0.5 * rng.normal();
                v.iter_mut().zip(d).for_each(|(x, y)| *x += w * y);
            }
            v.iter_mut().for_each(|x| *x += 0.15 * rng.normal());
            v
        })
        .collect()
}

/// Exact top-k by cosine, computed naively: the reference for recall.
pub fn brute_force(vectors: &[Vec<f32>], query: &[f32], k: usize) -> Vec<usize> {
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    let qn = norm(query);
    let mut scored: Vec<(usize, f32)> = vectors
        .iter()
        .enumerate()
        .map(|(i, v)| {
            (
                i,
                v.iter().zip(query).map(|(a, b)| a * b).sum::<f32>() / (norm(v) * qn),
            )
        })
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    scored.into_iter().take(k).map(|(i, _)| i).collect()
}

/// Every CPU variant library of this build carries `mark`, which the
/// kernel in `crates/models/kernels/{source}` leaves: a build of llama.cpp
/// without the CMake hook (or a stale one) fails here rather than running
/// ggml's slower kernel unnoticed.
#[cfg(target_arch = "x86_64")]
pub fn assert_every_cpu_variant_carries(mark: &[u8], source: &str) {
    let unmarked: Vec<_> = cpu_variant_libs()
        .into_iter()
        .filter(|p| !glassbox_models::cpu::carries_mark(p, mark))
        .collect();
    assert!(
        unmarked.is_empty(),
        "built without crates/models/kernels/{source}: {unmarked:?} \
         (rebuild llama.cpp: `cargo clean -p llama-cpp-sys-2`, then build)"
    );
}

/// The CPU variant libraries of this build (`libggml-cpu-*.so` in
/// llama-cpp-sys-2's backends folder), at least ten of them on x86-64.
#[cfg(target_arch = "x86_64")]
pub fn cpu_variant_libs() -> Vec<PathBuf> {
    let dir = llama_cpp_sys_2::BACKENDS_DIR.expect("llama.cpp built with dynamic backends");
    let libs: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the backends folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libggml-cpu-"))
        })
        .collect();
    assert!(libs.len() >= 10, "CPU variants in {dir}: {libs:?}");
    libs
}

/// One ggml operation computed on the CPU backend (whichever variant this
/// process loaded), for the tests that hold a kernel against a reference.
#[allow(unsafe_code)]
pub mod cpu_op {
    use llama_cpp_sys_2 as sys;

    /// A tensor of the operation and the bytes put in it before computing.
    pub struct Input {
        pub tensor: *mut sys::ggml_tensor,
        pub data: *const std::ffi::c_void,
        pub bytes: usize,
    }

    impl Input {
        pub fn new<T>(tensor: *mut sys::ggml_tensor, data: &[T]) -> Self {
            Input {
                tensor,
                data: data.as_ptr().cast(),
                bytes: std::mem::size_of_val(data),
            }
        }
    }

    /// Makes a context for `tensors` tensors, lets `build` create the
    /// operation in it (its output and its inputs), allocates them in one
    /// CPU backend buffer (marked as holding a model's weights where
    /// `weights`), sets the inputs, computes, and returns the output's F32
    /// values and what `inspect` says of the inputs before all is freed.
    ///
    /// # Safety
    ///
    /// `build` creates its tensors in the context it is given, and each
    /// input's `data` holds `bytes` readable bytes until this returns.
    pub unsafe fn run<R>(
        tensors: usize,
        weights: bool,
        build: impl FnOnce(*mut sys::ggml_context) -> (*mut sys::ggml_tensor, Vec<Input>),
        inspect: impl FnOnce(&[Input]) -> R,
    ) -> (Vec<f32>, R) {
        // SAFETY: the tensors are created in `ctx` by `build`, allocated in a
        // CPU backend buffer before any data is set (each input's size
        // checked against its bytes), and every object is freed once,
        // after its last use.
        unsafe {
            let params = sys::ggml_init_params {
                mem_size: sys::ggml_tensor_overhead() * tensors + sys::ggml_graph_overhead(),
                mem_buffer: std::ptr::null_mut(),
                no_alloc: true,
            };
            let ctx = sys::ggml_init(params);
            assert!(!ctx.is_null());
            let (out, inputs) = build(ctx);
            let graph = sys::ggml_new_graph(ctx);
            sys::ggml_build_forward_expand(graph, out);
            let backend =
                sys::ggml_backend_init_by_type(sys::GGML_BACKEND_DEVICE_TYPE_CPU, std::ptr::null());
            assert!(!backend.is_null(), "no CPU backend");
            let buffer = sys::ggml_backend_alloc_ctx_tensors(ctx, backend);
            assert!(!buffer.is_null());
            if weights {
                sys::ggml_backend_buffer_set_usage(buffer, sys::GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
            }
            for input in &inputs {
                assert_eq!(sys::ggml_nbytes(input.tensor), input.bytes);
                sys::ggml_backend_tensor_set(input.tensor, input.data, 0, input.bytes);
            }
            assert_eq!(
                sys::ggml_backend_graph_compute(backend, graph),
                sys::GGML_STATUS_SUCCESS
            );
            let mut result = vec![0f32; sys::ggml_nbytes(out) / 4];
            sys::ggml_backend_tensor_get(out, result.as_mut_ptr().cast(), 0, result.len() * 4);
            let said = inspect(&inputs);
            sys::ggml_backend_buffer_free(buffer);
            sys::ggml_backend_free(backend);
            sys::ggml_free(ctx);
            (result, said)
        }
    }
}
