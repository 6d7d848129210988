#!/usr/bin/env bash
# Footprint and API-cost benchmark: builds the image's binaries as shipped
# (static, release profile; the agent, the node gate, the schedule) and the
# image (image/build.sh), the agent as `cargo build --release` builds it (the
# size target's), a static C pause
# (bench/pause.c) and uses coreutils' `sleep infinity`, then prints one table
# (bench/src/main.rs) and the image's figures, run as a container
# (image/report.sh).
#
#   bash bench/run.sh           # full run (about 6 minutes on 2 CPUs, after the builds)
#   bash bench/run.sh --quick   # smoke run (about 1 minute)
#
# CARGO_TARGET_DIR is honoured (default: target/ of the repository).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
target=${CARGO_TARGET_DIR:-$root/target}
triple=x86_64-unknown-linux-gnu

echo "bench: building the binaries (static, release) and the image (image/build.sh)" >&2
# The shipped flags (see the Dockerfile and image/build.sh): static, non-PIE
# (no start-up relocations, no dirty relocated pages), no unwind tables
# (panic = "abort"). The image is reported after the table, when umoci, runc
# and root are there.
image=""
if command -v umoci >/dev/null; then
  image="$(CARGO_TARGET_DIR="$target" bash "$root/image/build.sh")"
else
  echo "bench: no umoci (apt-get install umoci runc): building the binary only, no image figures" >&2
  (cd "$root" && RUSTFLAGS="-C target-feature=+crt-static -C relocation-model=static -C force-unwind-tables=no -C link-arg=-Wl,--no-eh-frame-hdr" CARGO_TARGET_DIR="$target" \
    cargo build --release --locked -p selfdestruct -p selfdestruct-schedule --bins --target "$triple" >&2)
fi
# The placeholder's size target is for the binary as a plain `cargo build --release`
# of the workspace builds it (its features as the whole workspace resolves them).
echo "bench: cargo build --release (the workspace, for the plain binaries' sizes)" >&2
(cd "$root" && CARGO_TARGET_DIR="$target" cargo build --release --locked >&2)
echo "bench: building pause.c (gcc -static -Os -s)" >&2
mkdir -p "$target/bench"
gcc -static -Os -s -o "$target/bench/pause" "$here/pause.c"
echo "bench: building the benchmark" >&2
(cd "$here" && CARGO_TARGET_DIR="$target/bench" cargo build --release >&2)

"$target/bench/release/selfdestruct-bench" "$@" \
  --selfdestruct "$target/$triple/release/selfdestruct" \
  --release "$target/release/selfdestruct" \
  ${image:+--image "$image"} \
  --pause "$target/bench/pause" \
  --sleep "$(command -v sleep)"

# The image: layers, compressed size, and the idle figures of the container's
# PID 1 (image/report.sh).
echo
if [[ -z "$image" ]]; then
  echo "image: not built (no umoci)"
elif [[ "$(id -u)" != 0 ]] || ! command -v runc >/dev/null; then
  echo "image: $image built; not run (runc and root are needed)"
else
  idle=30
  for arg in "$@"; do [[ "$arg" == --quick ]] && idle=5; done
  bash "$root/image/report.sh" "$image" "$idle"
fi
