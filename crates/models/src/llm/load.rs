//! Loading a GGUF model: llama.cpp's process-wide backend (with the CPU
//! kernels for this CPU) and a file check that names what is wrong.

use std::path::Path;
use std::sync::OnceLock;

use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;

use super::{LlmError, LlmOptions, ModelDims};

/// llama.cpp's process-wide backend: initialised once, never freed.
pub(crate) fn backend() -> Result<&'static LlamaBackend, LlmError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            // llama.cpp logs every tensor at load; keep stderr for our own errors.
            llama_cpp_2::send_logs_to_tracing(
                llama_cpp_2::LogOptions::default().with_logs_enabled(false),
            );
            // The CPU kernels for this CPU, before the backend enumerates devices.
            crate::cpu::load_kernels().map_err(|e| e.to_string())?;
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| LlmError::Backend(e.clone()))
}

/// Checks the file before llama.cpp sees it, for errors that name the problem.
pub(super) fn check_model_file(path: &Path) -> Result<(), LlmError> {
    use std::io::Read;
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(LlmError::ModelMissing {
                path: path.to_path_buf(),
            });
        }
        Err(source) => {
            return Err(LlmError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let mut magic = [0u8; 4];
    match file.read_exact(&mut magic) {
        Ok(()) if &magic == b"GGUF" => Ok(()),
        Ok(()) => Err(LlmError::NotGguf {
            path: path.to_path_buf(),
            detail: format!("starts with {magic:02x?}, not `GGUF`"),
        }),
        Err(_) => Err(LlmError::NotGguf {
            path: path.to_path_buf(),
            detail: "shorter than 4 bytes".to_owned(),
        }),
    }
}

/// Loads the model (memory-mapped).
pub(super) fn load_model(options: &LlmOptions) -> Result<LlamaModel, LlmError> {
    check_model_file(&options.model_path)?;
    let backend = backend()?;
    let params = LlamaModelParams::default().with_use_mmap(true);
    LlamaModel::load_from_file(backend, &options.model_path, &params).map_err(|_| {
        LlmError::ModelLoad {
            path: options.model_path.clone(),
        }
    })
}

/// The model's sizes, for the least work a token costs it.
pub(super) fn dims(model: &LlamaModel) -> ModelDims {
    let positive = |n: i32| u32::try_from(n).unwrap_or(0);
    ModelDims {
        params: model.n_params(),
        bytes: model.size(),
        n_vocab: positive(model.n_vocab()),
        n_embd: positive(model.n_embd()),
        n_layer: model.n_layer(),
        n_head: model.n_head(),
        n_head_kv: model.n_head_kv(),
    }
}
