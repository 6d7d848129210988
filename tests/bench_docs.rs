//! The real-stack bench's figures in the docs are the ones in `bench/results/real-stack.json`
//! (and `real-stack-rows-apart.json`, the runs with the rows apart): each table
//! `bench/coldstart/table.py` prints from them stands verbatim in its doc, and the README holds
//! its one sentence of figures (line breaks aside). A re-run of the bench that changes the JSON
//! fails here until the docs are regenerated.

use std::path::Path;
use std::process::Command;

/// The bench's results: its rows side by side on one autoscaler, and apart (`--rows-apart`).
const SIDE_BY_SIDE: &str = "bench/results/real-stack.json";
const APART: &str = "bench/results/real-stack-rows-apart.json";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn table(results: &str, form: &str) -> String {
    let out = Command::new("python3")
        .current_dir(root())
        .env("RESULTS", results)
        .args(["bench/coldstart/table.py", form])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "RESULTS={results} table.py {form}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn doc(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn the_docs_tables_are_the_results_files() {
    for (results, form, path) in [
        (SIDE_BY_SIDE, "peers", "docs/peers.md"),
        (SIDE_BY_SIDE, "full", "docs/benchmarks.md"),
        (SIDE_BY_SIDE, "quick", "docs/benchmarks.md"),
        (SIDE_BY_SIDE, "cycling", "docs/benchmarks.md"),
        (SIDE_BY_SIDE, "class", "docs/benchmarks.md"),
        (SIDE_BY_SIDE, "binder", "docs/benchmarks.md"),
        (SIDE_BY_SIDE, "peers-cycling", "docs/peers.md"),
        (SIDE_BY_SIDE, "decision-cycling", "docs/decision.md"),
        (APART, "cycling", "docs/benchmarks.md"),
        (APART, "peers-cycling", "docs/peers.md"),
        (APART, "decision-cycling", "docs/decision.md"),
    ] {
        let printed = table(results, form);
        assert!(
            doc(path).contains(printed.trim()),
            "{path} lacks `RESULTS={results} python3 bench/coldstart/table.py {form}`'s \
             output:\n{printed}"
        );
    }
}

#[test]
fn the_readme_quotes_the_results_file() {
    for (results, form) in [
        (SIDE_BY_SIDE, "readme"),
        (SIDE_BY_SIDE, "readme-cycling"),
        (APART, "readme-cycling"),
    ] {
        let sentence = words(&table(results, form));
        assert!(
            words(&doc("README.md")).contains(&sentence),
            "README.md lacks `RESULTS={results} python3 bench/coldstart/table.py {form}`'s \
             sentence:\n{sentence}"
        );
    }
}
