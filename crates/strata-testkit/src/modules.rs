//! Import cycles between the modules of one crate. Each source file is a module; a module
//! depends on another when its non-test code names it by path (`use crate::a::B`,
//! `super::x::f()`, `child::T`). Naming an ancestor (`super::X`, `crate::Result`) does not
//! count: a module's own parents are its context, not a sibling it can tangle with. A
//! strongly connected group of two or more modules is a cycle: shared types belong in a
//! leaf module the others import.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// A module, as the names from the crate root (`[]` is the root, `["group", "serve"]` is
/// `src/group/serve.rs`).
type ModPath = Vec<String>;

/// Why the modules of a crate could not be read.
#[derive(Debug)]
pub enum ModuleError {
    /// A source file or directory could not be read.
    Read(PathBuf, std::io::Error),
    /// A source file is not valid Rust.
    Parse(PathBuf, syn::Error),
}

impl std::fmt::Display for ModuleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModuleError::Read(p, e) => write!(f, "read {}: {e}", p.display()),
            ModuleError::Parse(p, e) => write!(f, "parse {}: {e}", p.display()),
        }
    }
}

impl std::error::Error for ModuleError {}

/// Every import cycle among the modules of the crate whose sources are in `src` (its
/// `src/bin/` programs are crates of their own and left out). Each cycle lists its
/// modules by path (`lib` for the root), sorted; the cycles are sorted too.
pub fn module_cycles(src: &Path) -> Result<Vec<Vec<String>>, ModuleError> {
    let files = source_files(src)?;
    let mut edges: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for (module, file) in &files {
        let text = std::fs::read_to_string(file).map_err(|e| ModuleError::Read(file.clone(), e))?;
        let ast = syn::parse_file(&text).map_err(|e| ModuleError::Parse(file.clone(), e))?;
        let mut names = Names::default();
        names.visit_file(&ast);
        let targets = names
            .paths
            .iter()
            .filter_map(|p| resolve(module, &names.children, p))
            .filter_map(|p| owning_file(&files, &p))
            .filter(|t| !module.starts_with(t))
            .collect();
        edges.insert(module.clone(), targets);
    }
    let mut cycles: Vec<Vec<String>> = strongly_connected(&edges)
        .into_iter()
        .filter(|group| group.len() > 1)
        .map(|group| {
            let mut names: Vec<String> = group.iter().map(|m| display(m)).collect();
            names.sort();
            names
        })
        .collect();
    cycles.sort();
    Ok(cycles)
}

fn display(module: &[String]) -> String {
    if module.is_empty() {
        "lib".to_string()
    } else {
        module.join("/")
    }
}

/// The crate's source files by module path.
fn source_files(src: &Path) -> Result<BTreeMap<ModPath, PathBuf>, ModuleError> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![(src.to_path_buf(), Vec::<String>::new())];
    let has_lib = src.join("lib.rs").exists();
    while let Some((dir, prefix)) = dirs.pop() {
        let read = std::fs::read_dir(&dir).map_err(|e| ModuleError::Read(dir.clone(), e))?;
        for entry in read {
            let entry = entry.map_err(|e| ModuleError::Read(dir.clone(), e))?;
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !(prefix.is_empty() && name == "bin") {
                    let mut sub = prefix.clone();
                    sub.push(name);
                    dirs.push((path, sub));
                }
                continue;
            }
            let Some(stem) = name.strip_suffix(".rs") else {
                continue;
            };
            let at_root = prefix.is_empty();
            let module = match stem {
                "lib" if at_root => prefix.clone(),
                "main" if at_root && has_lib => continue,
                "main" if at_root => prefix.clone(),
                "mod" => prefix.clone(),
                _ => [prefix.clone(), vec![stem.to_string()]].concat(),
            };
            out.insert(module, path);
        }
    }
    Ok(out)
}

/// What one file names: the paths of its non-test code and the child modules it declares.
#[derive(Default)]
struct Names {
    paths: Vec<Vec<String>>,
    children: BTreeSet<String>,
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

impl<'ast> Visit<'ast> for Names {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Enum(e) => &e.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Static(s) => &s.attrs,
            syn::Item::Trait(t) => &t.attrs,
            syn::Item::Type(t) => &t.attrs,
            _ => &[],
        };
        if is_test_only(attrs) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if item.content.is_none() {
            self.children.insert(item.ident.to_string());
        }
        syn::visit::visit_item_mod(self, item);
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        flatten_use(&item.tree, &mut Vec::new(), &mut self.paths);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() {
            self.paths
                .push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        syn::visit::visit_path(self, path);
    }
}

