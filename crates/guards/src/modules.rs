//! A crate target's modules as rustc sees them: `mod name;` found at
//! `name.rs` or `name/mod.rs` (or its `#[path]`), inline `mod name { … }`
//! blocks, and for each module the names it defines, the `use` declarations
//! it makes and every path its code names (macro arguments included).
//!
//! Test code stays out: a module or item under `#[cfg(test)]` is not part of
//! the graph (tests may reach anywhere), but the files such modules live in
//! are recorded, so the size guard knows they are test code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

use crate::{GuardError, read};

/// Index of a module in [`Tree::modules`].
pub type ModuleId = usize;

/// One `use` binding: `use a::b::c as d;` binds `d` to `[a, b, c]`.
#[derive(Debug, Clone)]
pub struct UseBinding {
    /// The bound name, or `*` for a glob.
    pub name: String,
    /// The full path as written (for a glob, the module's path).
    pub path: Vec<String>,
    /// `pub`, `pub(crate)`, …: a re-export others may name.
    pub public: bool,
    /// Where it is written.
    pub line: usize,
}

/// A path named in code: `crate::a::B::new`, `super::x`, `Thing`.
#[derive(Debug, Clone)]
pub struct CodePath {
    /// Its segments.
    pub segments: Vec<String>,
    /// Where it is written.
    pub line: usize,
}

/// One module.
#[derive(Debug, Clone)]
pub struct Module {
    /// `crate::a::b` as segments (the root is `["crate"]`).
    pub path: Vec<String>,
    /// The file its items are written in.
    pub file: PathBuf,
    /// The enclosing module (none for the root).
    pub parent: Option<ModuleId>,
    /// Child modules by name.
    pub children: BTreeMap<String, ModuleId>,
    /// Items it defines (types, functions, traits, constants, macros).
    pub defines: BTreeSet<String>,
    /// Its `use` declarations.
    pub uses: Vec<UseBinding>,
    /// Paths its code names.
    pub code_paths: Vec<CodePath>,
}

impl Module {
    /// `crate::a::b`.
    pub fn name(&self) -> String {
        self.path.join("::")
    }
}

/// Every module of one crate target.
#[derive(Debug, Clone)]
pub struct Tree {
    /// The root file (`src/lib.rs`, `src/main.rs`, an example, …).
    pub root_file: PathBuf,
    /// Modules; index 0 is the root.
    pub modules: Vec<Module>,
    /// Files reached only through `#[cfg(test)]` module declarations.
    pub test_files: BTreeSet<PathBuf>,
}

impl Tree {
    /// Reads the target whose root file is `root`.
    pub fn read(root: &Path) -> Result<Self, GuardError> {
        let mut tree = Tree {
            root_file: root.to_path_buf(),
            modules: Vec::new(),
            test_files: BTreeSet::new(),
        };
        let dir = root.parent().map_or_else(PathBuf::new, Path::to_path_buf);
        tree.add_file(None, "crate".into(), root, dir)?;
        Ok(tree)
    }

    /// Every file this target compiles outside tests.
    pub fn files(&self) -> BTreeSet<PathBuf> {
        self.modules.iter().map(|m| m.file.clone()).collect()
    }

    fn new_module(&mut self, parent: Option<ModuleId>, name: String, file: &Path) -> ModuleId {
        let mut path = parent.map_or_else(Vec::new, |p| self.modules[p].path.clone());
        path.push(name.clone());
        let id = self.modules.len();
        self.modules.push(Module {
            path,
            file: file.to_path_buf(),
            parent,
            children: BTreeMap::new(),
            defines: BTreeSet::new(),
            uses: Vec::new(),
            code_paths: Vec::new(),
        });
        if let Some(p) = parent {
            self.modules[p].children.insert(name, id);
        }
        id
    }

    /// Adds the module written in `file`; `dir` is where its `mod x;`
    /// children are looked for.
    fn add_file(
        &mut self,
        parent: Option<ModuleId>,
        name: String,
        file: &Path,
        dir: PathBuf,
    ) -> Result<(), GuardError> {
        let text = read(file)?;
        let parsed = syn::parse_file(&text).map_err(|e| {
            let start = e.span().start();
            GuardError::Parse {
                path: file.to_path_buf(),
                line: start.line,
                column: start.column + 1,
                message: e.to_string(),
            }
        })?;
        let id = self.new_module(parent, name, file);
        self.add_items(id, file, &dir, &parsed.items)
    }

    fn add_items(
        &mut self,
        id: ModuleId,
        file: &Path,
        dir: &Path,
        items: &[syn::Item],
    ) -> Result<(), GuardError> {
        for item in items {
            if let syn::Item::Mod(m) = item {
                self.add_mod(id, file, dir, m)?;
                continue;
            }
            if is_test_only(item_attrs(item)) {
                continue;
            }
            let module = &mut self.modules[id];
            match item {
                syn::Item::Use(u) => {
                    let public = !matches!(u.vis, syn::Visibility::Inherited);
                    let line = u.use_token.span.start().line;
                    flatten_use(&u.tree, &mut Vec::new(), public, line, &mut module.uses);
                }
                other => {
                    if let Some(name) = defined_name(other) {
                        module.defines.insert(name);
                    }
                    let mut collector = PathCollector::default();
                    collector.visit_item(other);
                    module.code_paths.extend(collector.paths);
                }
            }
        }
        Ok(())
    }

