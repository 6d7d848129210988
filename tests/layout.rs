//! The root crate's modules import downward only: no module of `src/` reaches,
//! through `crate::` paths in its non-test code, a module that reaches it back.
//! Read from the sources (a module is `src/NAME.rs` with `src/NAME/`; its `tests.rs`
//! files and `src/testing.rs` are test code and not counted). And pause semantics
//! (`signals`) import only the ground floor: the modules that import no other and do
//! not name the `kube` crate (taken for a module, `kube`: API access).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each module of `src/` and the other modules its non-test code names (and `kube`, a
/// module of its own here, when it names the kube crate).
fn imports(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read src/") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(src).expect("under src/");
        let module = rel.iter().next().expect("a file").to_string_lossy();
        let module = module.trim_end_matches(".rs").to_string();
        let test_only = rel.ends_with("tests.rs") || module == "testing";
        // The binaries (`main.rs`, `bin/`) and `lib.rs` stand above every module.
        if test_only || ["lib", "main", "bin"].contains(&module.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("read a module");
        let deps = graph.entry(module.clone()).or_default();
        for name in crate_paths(&text) {
            if name != module {
                deps.insert(name);
            }
        }
        if text.contains("kube::") {
            deps.insert("kube".into());
        }
    }
    graph.insert("kube".into(), BTreeSet::new());
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for deps in graph.values_mut() {
        deps.retain(|d| modules.contains(d));
    }
    graph
}

/// The first segment of every `crate::` path in `text`, `use crate::{a, b::c}` groups
/// included.
fn crate_paths(text: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut names = Vec::new();
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
        match rest.strip_prefix('{') {
            Some(group) => {
                let group = &group[..group.find('}').unwrap_or(group.len())];
                names.extend(group.split(',').map(|p| ident(p.trim())));
            }
            None => names.push(ident(rest)),
        }
    }
    names.retain(|n| !n.is_empty());
    names
}

/// A cycle of `graph`, if it has one, as the modules along it.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        graph: &BTreeMap<String, BTreeSet<String>>,
        module: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|m| m == module) {
            let mut found = path[at..].to_vec();
            found.push(module.to_string());
            return Some(found);
        }
        if !done.insert(module.to_string()) {
            return None;
        }
        path.push(module.to_string());
        for dep in &graph[module] {
            if let Some(found) = visit(graph, dep, path, done) {
                return Some(found);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|m| visit(graph, m, &mut Vec::new(), &mut done))
}

#[test]
fn the_modules_import_downward_only() {
    let graph = imports(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    // The agent names most of the others: the graph is read, not empty.
    assert!(graph["agent"].contains("watch"), "{graph:?}");
    assert_eq!(
        cycle(&graph),
        None,
        "an import cycle between modules of src/"
    );
}

/// The ground floor: the modules whose non-test code names no other module (nor
/// `kube`, which is no ground).
fn ground_floor(graph: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<String> {
    let leaves = graph
        .iter()
        .filter(|(m, deps)| deps.is_empty() && *m != "kube");
    leaves.map(|(m, _)| m.clone()).collect()
}

/// What `module` names above the ground floor.
fn above_the_ground_floor(graph: &BTreeMap<String, BTreeSet<String>>, module: &str) -> Vec<String> {
    let ground = ground_floor(graph);
    graph[module].difference(&ground).cloned().collect()
}

/// Pause semantics (`signals`) stand on the ground floor: no client, no API access, no
/// mode can keep a placeholder from pausing and exiting on SIGTERM.
#[test]
fn pause_semantics_import_only_the_ground_floor() {
    let graph = imports(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(
        graph.contains_key("signals") && graph["connect"].contains("client"),
        "{graph:?}"
    );
    assert_eq!(
        above_the_ground_floor(&graph, "signals"),
        Vec::<String>::new(),
        "signals imports modules above the ground floor {:?}",
        ground_floor(&graph)
    );
}

#[test]
fn a_module_above_the_ground_floor_is_named() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("signals", vec!["malloc_trim", "client"]),
        ("malloc_trim", vec![]),
        ("client", vec!["access"]),
        ("access", vec!["kube"]),
        ("kube", vec![]),
    ]
    .into_iter()
    .map(|(m, ds)| (m.into(), ds.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(above_the_ground_floor(&graph, "signals"), ["client"]);
    assert_eq!(above_the_ground_floor(&graph, "client"), ["access"]);
    assert_eq!(above_the_ground_floor(&graph, "access"), ["kube"]);
}

#[test]
fn a_cycle_is_found() {
    let text = "use crate::{b, c::d};\nfn f() { crate::e::g(); }";
    assert_eq!(crate_paths(text), ["b", "c", "e"]);
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(m, ds)| (m.into(), ds.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(
        cycle(&graph),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}
