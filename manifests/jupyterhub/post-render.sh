#!/usr/bin/env bash
# Helm post-renderer for zero-to-jupyterhub: turns the chart's user
# placeholders into selfdestruct placeholders (see the README section
# "zero-to-jupyterhub").
#
# Helm 4 takes only a plugin name for --post-renderer (plugin.yaml beside
# this script makes the folder a postrenderer/v1 plugin):
#
#   helm plugin install ./manifests/jupyterhub
#   helm upgrade --install jhub jupyterhub/jupyterhub --namespace jhub \
#     --values config.yaml \
#     --post-renderer selfdestruct --post-renderer-args jhub
#
# Helm 3 runs the script by its path:
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
# SELFDESTRUCT_VARIANT: "minimal" (default: no list/watch; the PDB alone keeps
# moves one at a time) or "full" (sibling awareness: list/watch on pods in the
# hub's namespace, which lets a placeholder's token read every user server's
# JUPYTERHUB_API_TOKEN from its pod spec; opt in only knowing that).
# SELFDESTRUCT_NODE_READER: "on" (default: a ClusterRole with nodes list/watch
# and a ClusterRoleBinding of it to the release namespace's
# selfdestruct-user-placeholder, so placeholders move to new nodes) or "off"
# (no cluster-scoped objects, for installs without rights to create them;
# the agents then warn once and only move on a lifetime you set).
# KUBECTL: the kubectl to run [default: kubectl].
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
kubectl="${KUBECTL:-kubectl}"
namespace="${1:-${SELFDESTRUCT_NAMESPACE:-${HELM_NAMESPACE:-}}}"
variant="${SELFDESTRUCT_VARIANT:-minimal}"
node_reader="${SELFDESTRUCT_NODE_READER:-on}"

fail() {
  echo "post-render.sh: $*" >&2
  exit 1
}

case "$variant" in
  full) component=selfdestruct ;;
  minimal) component=minimal ;;
  *) fail "SELFDESTRUCT_VARIANT must be full or minimal, not '$variant'" ;;
esac
case "$node_reader" in
  on | off) ;;
  *) fail "SELFDESTRUCT_NODE_READER must be on or off, not '$node_reader'" ;;
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

# The placeholder StatefulSet as the chart rendered it: its name and replicas
# (the pod names the Role may touch), its release label (the chart's own
# selector) and whether it has tolerations. Read locally by kubectl.
"$kubectl" annotate --local -f "$work/all.yaml" selfdestruct.post-render/unused- \
  -o jsonpath='{.kind}{"\t"}{.metadata.name}{"\t"}{.metadata.labels.component}{"\t"}{.spec.replicas}{"\t"}{.metadata.labels.release}{"\t"}{.spec.template.spec.tolerations}{"\n"}' \
  >"$work/input.tsv" 2>"$work/input.err" ||
  fail "could not read the chart's output: $(head -c 300 "$work/input.err")"
awk -F'\t' '$1 == "StatefulSet" && $3 == "user-placeholder"' "$work/input.tsv" >"$work/sts.tsv"
[[ "$(wc -l <"$work/sts.tsv")" -eq 1 ]] ||
  fail "expected one StatefulSet labelled component=user-placeholder, found $(wc -l <"$work/sts.tsv")"
IFS=$'\t' read -r _ sts_name _ replicas release tolerations <"$work/sts.tsv" || true
[[ "$sts_name" =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] || fail "odd StatefulSet name '$sts_name'"
[[ -z "$replicas" ]] && replicas=1 # the API's default
[[ "$replicas" =~ ^[0-9]+$ ]] || fail "odd replicas '$replicas' of StatefulSet $sts_name"
# The pods' names: <name>-0 .. <name>-<replicas-1> (at least one name: an
# empty resourceNames would allow every pod).
names="\"$sts_name-0\""
for ((i = 1; i < replicas; i++)); do names+=", \"$sts_name-$i\""; done

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
  # get and evict only the placeholders' own pods (rules 0 and 1 of
  # selfdestruct/role.yaml).
  - target:
      group: rbac.authorization.k8s.io
      version: v1
      kind: Role
      name: selfdestruct-user-placeholder
    patch: |-
      - op: test
        path: /rules/0/resources
        value: ["pods"]
      - op: replace
        path: /rules/0/resourceNames
        value: [$names]
      - op: test
        path: /rules/1/resources
        value: ["pods/eviction"]
      - op: replace
        path: /rules/1/resourceNames
        value: [$names]
KUSTOMIZATION

# The node gate's startup taint (manifests/node-gate/), tolerated as by
# manifests/statefulset.yaml. Added to the chart's list (a JSON6902 add keeps
# its hub.jupyter.org/dedicated tolerations), or as the list when it has none.
startup_taint='{"key": "startup-taint.cluster-autoscaler.kubernetes.io/images-pending", "operator": "Exists", "effect": "NoSchedule"}'
if [[ -n "$tolerations" && "$tolerations" != "[]" ]]; then
  toleration_op="{\"op\": \"add\", \"path\": \"/spec/template/spec/tolerations/-\", \"value\": $startup_taint}"
else
  toleration_op="{\"op\": \"add\", \"path\": \"/spec/template/spec/tolerations\", \"value\": [$startup_taint]}"
fi
cat >>"$work/kustomization.yaml" <<TOLERATION
  - target:
      group: apps
      version: v1
      kind: StatefulSet
      name: $sts_name
    patch: |-
      - $toleration_op
TOLERATION

# Full variant: siblings are this release's placeholders only, as the chart's
# own selector (component, app, release) picks them.
if [[ "$variant" == full && -n "$release" ]]; then
  [[ "$release" =~ ^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$ ]] || fail "odd release label '$release'"
  cat >>"$work/kustomization.yaml" <<SIBLINGS
  - target:
      group: apps
      version: v1
      kind: StatefulSet
      name: $sts_name
    patch: |-
      apiVersion: apps/v1
      kind: StatefulSet
      metadata:
        name: $sts_name
      spec:
        template:
          spec:
            containers:
              - name: pause
                env:
                  - name: SELFDESTRUCT_SIBLING_SELECTOR
                    value: component=user-placeholder,release=$release
SIBLINGS
fi

# Read access to Nodes for this namespace's placeholders (moving to new
# nodes). Cluster-scoped, so named after the namespace: two hubs in two
# namespaces each get their own pair, which Helm owns per release.
if [[ "$node_reader" == on ]]; then
  cat >"$work/node-reader.yaml" <<NODE_READER
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: selfdestruct-user-placeholder-nodes-$namespace
  labels:
    app.kubernetes.io/name: selfdestruct
    app.kubernetes.io/component: user-placeholder
rules:
  - apiGroups: [""]
    resources: ["nodes"]
    verbs: ["list", "watch"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: selfdestruct-user-placeholder-nodes-$namespace
  labels:
    app.kubernetes.io/name: selfdestruct
    app.kubernetes.io/component: user-placeholder
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: selfdestruct-user-placeholder-nodes-$namespace
subjects:
  - kind: ServiceAccount
    name: selfdestruct-user-placeholder
    namespace: $namespace
NODE_READER
  sed -i 's|^  - all.yaml$|  - all.yaml\n  - node-reader.yaml|' "$work/kustomization.yaml"
fi

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