/// Every path a `use` tree names (a glob or a group's `self` names its prefix).
fn flatten_use(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten_use(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) if n.ident == "self" => out.push(prefix.clone()),
        syn::UseTree::Name(n) => out.push([prefix.clone(), vec![n.ident.to_string()]].concat()),
        syn::UseTree::Rename(r) => out.push([prefix.clone(), vec![r.ident.to_string()]].concat()),
        syn::UseTree::Glob(_) => out.push(prefix.clone()),
        syn::UseTree::Group(g) => {
            for item in &g.items {
                flatten_use(item, prefix, out);
            }
        }
    }
}

/// `path` as written in `module` (which declares `children`), from the crate root; `None`
/// when it starts elsewhere (another crate, a local name).
fn resolve(module: &[String], children: &BTreeSet<String>, path: &[String]) -> Option<ModPath> {
    let (first, rest) = path.split_first()?;
    let mut at: ModPath = match first.as_str() {
        "crate" => Vec::new(),
        "self" => module.to_vec(),
        "super" => module.get(..module.len().checked_sub(1)?)?.to_vec(),
        child if children.contains(child) => [module, &[child.to_string()]].concat(),
        _ => return None,
    };
    let mut rest = rest.iter().peekable();
    while rest.peek().is_some_and(|s| *s == "super") {
        rest.next();
        at.pop()?;
    }
    at.extend(rest.cloned());
    Some(at)
}

/// The module whose file defines `path`: its longest prefix that is a file.
fn owning_file(files: &BTreeMap<ModPath, PathBuf>, path: &[String]) -> Option<ModPath> {
    (0..=path.len())
        .rev()
        .map(|n| &path[..n])
        .find(|p| files.contains_key(*p))
        .map(<[String]>::to_vec)
}

/// Tarjan's strongly connected components of `edges`.
fn strongly_connected(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    struct State<'a> {
        edges: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'a ModPath, usize>,
        low: BTreeMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on_stack: BTreeSet<&'a ModPath>,
        out: Vec<Vec<ModPath>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a ModPath) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut group = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                group.push(w.clone());
                if w == v {
                    break;
                }
            }
            s.out.push(group);
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !state.index.contains_key(v) {
            visit(&mut state, v);
        }
    }
    state.out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn write(dir: &Path, files: &[(&str, &str)]) {
        for (name, text) in files {
            let path = dir.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
    }

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("strata-modules-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn sibling_cycles_are_found_through_every_kind_of_path() {
        let dir = temp_dir("cycle");
        write(
            &dir,
            &[
                (
                    "lib.rs",
                    "mod a; mod b; mod c; mod group; pub type Result = ();",
                ),
                // a -> b by `use crate::`, b -> c by a path in a type, c -> a by `super::`
                // (from c's point of view `crate` is its parent).
                (
                    "a.rs",
                    "use crate::b::B; pub struct A; fn f(_: crate::Result) {}",
                ),
                ("b.rs", "pub struct B(crate::c::C);"),
                ("c.rs", "pub struct C; fn g() { let _ = super::a::A; }"),
                // group -> group/serve through a child path; serve -> a; a is not in
                // group's cycle (a does not name group).
                ("group/mod.rs", "mod serve; fn h() { serve::run(); }"),
                (
                    "group/serve.rs",
                    "pub fn run() { let _ = crate::a::A; let _ = super::super::c::C; }",
                ),
            ],
        );
        assert_eq!(
            module_cycles(&dir).unwrap(),
            vec![vec!["a".to_string(), "b".to_string(), "c".to_string()]]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn ancestors_tests_and_bins_do_not_make_cycles() {
        let dir = temp_dir("clean");
        write(
            &dir,
            &[
                (
                    "lib.rs",
                    "pub mod group; pub use group::Group; pub struct Shared;",
                ),
                (
                    "group/mod.rs",
                    "mod serve; pub struct Group; fn f() { serve::run(); }",
                ),
                // A child naming its parent and the root is not a cycle.
                (
                    "group/serve.rs",
                    "use super::Group; pub fn run() { let _ = crate::Shared; }",
                ),
                // Test code may name anything.
                (
                    "leaf.rs",
                    "#[cfg(test)] mod tests { use crate::group::Group; }",
                ),
                ("bin/tool.rs", "use crate::leaf; fn main() {}"),
            ],
        );
        assert_eq!(module_cycles(&dir).unwrap(), Vec::<Vec<String>>::new());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_that_is_not_rust_is_an_error() {
        let dir = temp_dir("bad");
        write(&dir, &[("lib.rs", "fn {")]);
        assert!(matches!(module_cycles(&dir), Err(ModuleError::Parse(..))));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
