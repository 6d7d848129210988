#!/usr/bin/env bash
# Helm post-renderer for zero-to-jupyterhub: turns the chart's user
# placeholders into selfdestruct placeholders (see the README section
# "zero-to-jupyterhub").
#
#   helm upgrade --install jhub jupyterhub/jupyterhub --namespace jhub \
#     --values config.yaml \
#     --post-renderer ./manifests/jupyterhub/post-render.sh \
#     --post-renderer-args jhub
#
# Reads the rendered chart on stdin, writes it to a temporary folder as
# all.yaml, and prints `kubectl kustomize` of it with the Component
# selfdestruct/ (or minimal/) on stdout.
#
# Argument 1 (or SELFDESTRUCT_NAMESPACE, or HELM_NAMESPACE): the release
# namespace, for the RoleBinding's subject.
# SELFDESTRUCT_VARIANT: "full" (default: sibling awareness, list/watch on pods
# in the hub's namespace) or "minimal" (no list/watch; the PDB alone).
# KUBECTL: the kubectl to run [default: kubectl].
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
kubectl="${KUBECTL:-kubectl}"
namespace="${1:-${SELFDESTRUCT_NAMESPACE:-${HELM_NAMESPACE:-}}}"
variant="${SELFDESTRUCT_VARIANT:-full}"

fail() {
  echo "post-render.sh: $*" >&2
  exit 1
}

case "$variant" in
  full) component=selfdestruct ;;
  minimal) component=minimal ;;
  *) fail "SELFDESTRUCT_VARIANT must be full or minimal, not '$variant'" ;;
esac
if [[ ! "$namespace" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]]; then
  fail "the release namespace is needed (and must be a DNS label): pass it with --post-renderer-args NAMESPACE (got '$namespace')"
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/selfdestruct-post-render.XXXXXX")"
trap 'rm -rf "$work"' EXIT

cat >"$work/all.yaml"
if ! grep -q '^ *component: user-placeholder *$' "$work/all.yaml"; then
  echo "post-render.sh: no user-placeholder StatefulSet in the chart's output" \
    "(scheduling.userPlaceholder.enabled: false?): passing it through unchanged" >&2
  cat "$work/all.yaml"
  exit 0
fi

# The Components, copied next to all.yaml (kustomize loads files from below
# its root only).
cp -R "$here/selfdestruct" "$here/minimal" "$work/"
cat >"$work/kustomization.yaml" <<KUSTOMIZATION
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - all.yaml
components:
  - $component
patches:
  - target:
      group: rbac.authorization.k8s.io
      version: v1
      kind: RoleBinding
      name: selfdestruct-user-placeholder
    patch: |-
      - op: replace
        path: /subjects/0/namespace
        value: $namespace
KUSTOMIZATION

# SELFDESTRUCT_IMAGE: the selfdestruct image to run, with a tag or a digest
# (REGISTRY/selfdestruct:TAG or REGISTRY/selfdestruct@sha256:...) [default:
# the Component's ghcr.io/selfdestruct/selfdestruct:0.1.0].
if [[ -n "${SELFDESTRUCT_IMAGE:-}" ]]; then
  image="$SELFDESTRUCT_IMAGE"
  if [[ "$image" =~ ^([a-z0-9][a-z0-9._/:-]*[a-z0-9])@(sha256:[0-9a-f]{64})$ ]]; then
    pin="digest: ${BASH_REMATCH[2]}"
  elif [[ "$image" =~ ^([a-z0-9][a-z0-9._/:-]*[a-z0-9]):([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})$ ]]; then
    pin="newTag: \"${BASH_REMATCH[2]}\""
  else
    fail "SELFDESTRUCT_IMAGE must be an image with a tag (REGISTRY/selfdestruct:TAG) or a digest (REGISTRY/selfdestruct@sha256:...), not '$image'"
  fi
  cat >>"$work/kustomization.yaml" <<IMAGES
images:
  - name: ghcr.io/selfdestruct/selfdestruct
    newName: ${BASH_REMATCH[1]}
    $pin
IMAGES
fi

"$kubectl" kustomize "$work"
