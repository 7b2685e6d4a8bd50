//! Import circles: the strongly connected components of the module graph,
//! or of the file graph drawn from it (Tarjan), each shown as one shortest circle with the line behind every
//! step, and the other modules caught in the same knot.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::imports::Edge;
use crate::modules::{ModuleId, Tree};

/// One knot of modules that import each other.
#[derive(Debug, Clone)]
pub struct Circle {
    /// A shortest circle through the knot's first module: each edge's `to`
    /// is the next edge's `from`, and the last returns to the first.
    pub steps: Vec<Edge>,
    /// Every module in the knot.
    pub members: Vec<ModuleId>,
}

impl Circle {
    /// `a → b → a`, one step a line, with `file:line` and the path that
    /// makes the import; `root` shortens file names.
    pub fn render(&self, tree: &Tree, root: &Path) -> String {
        self.render_with(root, |m| tree.modules[m].name(), |m| &tree.modules[m].file)
    }

    /// The same for a circle among files ([`crate::imports::file_edges`]).
    pub fn render_files(&self, files: &[PathBuf], root: &Path) -> String {
        let short = |f: usize| {
            let file = &files[f];
            file.strip_prefix(root)
                .unwrap_or(file)
                .display()
                .to_string()
        };
        self.render_with(root, short, |f| &files[f])
    }

    fn render_with<'a>(
        &self,
        root: &Path,
        name: impl Fn(usize) -> String,
        file: impl Fn(usize) -> &'a Path,
    ) -> String {
        let mut out = String::new();
        for step in &self.steps {
            let from = file(step.from);
            let from = from.strip_prefix(root).unwrap_or(from);
            let _ = writeln!(
                out,
                "  {} → {}   ({}:{} `{}`)",
                name(step.from),
                name(step.to),
                from.display(),
                step.line,
                step.via
            );
        }
        if self.members.len() > self.steps.len() {
            let names: Vec<String> = self.members.iter().map(|&m| name(m)).collect();
            let _ = writeln!(out, "  knot of {}: {}", names.len(), names.join(", "));
        }
        out
    }
}

/// Every circle among `edges` over nodes `0..count` (modules or files).
pub fn find(count: usize, edges: &[Edge]) -> Vec<Circle> {
    let mut out: BTreeMap<ModuleId, Vec<&Edge>> = BTreeMap::new();
    for edge in edges {
        out.entry(edge.from).or_default().push(edge);
    }
    let components = strongly_connected(count, &out);
    components
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|mut members| {
            members.sort_unstable();
            let steps = shortest_circle(members[0], &members, &out);
            Circle { steps, members }
        })
        .collect()
}

fn strongly_connected(n: usize, out: &BTreeMap<ModuleId, Vec<&Edge>>) -> Vec<Vec<ModuleId>> {
    // Iterative Tarjan: no recursion depth limits on deep module trees.
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut next = 0;
    let mut components = Vec::new();
    let empty = Vec::new();
    for start in 0..n {
        if index[start] != usize::MAX {
            continue;
        }
        let mut work: Vec<(ModuleId, usize)> = vec![(start, 0)];
        index[start] = next;
        low[start] = next;
        next += 1;
        stack.push(start);
        on_stack[start] = true;
        while let Some(top) = work.last_mut() {
            let (v, i) = *top;
            let successors = out.get(&v).unwrap_or(&empty);
            if i < successors.len() {
                top.1 += 1;
                let w = successors[i].to;
                if index[w] == usize::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                components.push(component);
            }
        }
    }
    components
}

/// Breadth-first from `start` back to itself, inside the knot.
fn shortest_circle<'a>(
    start: ModuleId,
    members: &[ModuleId],
    out: &BTreeMap<ModuleId, Vec<&'a Edge>>,
) -> Vec<Edge> {
    let mut came_by: BTreeMap<ModuleId, &'a Edge> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &edge in out.get(&v).map(Vec::as_slice).unwrap_or(&[]) {
            if members.binary_search(&edge.to).is_err() {
                continue;
            }
            if edge.to == start {
                let mut steps = vec![edge.clone()];
                let mut at = v;
                while at != start {
                    let Some(prev) = came_by.get(&at) else { break };
                    steps.push((*prev).clone());
                    at = prev.from;
                }
                steps.reverse();
                return steps;
            }
            if edge.to != start && !came_by.contains_key(&edge.to) {
                came_by.insert(edge.to, edge);
                queue.push_back(edge.to);
            }
        }
    }
    Vec::new()
}

/// Every circle of one crate target, rendered: among its modules, then
/// among its files where that shows a circle the modules do not.
pub fn report(tree: &Tree, root: &Path) -> Vec<String> {
    let edges = crate::imports::edges(tree);
    let module_circles = find(tree.modules.len(), &edges);
    let mut covered: Vec<std::collections::BTreeSet<&Path>> = Vec::new();
    let mut out = Vec::new();
    for circle in &module_circles {
        covered.push(
            circle
                .members
                .iter()
                .map(|&m| tree.modules[m].file.as_path())
                .collect(),
        );
        out.push(circle.render(tree, root));
    }
    let (files, file_edges) = crate::imports::file_edges(tree, &edges);
    for circle in find(files.len(), &file_edges) {
        let set: std::collections::BTreeSet<&Path> =
            circle.members.iter().map(|&f| files[f].as_path()).collect();
        if !covered.contains(&set) {
            out.push(format!(
                "(between files)\n{}",
                circle.render_files(&files, root)
            ));
        }
    }
    out
}
