# syntax=docker/dockerfile:1
#
# selfdestruct: three static musl binaries on an empty (scratch) base: the
# placeholder agent (the entrypoint), the node gate and the calendar
# controller (each Deployment, DaemonSet and StatefulSet names its own).
#
#   docker buildx build --platform linux/amd64,linux/arm64 -t IMAGE .
#
# The build stage runs on the *target* platform (buildx emulates a foreign
# one with QEMU) rather than cross-compiling from $BUILDPLATFORM: ring, which
# rustls uses, compiles C and assembly, and a native build needs no cross C
# toolchain. That is for building here, one platform. The release does not use
# it: it cross-compiles both binaries with cargo-zigbuild and builds the
# `release` target below, which only copies them in.

ARG RUST_VERSION=1

FROM rust:${RUST_VERSION}-alpine AS build
# Set by buildx/BuildKit for the platform being built.
ARG TARGETARCH
# ring's build script needs a C compiler and the musl headers (the image has
# gcc but not musl-dev). Unpinned: the versions follow the floating base tag.
# hadolint ignore=DL3018
RUN apk add --no-cache gcc musl-dev
WORKDIR /src
# The whole workspace, less what .dockerignore drops (target/, .git, the
# deployment files): cargo needs every member's manifest and sources
# (., tests/fake-apiserver, sim, ...) to load the workspace, and copying the
# lot keeps this correct as members come and go. Dependencies are cached in
# BuildKit cache mounts instead of a layer: the registry, and the target
# directory, so a source change rebuilds only this crate.
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/usr/local/cargo/git,sharing=locked \
    --mount=type=cache,target=/src/target,id=selfdestruct-target-${TARGETARCH},sharing=locked \
    set -eu; \
    case "${TARGETARCH}" in \
      amd64) triple=x86_64-unknown-linux-musl ;; \
      arm64) triple=aarch64-unknown-linux-musl ;; \
      *) echo "unsupported TARGETARCH: ${TARGETARCH}" >&2; exit 1 ;; \
    esac; \
    rustup target add "${triple}"; \
    RUSTFLAGS="-C relocation-model=static -C force-unwind-tables=no -C link-arg=-Wl,--no-eh-frame-hdr" \
    cargo build --release --locked --target "${triple}" \
      -p selfdestruct -p selfdestruct-schedule --bins; \
    mkdir -p /out; \
    for name in selfdestruct selfdestruct-node-gate selfdestruct-schedule; do \
      cp "target/${triple}/release/${name}" "/out/${name}"; \
    done

# RUSTFLAGS: a static non-PIE binary (no start-up relocations: 350 KiB less on
# disk and no dirty relocated pages; the cost is a fixed load address) without
# unwind tables and without the .eh_frame_hdr lookup table (panic = "abort"
# never unwinds; a panic still prints its message). bench/run.sh builds with
# the same.

# Runs the binaries on an empty filesystem: it fails here, not in a cluster, if
# one is not static or not for this architecture.
FROM scratch AS check
COPY --from=build /out/selfdestruct /out/selfdestruct-node-gate /out/selfdestruct-schedule /
# scratch has no shell to chain them in one RUN.
RUN ["/selfdestruct", "--version"]
# hadolint ignore=DL3059
RUN ["/selfdestruct-node-gate", "--version"]
# hadolint ignore=DL3059
RUN ["/selfdestruct-schedule", "--version"]

# The image's contents, defined once: the two targets below add only the
# binaries. image/build.sh builds the same image without Docker (umoci, from a
# static binary built on the host) and tests/image.rs checks that its config
# (labels, user, entrypoint) matches this stage.
#
# scratch rather than distroless/static: the agent needs no CA bundle (it
# trusts the cluster CA from its service-account mount), no tzdata, no
# passwd entry (it runs as a bare uid) and no shell, so the image is just
# the binaries.
FROM scratch AS image
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="selfdestruct" \
      org.opencontainers.image.description="A pause container for Kubernetes placeholder pods that moves its own pod to fresh nodes" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
# nobody:nogroup; the pod spec sets the same, and PSA "restricted" requires
# a non-root user.
USER 65534:65534
ENTRYPOINT ["/selfdestruct"]

# Target `prebuilt`: the image around static binaries built elsewhere (for
# example by image/build.sh), given as the build context `prebuilt-bin`, a
# folder holding `selfdestruct`, `selfdestruct-node-gate` and
# `selfdestruct-schedule`:
#
#   docker buildx build --target prebuilt \
#     --build-context prebuilt-bin=target/x86_64-unknown-linux-gnu/release -t IMAGE .
#
# Without that context this empty stage stands in, and the COPY fails.
FROM scratch AS prebuilt-bin

FROM image AS prebuilt
COPY --from=prebuilt-bin /selfdestruct /selfdestruct-node-gate /selfdestruct-schedule /

# Target `release`: the image around the release workflow's static binaries,
# cross-compiled outside Docker (.github/workflows/release.yml), given as the
# build context `release-bin`: a folder with amd64/ and arm64/, each holding
# the three binaries. It runs nothing, so buildx builds both platforms
# without emulation.
FROM scratch AS release-bin

FROM image AS release
ARG TARGETARCH
COPY --from=release-bin /${TARGETARCH}/selfdestruct /${TARGETARCH}/selfdestruct-node-gate /${TARGETARCH}/selfdestruct-schedule /

# The default target: the binaries built by the musl stage above.
FROM image
COPY --from=check /selfdestruct /selfdestruct-node-gate /selfdestruct-schedule /
