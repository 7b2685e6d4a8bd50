//! The wasmtime side of custom steps: one engine per process, components
//! compiled once per content hash and pre-instantiated, and a fresh,
//! sandboxed store for every call.
//!
//! Why this shape: compiling a component is the expensive part (a Python
//! component is ~18 MB of CPython), so it happens once per process and
//! hash, and validating a topology warms the cache its build then uses.
//! Instantiating from an [`InstancePre`](wasmtime::component::InstancePre)
//! is cheap (memories are copy-on-write images), so every call gets its own
//! instance: no state leaks between requests, and a step that traps leaves
//! nothing broken behind.
//!
//! Limits: fuel bounds the instructions of one call; an epoch tick every
//! [`TICK`] lets a call stop when the engine stops waiting for it (node
//! timeout, request deadline, cancellation); a [`ResourceLimiter`] bounds
//! linear memory and table growth and remembers that it refused, so an
//! allocation failure is reported as such rather than as whatever trap the
//! guest's allocator turns it into.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Config, Engine, ResourceLimiter, UpdateDeadline};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxView, WasiView};

use super::config::Grant;

wasmtime::component::bindgen!({
    path: "wit",
    world: "step",
});

pub use glassbox::step::types::Fact;

/// How often the engine's epoch advances: the longest a call runs on after
/// its attempt is over.
pub const TICK: Duration = Duration::from_millis(5);
/// Bytes of the guest's stderr kept for an error's detail.
const STDERR_KEEP: usize = 4096;

/// Why a component could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read component `{path}`: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("component `{path}` has SHA-256 {actual}, not the {expected} the topology names")]
    Hash {
        path: String,
        expected: String,
        actual: String,
    },
    #[error("`{path}` is not a Glassbox step component: {message}")]
    Invalid { path: String, message: String },
    #[error("the WebAssembly engine could not start: {0}")]
    Engine(String),
}

impl LoadError {
    pub fn hint(&self) -> &'static str {
        match self {
            LoadError::Io { .. } => "check the path; it is relative to the topology file",
            LoadError::Hash { .. } => {
                "rebuild or re-copy the component, then write its new `sha256sum` into the topology"
            }
            LoadError::Invalid { .. } => {
                "build it against crates/nodes/wit/step.wit (world `step`); see docs/custom-steps.md"
            }
            LoadError::Engine(_) => "this host cannot run WebAssembly (see the message)",
        }
    }
}

/// A compiled, linked component and what it says about itself.
pub struct Loaded {
    pub pre: StepPre<State>,
    pub about: About,
    pub sha256: String,
}

/// The process's engine and its cache of compiled components.
struct Host {
    engine: Engine,
    linker: Linker<State>,
    loaded: Mutex<HashMap<String, Arc<Loaded>>>,
}

static HOST: OnceLock<Result<Host, String>> = OnceLock::new();

fn host() -> Result<&'static Host, LoadError> {
    HOST.get_or_init(start)
        .as_ref()
        .map_err(|e| LoadError::Engine(e.clone()))
}

fn start() -> Result<Host, String> {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.consume_fuel(true);
    config.epoch_interruption(true);
    let engine = Engine::new(&config).map_err(|e| e.to_string())?;
    let mut linker = Linker::new(&engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(|e| e.to_string())?;
    glassbox::step::host::add_to_linker::<State, HasSelf<State>>(&mut linker, |s| s)
        .map_err(|e| e.to_string())?;
    let ticker = engine.clone();
    std::thread::Builder::new()
        .name("wasm-epoch".into())
        .spawn(move || {
            loop {
                std::thread::sleep(TICK);
                ticker.increment_epoch();
            }
        })
        .map_err(|e| e.to_string())?;
    Ok(Host {
        engine,
        linker,
        loaded: Mutex::new(HashMap::new()),
    })
}

/// Loads the component at `path`, checking its SHA-256 against `expected`;
/// compiled once per process and hash.
pub fn load(path: &Path, expected: &str) -> Result<Arc<Loaded>, LoadError> {
    let host = host()?;
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| LoadError::Io {
        path: shown.clone(),
        source,
    })?;
    let actual = hex(&Sha256::digest(&bytes));
    if actual != expected {
        return Err(LoadError::Hash {
            path: shown,
            expected: expected.to_string(),
            actual,
        });
    }
    if let Some(hit) = host
        .loaded
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&actual)
    {
        return Ok(hit.clone());
    }
    let invalid = |e: wasmtime::Error| LoadError::Invalid {
        path: shown.clone(),
        message: format!("{e:#}"),
    };
    let component = Component::new(&host.engine, &bytes).map_err(invalid)?;
    let pre = host.linker.instantiate_pre(&component).map_err(invalid)?;
    let pre = StepPre::new(pre).map_err(invalid)?;
    let about = describe(&pre).map_err(invalid)?;
    let loaded = Arc::new(Loaded {
        pre,
        about,
        sha256: actual.clone(),
    });
    host.loaded
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(actual, loaded.clone());
    Ok(loaded)
}

