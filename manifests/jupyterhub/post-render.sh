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
# selfdestruct/ (or minimal/) on stdout. Warns on stderr (and still succeeds)
# when the placeholders cannot be preempted by user pods: no priorityClassName
# (the chart's scheduling.podPriority.enabled defaults to false), or a
# PriorityClass not below the user pods' one; and when the output has no
# PodDisruptionBudget for them.
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

"$kubectl" kustomize "$work" >"$work/out.yaml"

# What the result says about priority and budgets: one line per object (kind,
# name, component label, pod template's priorityClassName, PriorityClass
# value), read locally by kubectl (no cluster is contacted).
if "$kubectl" annotate --local -f "$work/out.yaml" selfdestruct.post-render/unused- \
  -o jsonpath='{.kind}{"\t"}{.metadata.name}{"\t"}{.metadata.labels.component}{"\t"}{.spec.template.spec.priorityClassName}{"\t"}{.value}{"\n"}' \
  >"$work/objects.tsv" 2>"$work/objects.err"; then
  awk -F'\t' -v me="post-render.sh" '
    $1 == "StatefulSet" && $3 == "user-placeholder" { sts = $2; pc = $4 }
    $1 == "PriorityClass" { value[$2] = $5; if ($3 == "default-priority") user = $2 }
    $1 == "PodDisruptionBudget" && $3 == "user-placeholder" { pdbs++ }
    END {
      w = me ": WARNING: "
      fix = "set in the chart'"'"'s values:  scheduling: {podPriority: {enabled: true}}"
      if (pc == "") {
        print w "StatefulSet " sts " has no priorityClassName (the chart'"'"'s scheduling.podPriority.enabled defaults to false): the placeholders run at the priority of user pods, no user pod can preempt them, and they only take room away; " fix > "/dev/stderr"
      } else if (!(pc in value)) {
        print w "StatefulSet " sts " uses PriorityClass " pc ", which is not in the chart'"'"'s output: make sure its value is below every user pod'"'"'s priority, or " fix > "/dev/stderr"
      } else {
        up = (user != "") ? value[user] + 0 : 0
        who = (user != "") ? "PriorityClass " user : "user pods without a PriorityClass"
        if (value[pc] + 0 >= up) {
          print w "PriorityClass " pc " of StatefulSet " sts " has value " value[pc] ", not below the user pods'"'"' priority (" who ": " up "): no user pod can preempt the placeholders; set scheduling.podPriority.userPlaceholderPriority below scheduling.podPriority.defaultPriority (the chart'"'"'s defaults: -10 and 0)" > "/dev/stderr"
        }
      }
      if (pdbs != 1) {
        print w pdbs + 0 " PodDisruptionBudgets labelled component=user-placeholder in the output, not 1: the chart (0.8.0 and later) renders one, which selfdestruct turns into maxUnavailable 1; without it placeholders are not moved one at a time" > "/dev/stderr"
      }
    }
   ' "$work/objects.tsv"
else
  echo "post-render.sh: could not check the placeholders' priority and budget:" \
    "$(head -c 300 "$work/objects.err")" >&2
fi
cat "$work/out.yaml"
