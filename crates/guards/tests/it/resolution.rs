//! The guards on small crates written to a temporary folder: the circles
//! they must find (nested modules, `super::`, `self::`, `crate::`, macro
//! arguments, re-exports) and the shapes that are no circle.

use std::path::Path;

use glassbox_guards::{cycles, imports, modules, sizes, workspace};

fn write(dir: &Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// Each circle as `a → b → a` module names.
fn circles(files: &[(&str, &str)]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), files);
    let tree = modules::Tree::read(&dir.path().join("src/lib.rs")).unwrap();
    let edges = imports::edges(&tree);
    cycles::find(tree.modules.len(), &edges)
        .iter()
        .map(|c| {
            let mut names: Vec<String> = c
                .steps
                .iter()
                .map(|s| tree.modules[s.from].name())
                .collect();
            names.push(tree.modules[c.steps[0].from].name());
            names.join(" → ")
        })
        .collect()
}

#[test]
fn a_circle_through_crate_paths_is_found() {
    let found = circles(&[
        ("src/lib.rs", "mod a;\nmod b;\n"),
        ("src/a.rs", "use crate::b::B;\npub struct A(B);\n"),
        (
            "src/b.rs",
            "pub struct B;\npub fn f() -> crate::a::A { todo!() }\n",
        ),
    ]);
    assert_eq!(found, ["crate::a → crate::b → crate::a"]);
}

#[test]
fn a_circle_between_nested_modules_through_super_is_found() {
    let found = circles(&[
        ("src/lib.rs", "mod outer;\n"),
        (
            "src/outer/mod.rs",
            "mod inner;\npub struct Shared;\nfn g() { inner::f(); }\n",
        ),
        (
            "src/outer/inner.rs",
            "pub fn f() { let _ = super::Shared; }\n",
        ),
    ]);
    assert_eq!(found, ["crate::outer → crate::outer::inner → crate::outer"]);
}

#[test]
fn a_circle_inside_one_file_and_in_macro_arguments_is_found() {
    let found = circles(&[(
        "src/lib.rs",
        "mod x { pub fn f() { println!(\"{}\", super::y::G); } pub const H: u8 = self::K; const K: u8 = 1; }\n\
         mod y { pub const G: u8 = super::x::H; }\n",
    )]);
    assert_eq!(found, ["crate::x → crate::y → crate::x"]);
}

#[test]
fn a_re_export_is_followed_to_where_the_item_lives() {
    // `b` names `crate::A`, which the root only re-exports from `a`: the
    // import is of `a`, and `a` imports `b`: a circle that skips the root.
    let found = circles(&[
        ("src/lib.rs", "mod a;\nmod b;\npub use a::A;\n"),
        ("src/a.rs", "pub struct A;\nfn f() { crate::b::g(); }\n"),
        ("src/b.rs", "pub fn g() { let _ = crate::A; }\n"),
    ]);
    assert_eq!(found, ["crate::a → crate::b → crate::a"]);
}

#[test]
fn one_way_imports_and_test_modules_make_no_circle() {
    let found = circles(&[
        ("src/lib.rs", "mod a;\nmod b;\npub use a::A;\n"),
        (
            "src/a.rs",
            "pub struct A;\n#[cfg(test)]\nmod tests { use crate::b::g; }\n",
        ),
        ("src/b.rs", "use crate::a::A;\npub fn g() -> A { A }\n"),
    ]);
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn only_files_declared_under_cfg_test_are_test_code() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            ("Cargo.toml", "[package]\nname = \"glassbox-x\"\n"),
            (
                "src/lib.rs",
                "mod a;\n#[cfg(test)]\n#[path = \"a_tests.rs\"]\nmod a_tests;\n",
            ),
            ("src/a.rs", "pub struct A;\n"),
            ("src/a_tests.rs", "#[test]\nfn t() {}\n"),
            ("src/stray.rs", "// reached by no `mod`\n"),
        ],
    );
    let member = workspace::Member {
        name: "glassbox-x".into(),
        dir: dir.path().to_path_buf(),
        deps: Default::default(),
    };
    let files = sizes::files(&member).unwrap();
    let names = |set: &std::collections::BTreeSet<std::path::PathBuf>| {
        set.iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&files.code), ["a.rs", "lib.rs", "stray.rs"]);
    assert_eq!(names(&files.test_only), ["a_tests.rs"]);
}

#[test]
fn a_circle_between_files_through_an_inline_module_is_found() {
    // Module by module there is no circle (`b` imports `a::inner`, which
    // imports nothing), but `a.rs` and `b.rs` need each other.
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            ("src/lib.rs", "mod a;\nmod b;\n"),
            (
                "src/a.rs",
                "pub mod inner { pub const K: u8 = 1; }\npub fn f() -> u8 { crate::b::G }\n",
            ),
            ("src/b.rs", "pub const G: u8 = crate::a::inner::K;\n"),
        ],
    );
    let tree = modules::Tree::read(&dir.path().join("src/lib.rs")).unwrap();
    assert!(cycles::find(tree.modules.len(), &imports::edges(&tree)).is_empty());
    let report = cycles::report(&tree, dir.path());
    assert_eq!(report.len(), 1, "{report:?}");
    assert!(report[0].contains("src/a.rs → src/b.rs"), "{}", report[0]);
    assert!(report[0].contains("src/b.rs → src/a.rs"), "{}", report[0]);
}

#[test]
fn a_lone_name_that_matches_a_child_module_is_no_import() {
    // `edges` in the parent is a variable; the child imports the parent.
    let found = circles(&[
        ("src/lib.rs", "mod check;\n"),
        (
            "src/check/mod.rs",
            "mod edges;\npub struct Checker;\nfn f(c: Checker) { let edges = 1; let _ = (c, edges); }\n",
        ),
        (
            "src/check/edges.rs",
            "use super::Checker;\npub fn g(_: Checker) {}\n",
        ),
    ]);
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn names_a_public_glob_brings_in_are_imports() {
    let found = circles(&[
        ("src/lib.rs", "mod a;\nmod b;\n"),
        (
            "src/a.rs",
            "pub use crate::b::*;\npub struct A;\nfn f() -> B { B }\n",
        ),
        (
            "src/b.rs",
            "pub struct B;\nfn g() -> crate::a::A { crate::a::A }\n",
        ),
    ]);
    assert_eq!(found, ["crate::a → crate::b → crate::a"]);
}