/// How long `describe` may run: it only returns constants.
const DESCRIBE_TIME: Duration = Duration::from_secs(10);

fn describe(pre: &StepPre<State>) -> wasmtime::Result<About> {
    let mut store = new_store(&Sandbox::default(), None)?;
    let start = Instant::now();
    store.epoch_deadline_callback(move |_| {
        Ok(if start.elapsed() > DESCRIBE_TIME {
            UpdateDeadline::Interrupt
        } else {
            UpdateDeadline::Continue(1)
        })
    });
    let step = pre.instantiate(&mut store)?;
    step.call_describe(&mut store)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A call's limits and grants.
#[derive(Debug, Clone)]
pub struct Sandbox {
    pub fuel: u64,
    pub memory_bytes: usize,
    pub grant: Grant,
    /// Host directories of `grant.dirs`, resolved.
    pub dirs: Vec<(PathBuf, String)>,
}

impl Default for Sandbox {
    fn default() -> Sandbox {
        Sandbox {
            fuel: super::config::DEFAULT_FUEL,
            memory_bytes: (super::config::DEFAULT_MEMORY_MB as usize) << 20,
            grant: Grant::default(),
            dirs: Vec::new(),
        }
    }
}

/// Where text the step emits goes (the caller's token stream).
pub type Emit = Box<dyn FnMut(String) + Send>;

/// One call's store data.
pub struct State {
    wasi: WasiCtx,
    table: ResourceTable,
    pub limits: Limits,
    emit: Option<Emit>,
    stderr: MemoryOutputPipe,
}

impl State {
    /// The tail of what the guest wrote to stderr (a Python traceback).
    pub fn stderr(&self) -> String {
        let bytes = self.stderr.contents();
        let text = String::from_utf8_lossy(&bytes);
        let start = text.len().saturating_sub(STDERR_KEEP);
        let start = (start..text.len())
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(text.len());
        text[start..].trim().to_string()
    }
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl glassbox::step::host::Host for State {
    fn emit(&mut self, text: String) {
        if let Some(emit) = &mut self.emit {
            emit(text);
        }
    }
}

impl glassbox::step::types::Host for State {}

/// Memory and table limits that remember a refusal.
pub struct Limits {
    memory_bytes: usize,
    /// Set when a growth was refused: the call then failed for memory.
    pub refused: bool,
}

/// Most table elements one instance may have.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

impl ResourceLimiter for Limits {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let ok = desired <= self.memory_bytes;
        self.refused |= !ok;
        Ok(ok)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let ok = desired <= MAX_TABLE_ELEMENTS;
        self.refused |= !ok;
        Ok(ok)
    }
}

/// Clocks that read zero: what a step sees without `grant.clock`.
struct Frozen;

impl HostWallClock for Frozen {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

impl HostMonotonicClock for Frozen {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

/// A store for one call: nothing granted but what `sandbox` says, its fuel
/// set, its epoch deadline one tick away. The caller installs the epoch
/// callback that decides, each tick, whether the call goes on (without
/// one, the first tick interrupts it).
pub fn new_store(
    sandbox: &Sandbox,
    emit: Option<Emit>,
) -> wasmtime::Result<wasmtime::Store<State>> {
    let host = host().map_err(wasmtime::Error::msg)?;
    let stderr = MemoryOutputPipe::new(64 * 1024);
    let mut wasi = WasiCtx::builder();
    wasi.stderr(stderr.clone());
    if !sandbox.grant.clock {
        wasi.wall_clock(Frozen).monotonic_clock(Frozen);
    }
    for (name, value) in &sandbox.grant.env {
        wasi.env(name, value);
    }
    for (path, guest) in &sandbox.dirs {
        wasi.preopened_dir(path, guest, FsPerms::ReadOnly)?;
    }
    let state = State {
        wasi: wasi.build(),
        table: ResourceTable::new(),
        limits: Limits {
            memory_bytes: sandbox.memory_bytes,
            refused: false,
        },
        emit,
        stderr,
    };
    let mut store = wasmtime::Store::new(&host.engine, state);
    store.limiter(|s| &mut s.limits);
    store.set_fuel(sandbox.fuel)?;
    store.set_epoch_deadline(1);
    Ok(store)
}
