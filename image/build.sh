#!/usr/bin/env bash
# Builds the selfdestruct image without Docker: an OCI image layout made with
# umoci (Debian: apt-get install umoci), FROM scratch around three static
# binaries: the placeholder agent (/selfdestruct, the entrypoint), the node
# gate (/selfdestruct-node-gate) and the calendar controller
# (/selfdestruct-schedule), in one layer. It mirrors the Dockerfile's `image`
# stage (labels, USER 65534:65534, ENTRYPOINT ["/selfdestruct"]);
# tests/image.rs checks that the two agree and runs the result with runc.
#
#   bash image/build.sh                       # builds the static binaries too
#   bash image/build.sh --binary PATH         # static binaries built already
#
# Options:
#   --binary PATH  the static selfdestruct to put in the image, the other two
#                  beside it [default: build them: the release profile, static
#                  (crt-static) and with the Dockerfile's RUSTFLAGS, for the
#                  host's x86_64 gnu target]
#   --out DIR      the OCI image layout to (re)write [default:
#                  $CARGO_TARGET_DIR/image/oci, or target/image/oci]
#   --tag TAG      the tag in the layout [default: the binary's version]
#
# Prints the image reference (DIR:TAG) as the last line on stdout. To push
# it to a registry without Docker (Debian: apt-get install skopeo):
#
#   skopeo copy oci:target/image/oci:0.1.0 docker://REGISTRY/selfdestruct:0.1.0
#
# The release path for multi-arch images stays `docker buildx build` of the
# Dockerfile (docs/install.md, "Your own image").
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
binary=""
out="$target/image/oci"
tag=""

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
  exit 2
}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --binary) binary="${2:?--binary needs a path}"; shift 2 ;;
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    --tag) tag="${2:?--tag needs a tag}"; shift 2 ;;
    -h | --help) usage ;;
    *) echo "image/build.sh: unknown argument '$1'" >&2; usage ;;
  esac
done

command -v umoci >/dev/null || {
  echo "image/build.sh: umoci is needed (Debian: apt-get install umoci)" >&2
  exit 1
}

if [[ -z "$binary" ]]; then
  triple=x86_64-unknown-linux-gnu
  echo "image/build.sh: building the binaries (static, release, $triple)" >&2
  # The Dockerfile's flags (static, non-PIE, no unwind tables, no
  # .eh_frame_hdr), plus crt-static: the musl target is static by default,
  # the gnu target needs asking. bench/run.sh uses these binaries too.
  (cd "$root" && RUSTFLAGS="-C target-feature=+crt-static -C relocation-model=static -C force-unwind-tables=no -C link-arg=-Wl,--no-eh-frame-hdr" \
    CARGO_TARGET_DIR="$target" \
    cargo build --release --locked -p selfdestruct -p selfdestruct-schedule --bins --target "$triple" >&2)
  binary="$target/$triple/release/selfdestruct"
fi
binaries=(selfdestruct selfdestruct-node-gate selfdestruct-schedule)
dir="$(dirname "$binary")"
for name in "${binaries[@]}"; do
  path="$dir/$name"
  [[ "$name" != selfdestruct ]] || path="$binary"
  [[ -f "$path" && -x "$path" ]] || {
    echo "image/build.sh: no executable binary at '$path'" >&2
    exit 1
  }
  # A scratch image has no dynamic loader: refuse a dynamically linked binary
  # here rather than in a cluster.
  if LC_ALL=C readelf -l "$path" 2>/dev/null | grep -q 'Requesting program interpreter'; then
    echo "image/build.sh: '$path' is dynamically linked; a scratch image needs a static binary" >&2
    exit 1
  fi
done
# The Dockerfile's `ARG VERSION` default: the crate's version, which the binary prints.
version="$("$binary" --version | awk '{print $2}')"
[[ -n "$version" ]] || { echo "image/build.sh: '$binary --version' printed no version" >&2; exit 1; }
tag="${tag:-$version}"

rm -rf "$out"
mkdir -p "$(dirname "$out")"
umoci init --layout "$out" >&2
umoci new --image "$out:$tag" >&2
# The same metadata as the Dockerfile's `image` stage.
umoci config --image "$out:$tag" \
  --config.user 65534:65534 \
  --config.entrypoint /selfdestruct \
  --config.label org.opencontainers.image.title=selfdestruct \
  --config.label "org.opencontainers.image.description=A pause container for Kubernetes placeholder pods that moves its own pod to fresh nodes" \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label org.opencontainers.image.licenses=Apache-2.0 \
  --history.created_by "image/build.sh: config" >&2
# One layer: the three binaries, root-owned, mode 0755 (as COPY makes them),
# and nothing else (no entry for / itself).
stage="$(mktemp -d "${TMPDIR:-/tmp}/selfdestruct-image.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/root"
for name in "${binaries[@]}"; do
  path="$dir/$name"
  [[ "$name" != selfdestruct ]] || path="$binary"
  install -m 0755 "$path" "$stage/root/$name"
done
tar --create --file "$stage/layer.tar" --directory "$stage/root" \
  --owner=0 --group=0 --numeric-owner --sort=name "${binaries[@]}"
umoci raw add-layer --image "$out:$tag" \
  --history.created_by "image/build.sh: COPY ${binaries[*]} /" \
  "$stage/layer.tar" >&2
umoci gc --layout "$out" >&2
echo "image/build.sh: built $out:$tag from ${binaries[*]} in $dir" >&2
echo "$out:$tag"