    fn add_mod(
        &mut self,
        parent: ModuleId,
        file: &Path,
        dir: &Path,
        m: &syn::ItemMod,
    ) -> Result<(), GuardError> {
        let name = m.ident.to_string();
        let test = is_test_only(&m.attrs);
        if let Some((_, items)) = &m.content {
            if test {
                return Ok(());
            }
            let id = self.new_module(Some(parent), name.clone(), file);
            return self.add_items(id, file, &dir.join(&name), items);
        }
        let target = match path_attr(&m.attrs) {
            Some(relative) => {
                let base = file.parent().unwrap_or(Path::new(""));
                vec![base.join(relative)]
            }
            None => vec![
                dir.join(format!("{name}.rs")),
                dir.join(&name).join("mod.rs"),
            ],
        };
        let Some(found) = target.iter().find(|p| p.is_file()).cloned() else {
            return Err(GuardError::MissingModule {
                path: file.to_path_buf(),
                name,
                looked: target
                    .iter()
                    .map(|p| format!("`{}`", p.display()))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        if test {
            self.test_files.insert(found);
            return Ok(());
        }
        let is_mod_rs = found.file_name().is_some_and(|f| f == "mod.rs");
        let child_dir = if is_mod_rs {
            found.parent().map_or_else(PathBuf::new, Path::to_path_buf)
        } else {
            found.with_extension("")
        };
        self.add_file(Some(parent), name, &found, child_dir)
    }
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::ExternCrate(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::ForeignMod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::TraitAlias(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

fn defined_name(item: &syn::Item) -> Option<String> {
    let ident = match item {
        syn::Item::Const(i) => &i.ident,
        syn::Item::Enum(i) => &i.ident,
        syn::Item::Fn(i) => &i.sig.ident,
        syn::Item::Static(i) => &i.ident,
        syn::Item::Struct(i) => &i.ident,
        syn::Item::Trait(i) => &i.ident,
        syn::Item::TraitAlias(i) => &i.ident,
        syn::Item::Type(i) => &i.ident,
        syn::Item::Union(i) => &i.ident,
        syn::Item::Macro(i) => i.ident.as_ref()?,
        _ => return None,
    };
    Some(ident.to_string())
}

/// `#[cfg(test)]` or `#[cfg(all(test, …))]`.
fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        if !attr.path().is_ident("cfg") {
            return false;
        }
        let Ok(list) = attr.meta.require_list() else {
            return false;
        };
        let tokens: String = list
            .tokens
            .to_string()
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        tokens == "test" || tokens.starts_with("all(test,")
    })
}

/// The value of `#[path = "…"]`.
fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|attr| {
        if !attr.path().is_ident("path") {
            return None;
        }
        let nv = attr.meta.require_name_value().ok()?;
        match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        }
    })
}

fn flatten_use(
    tree: &syn::UseTree,
    prefix: &mut Vec<String>,
    public: bool,
    line: usize,
    out: &mut Vec<UseBinding>,
) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten_use(&p.tree, prefix, public, line, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            let mut path = prefix.clone();
            // `use a::b::{self}` binds `b`.
            if name != "self" {
                path.push(name.clone());
            }
            let bound = path.last().cloned().unwrap_or(name);
            out.push(UseBinding {
                name: bound,
                path,
                public,
                line,
            });
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            out.push(UseBinding {
                name: r.rename.to_string(),
                path,
                public,
                line,
            });
        }
        syn::UseTree::Glob(_) => out.push(UseBinding {
            name: "*".into(),
            path: prefix.clone(),
            public,
            line,
        }),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten_use(t, prefix, public, line, out);
            }
        }
    }
}

/// Collects every path in an item: types, expressions, patterns, trait
/// bounds, attributes' paths, and `a::b::c` token runs inside macro calls
/// (whose arguments syn leaves unparsed).
#[derive(Default)]
struct PathCollector {
    paths: Vec<CodePath>,
}

impl<'ast> Visit<'ast> for PathCollector {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        if let Some(first) = path.segments.first() {
            self.paths.push(CodePath {
                segments: path.segments.iter().map(|s| s.ident.to_string()).collect(),
                line: first.ident.span().start().line,
            });
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        token_paths(mac.tokens.clone(), &mut self.paths);
    }

    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {
        // `pub(crate)`, `pub(in crate::a)`: scopes, not imports.
    }

    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {
        // Modules nested in function bodies are rare and not part of the
        // tree; their paths would be resolved in the wrong place.
    }
}

/// `ident (:: ident)*` runs in a token stream (a leading `::` is an
/// external path and skipped).
fn token_paths(tokens: TokenStream, out: &mut Vec<CodePath>) {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < trees.len() {
        match &trees[i] {
            TokenTree::Group(g) => {
                token_paths(g.stream(), out);
                i += 1;
            }
            TokenTree::Ident(ident) => {
                let preceded_by_colons =
                    i >= 2 && is_colon(&trees[i - 1]) && is_colon(&trees[i - 2]);
                let mut segments = vec![ident.to_string()];
                let line = ident.span().start().line;
                let mut j = i + 1;
                while j + 2 < trees.len() && is_colon(&trees[j]) && is_colon(&trees[j + 1]) {
                    match &trees[j + 2] {
                        TokenTree::Ident(next) => {
                            segments.push(next.to_string());
                            j += 3;
                        }
                        _ => break,
                    }
                }
                if !preceded_by_colons {
                    out.push(CodePath { segments, line });
                }
                i = j;
            }
            TokenTree::Punct(_) | TokenTree::Literal(_) => i += 1,
        }
    }
}

fn is_colon(tree: &TokenTree) -> bool {
    matches!(tree, TokenTree::Punct(p) if p.as_char() == ':')
}
