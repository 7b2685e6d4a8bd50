//! The served topologies: every valid topology file in one directory, kept
//! in sync with the directory by polling it.
//!
//! Why polling: a rescan every second reads a handful of small files, needs
//! no platform watcher (inotify limits, network file systems, editors that
//! replace files by rename) and no extra dependency. Files are compared by
//! content, so an edit is seen even within one mtime tick.
//!
//! Rules: a new or changed file is validated and its pipeline built (model
//! handles are cached by the nodes crate); if either fails, the version
//! already served from that file stays live and the reason is logged. A
//! deleted file unloads its version. Files of one topology id with different
//! `version`s are served side by side ([`crate::versions`]): the first one
//! loaded is promoted (or the one the config names), the others take no
//! traffic until a split or a promotion gives them some. Two files claiming
//! one id *and* version: the first one loaded keeps it.

use std::collections::BTreeMap;
use std::collections::hash_map::DefaultHasher;
use std::convert::Infallible;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use glassbox_engine::PipelineOptions;
use glassbox_nodes::Registry;
use glassbox_nodes::outbound::ServerAllow;
use glassbox_nodes::{AssembleError, Assembly, TopologyInput};
use glassbox_topology::secret::mask_text;
use glassbox_topology::{Topology, TopologyError};
use glassbox_trace::TraceSink;

use crate::calibrated::CalibratedSink;
pub use crate::served::{Served, StreamMode, embeds, stream_mode};
use crate::versions::{Chosen, Lineup, RequestKey, VersionError};

/// The topologies directory cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("the topologies directory `{path}` cannot be read: {source}")]
pub struct DirError {
    pub path: String,
    #[source]
    pub source: std::io::Error,
}

/// A file that is not being served (or whose last edit was rejected).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProblem {
    pub file: PathBuf,
    /// The rendered diagnostics or build errors (no colour).
    pub message: String,
    /// The topology id still served from this file, if any.
    pub still_serving: Option<String>,
}

/// What a rescan changed, for logging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Loaded {
        id: String,
        version: String,
        file: PathBuf,
        replaced: Option<String>,
        /// Another version of the id is promoted: this one takes no traffic
        /// until a split or a promotion.
        candidate: bool,
    },
    Unloaded {
        id: String,
        version: String,
        file: PathBuf,
    },
    Rejected(FileProblem),
}

#[derive(Debug)]
struct FileState {
    hash: u64,
    /// The topology id and version served from this file.
    serves: Option<(String, String)>,
    problem: Option<FileProblem>,
}

#[derive(Debug, Default)]
struct Inner {
    files: BTreeMap<PathBuf, FileState>,
    by_id: BTreeMap<String, Lineup>,
}

/// A new or changed file: path, content, content hash.
type Edited = (PathBuf, Vec<u8>, u64);

/// Where the traces of a topology (by id) go.
pub type SinkFor = Box<dyn Fn(&str) -> Arc<dyn TraceSink> + Send + Sync>;

/// What building a pipeline needs.
pub struct Builder {
    /// The kinds topologies are validated against and built with.
    pub registry: Registry,
    /// Where the traces of topology `id` go (the server: its trace store,
    /// through its metrics).
    pub sink_for: SinkFor,
    /// Hears how many topologies are served after each scan.
    pub on_scan: Box<dyn Fn(usize) + Send + Sync>,
    pub summary_chars: usize,
    /// Address ranges outbound calls may reach despite the deny list.
    pub outbound: Arc<ServerAllow>,
    /// The version promoted at start, per topology id (from the config);
    /// absent: the first version loaded.
    pub promoted: BTreeMap<String, String>,
    /// The cluster's dispatcher, when serving with a worker pool.
    pub cluster: Option<Arc<glassbox_nodes::cluster::Dispatcher>>,
}

/// The topology files of a directory and their bytes.
type Present = BTreeMap<PathBuf, Vec<u8>>;

/// The topologies of one directory.
pub struct Catalog {
    dir: PathBuf,
    builder: Builder,
    inner: RwLock<Inner>,
    /// One rescan at a time (the poller and `/v1/admin/reload`).
    scanning: Mutex<()>,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog").field("dir", &self.dir).finish()
    }
}

