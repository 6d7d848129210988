//! The real-stack bench's figures in the docs are the ones in `bench/results/real-stack.json`
//! (and `real-stack-rows-apart.json`, the runs with the rows apart): each table
//! `bench/coldstart/table.py` prints from them stands verbatim in its doc, and the README holds
//! its one sentence of figures (line breaks aside). A re-run of the bench that changes the JSON
//! fails here until the docs are regenerated.

use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn table(form: &str) -> String {
    table_of("bench/results/real-stack.json", form)
}

fn table_of(results: &str, form: &str) -> String {
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
    for (form, path) in [
        ("peers", "docs/peers.md"),
        ("full", "docs/benchmarks.md"),
        ("quick", "docs/benchmarks.md"),
        ("cycling", "docs/benchmarks.md"),
        ("class", "docs/benchmarks.md"),
        ("binder", "docs/benchmarks.md"),
        ("peers-cycling", "docs/peers.md"),
        ("decision-cycling", "docs/decision.md"),
    ] {
        let printed = table(form);
        assert!(
            doc(path).contains(printed.trim()),
            "{path} lacks `python3 bench/coldstart/table.py {form}`'s output:\n{printed}"
        );
    }
}

#[test]
fn the_rows_apart_tables_are_their_results_file() {
    for (form, path) in [
        ("cycling", "docs/benchmarks.md"),
        ("decision-cycling", "docs/decision.md"),
    ] {
        let printed = table_of("bench/results/real-stack-rows-apart.json", form);
        assert!(
            doc(path).contains(printed.trim()),
            "{path} lacks `RESULTS=bench/results/real-stack-rows-apart.json python3 \
             bench/coldstart/table.py {form}`'s output:\n{printed}"
        );
    }
}

#[test]
fn the_readme_quotes_the_results_file() {
    for (results, form) in [
        ("bench/results/real-stack.json", "readme"),
        ("bench/results/real-stack.json", "readme-cycling"),
        ("bench/results/real-stack-rows-apart.json", "readme-cycling"),
    ] {
        let sentence = words(&table_of(results, form));
        assert!(
            words(&doc("README.md")).contains(&sentence),
            "README.md lacks `RESULTS={results} python3 bench/coldstart/table.py {form}`'s \
             sentence:\n{sentence}"
        );
    }
}