fn is_topology_file(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("json" | "yaml" | "yml")
    ) && path.is_file()
}

fn hash_of(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

impl Catalog {
    pub fn new(dir: PathBuf, builder: Builder) -> Catalog {
        Catalog {
            dir,
            builder,
            inner: RwLock::default(),
            scanning: Mutex::default(),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The node kinds served topologies use: ask it what a kind does
    /// (`streams_text`, `guards_output`, `embeds`) rather than its name.
    pub fn registry(&self) -> &Registry {
        &self.builder.registry
    }

    /// The promoted version of `id`.
    pub fn get(&self, id: &str) -> Option<Arc<Served>> {
        self.read().by_id.get(id)?.promoted().cloned()
    }

    /// The version of `id` a request with `key` gets, and why; without a
    /// key, `fallback` (e.g. the request id) draws the bucket.
    pub fn choose(&self, id: &str, key: Option<&RequestKey>, fallback: &str) -> Option<Chosen> {
        self.read().by_id.get(id)?.choose(id, key, fallback)
    }

    /// Every loaded version of `id` and the split (a snapshot).
    pub fn lineup(&self, id: &str) -> Option<Lineup> {
        self.read().by_id.get(id).cloned()
    }

    /// Changes the lineup of `id` with `f` (promote, roll back, split) and
    /// returns it as it is now. Takes effect for the next request; requests
    /// already running finish on the version they started with.
    pub fn change_lineup<T>(
        &self,
        id: &str,
        f: impl FnOnce(&mut Lineup) -> Result<T, VersionError>,
    ) -> Result<(T, Lineup), VersionError> {
        let mut inner = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        let lineup = inner
            .by_id
            .get_mut(id)
            .ok_or_else(|| VersionError::UnknownTopology { id: id.into() })?;
        let out = f(lineup)?;
        Ok((out, lineup.clone()))
    }

    /// Served topologies, by id: the promoted version of each.
    pub fn list(&self) -> Vec<Arc<Served>> {
        self.read()
            .by_id
            .values()
            .filter_map(|l| l.promoted().cloned())
            .collect()
    }

    /// Every served lineup, by id.
    pub fn lineups(&self) -> Vec<(String, Lineup)> {
        self.read()
            .by_id
            .iter()
            .map(|(id, l)| (id.clone(), l.clone()))
            .collect()
    }

    /// Files with a problem (invalid, or an edit that was rejected).
    pub fn problems(&self) -> Vec<FileProblem> {
        self.read()
            .files
            .values()
            .filter_map(|f| f.problem.clone())
            .collect()
    }

    pub fn ids(&self) -> Vec<String> {
        self.read().by_id.keys().cloned().collect()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Brings the catalog in line with the directory. Blocking (reads files,
    /// may load models): call it from a blocking thread.
    pub fn rescan(&self) -> Result<Vec<Change>, DirError> {
        let _one_at_a_time = self.scanning.lock().unwrap_or_else(PoisonError::into_inner);
        let present = self.read_dir()?;
        let mut changes = Vec::new();
        // Work out what changed under the read lock, build outside any lock.
        let (gone, changed): (Vec<PathBuf>, Vec<Edited>) = {
            let inner = self.read();
            let gone = inner
                .files
                .keys()
                .filter(|p| !present.contains_key(*p))
                .cloned()
                .collect();
            let changed = present
                .into_iter()
                .filter_map(|(p, bytes)| {
                    let h = hash_of(&bytes);
                    match inner.files.get(&p) {
                        Some(f) if f.hash == h => None,
                        _ => Some((p, bytes, h)),
                    }
                })
                .collect();
            (gone, changed)
        };
        let built: Vec<(PathBuf, u64, Result<Served, String>)> = changed
            .into_iter()
            .map(|(p, bytes, h)| {
                let r = self.build(&p, bytes, self.is_outside(&p));
                (p, h, r)
            })
            .collect();
        let mut inner = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        for path in gone {
            if let Some(state) = inner.files.remove(&path)
                && let Some((id, version)) = state.serves
                && unload(&mut inner.by_id, &id, &version)
            {
                changes.push(Change::Unloaded {
                    id,
                    version,
                    file: path,
                });
            }
        }
        for (path, hash, result) in built {
            let previous = inner.files.get(&path).and_then(|f| f.serves.clone());
            let served = match result {
                Ok(served) => served,
                Err(message) => {
                    reject(&mut inner, &mut changes, path, hash, previous, message);
                    continue;
                }
            };
            let id = served.topology.id.clone();
            let version = served.topology.version.clone();
            let owner = inner
                .by_id
                .get(&id)
                .and_then(|l| l.get(&version))
                .map(|s| s.file.clone());
            if let Some(owner) = owner.filter(|o| *o != path) {
                let message = format!(
                    "version `{version}` of topology `{id}` is already served from `{}`",
                    owner.display()
                );
                reject(&mut inner, &mut changes, path, hash, previous, message);
                continue;
            }
            let served = Arc::new(served);
            let mut replaced = None;
            match previous {
                // The same file, the same id: its version keeps its place.
                Some((old_id, old_version)) if old_id == id => {
                    if let Some(lineup) = inner.by_id.get_mut(&id) {
                        lineup.rename(&old_version, served.clone());
                    }
                    replaced = Some(old_version);
                }
                Some((old_id, old_version)) => {
                    unload(&mut inner.by_id, &old_id, &old_version);
                    replaced = Some(old_id);
                }
                None => {}
            }
            let promoted_at_start = self.builder.promoted.get(&id);
            let candidate = match inner.by_id.get_mut(&id) {
                Some(lineup) => {
                    lineup.insert(served.clone());
                    // The config's choice wins over "first loaded" once its
                    // version shows up (files load in name order).
                    if promoted_at_start == Some(&version)
                        && lineup.promoted_version() != version
                        && !lineup.ever_changed()
                    {
                        lineup.promote_at_start(&version);
                    }
                    lineup.promoted_version() != version
                }
                None => {
                    inner.by_id.insert(id.clone(), Lineup::new(served.clone()));
                    false
                }
            };
            changes.push(Change::Loaded {
                id: id.clone(),
                version: version.clone(),
                file: path.clone(),
                replaced,
                candidate,
            });
            inner.files.insert(
                path,
                FileState {
                    hash,
                    serves: Some((id, version)),
                    problem: None,
                },
            );
        }
        (self.builder.on_scan)(inner.by_id.len());
        Ok(changes)
    }

    /// The topology files of the directory and their bytes.
    fn read_dir(&self) -> Result<Present, DirError> {
        let entries = std::fs::read_dir(&self.dir).map_err(|source| DirError {
            path: self.dir.display().to_string(),
            source,
        })?;
        let mut present = Present::new();
        for entry in entries.flatten() {
            let path = entry.path();
            if !is_topology_file(&path) {
                continue;
            }
            // A file removed between listing and reading is simply gone.
            if let Ok(bytes) = std::fs::read(&path) {
                present.insert(path, bytes);
            }
        }
        Ok(present)
    }

    /// Whether `path` (a link, or in a linked folder) resolves to a file
    /// outside the topologies directory. Such a file may be anything (a
    /// secrets file): its diagnostics never quote it.
    fn is_outside(&self, path: &Path) -> bool {
        match (
            std::fs::canonicalize(path),
            std::fs::canonicalize(&self.dir),
        ) {
            (Ok(file), Ok(dir)) => !file.starts_with(dir),
            _ => true,
        }
    }

    fn build(&self, path: &Path, bytes: Vec<u8>, outside: bool) -> Result<Served, String> {
        let name = path.display().to_string();
        let text = String::from_utf8(bytes).map_err(|_| format!("`{name}` is not UTF-8"))?;
        let source = glassbox_topology::Source::new(name.clone(), text);
        // A calibration beside the file (`glassbox calibrate`) prices its nodes.
        let calibration = crate::calibration::beside(path, &mut |w| {
            crate::console::serve_line(format_args!("`{name}`: {w}"));
        });
        let options = |topology: &Topology, _: &glassbox_topology::Report| {
            let prices = crate::calibration::prices(calibration.as_ref(), topology, &mut |w| {
                crate::console::serve_line(format_args!("warning: {w}"));
            });
            let metered = (self.builder.sink_for)(topology.id.as_str());
            let sink = match &calibration {
                Some(c) => Arc::new(CalibratedSink::new(name.clone(), c.clone(), metered)),
                None => metered,
            };
            Ok::<_, Infallible>(PipelineOptions {
                prices,
                sink,
                worker: "server".into(),
                summary_chars: self.builder.summary_chars,
                ..PipelineOptions::default()
            })
        };
        let assembly = Assembly {
            registry: &self.builder.registry,
            options: &options,
            outbound: Some(self.builder.outbound.clone()),
            models: None,
            cluster: self.builder.cluster.clone(),
        };
        let assembled = match glassbox_nodes::assemble(TopologyInput::Source(source), &assembly) {
            Ok(a) => a,
            Err(AssembleError::Topology(TopologyError::Invalid(report))) if outside => {
                return Err(unquoted(&name, &report));
            }
            // Shown to read-scope keys: secret-bearing values masked.
            Err(AssembleError::Topology(TopologyError::Invalid(report))) => {
                return Err(report.masked().render(false));
            }
            Err(AssembleError::Topology(TopologyError::Io { path, source })) => {
                return Err(format!("cannot read `{path}`: {source}"));
            }
            Err(AssembleError::Options(never)) => match never {},
            Err(AssembleError::Build(err)) => {
                let lines: Vec<String> = err
                    .errors
                    .iter()
                    .map(|e| format!("  {}", mask_text(&e.to_string())))
                    .collect();
                return Err(format!(
                    "`{name}`: the pipeline cannot be built:\n{}",
                    lines.join("\n")
                ));
            }
        };
        let (topology, pipeline) = (assembled.topology, assembled.pipeline);
        let registry = &self.builder.registry;
        Ok(Served {
            stream: stream_mode(&topology, registry),
            embeds: embeds(&topology, registry),
            topology,
            pipeline,
            file: path.to_path_buf(),
            loaded_at_us: glassbox_trace::unix_micros_now(),
        })
    }
}

/// Drops `version` of `id`; true when it was served.
/// A file that cannot be served: its problem is recorded and reported, and
/// whatever it served before stays served.
fn reject(
    inner: &mut Inner,
    changes: &mut Vec<Change>,
    path: PathBuf,
    hash: u64,
    previous: Option<(String, String)>,
    message: String,
) {
    let problem = FileProblem {
        file: path.clone(),
        message,
        still_serving: previous.as_ref().map(|(id, _)| id.clone()),
    };
    changes.push(Change::Rejected(problem.clone()));
    inner.files.insert(
        path,
        FileState {
            hash,
            serves: previous,
            problem: Some(problem),
        },
    );
}

fn unload(by_id: &mut BTreeMap<String, Lineup>, id: &str, version: &str) -> bool {
    let Some(lineup) = by_id.get_mut(id) else {
        return false;
    };
    if lineup.get(version).is_none() {
        return false;
    }
    if !lineup.remove(version) {
        by_id.remove(id);
    }
    true
}

/// The problems of a file outside the topologies directory: codes and
/// locations only, no message or line that could quote its contents.
fn unquoted(name: &str, report: &glassbox_topology::Report) -> String {
    let items: Vec<String> = report
        .diagnostics
        .iter()
        .map(|d| {
            format!(
                "  {}[{}] at {}",
                if d.is_error() { "error" } else { "warning" },
                d.code.as_str(),
                report.location(d)
            )
        })
        .collect();
    format!(
        "`{name}` is not a valid topology; it resolves to a file outside the topologies directory, so its contents are not quoted (run `glassbox validate` on it to see them):\n{}",
        items.join("\n")
    )
}

#[cfg(test)]
mod tests;
