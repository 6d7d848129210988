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
#     --values config.yaml --post-renderer selfdestruct \
#     --post-renderer-args jhub \
#     --post-renderer-args SELFDESTRUCT_IMAGE=REGISTRY/selfdestruct:0.1.0
#
# Helm 3 runs the script by its path: --post-renderer
# ./manifests/jupyterhub/post-render.sh, with the same --post-renderer-args.
#
# Reads the rendered chart on stdin, writes it to a temporary folder as
# all.yaml, and prints `kubectl kustomize` of it with the Component
# selfdestruct/ (or minimal/) on stdout. Helm shows a post-renderer's stderr
# only when it fails, so a misconfiguration fails the render with one message
# naming the value to set: no SELFDESTRUCT_IMAGE; placeholders without a
# priority below the user pods' (no priorityClassName: the chart's
# scheduling.podPriority.enabled defaults to false; or a PriorityClass not
# below the users'), unless SELFDESTRUCT_PRIORITY_CHECK=off; an unknown or
# invalid agent setting. A chart without placeholders (replicas 0, or
# scheduling.userPlaceholder.enabled false) passes through unchanged.
#
# Arguments (--post-renderer-args, repeated): the release namespace (or
# SELFDESTRUCT_NAMESPACE, or HELM_NAMESPACE), for the bindings' subjects; and
# settings as NAME=VALUE. The agent's SELFDESTRUCT_* settings go into the
# placeholders' env, checked first by `selfdestruct check-settings` (the
# agent's own parser; the binary from SELFDESTRUCT_BIN, else selfdestruct on
# PATH, else bin/selfdestruct beside this script). The post-renderer's own
# settings below may be given the same way or in the environment (an
# argument wins):
# SELFDESTRUCT_IMAGE (required): the image to run, with a tag or a digest
# (REGISTRY/selfdestruct:TAG or REGISTRY/selfdestruct@sha256:...).
# SELFDESTRUCT_VARIANT: "minimal" (default: no list/watch; the PDB alone keeps
# moves one at a time) or "full" (sibling awareness: list/watch on pods in the
# hub's namespace, which lets a placeholder's token read every user server's
# JUPYTERHUB_API_TOKEN from its pod spec; opt in only knowing that).
# SELFDESTRUCT_NODE_READER: "on" (default: a ClusterRole with nodes list/watch
# bound to the release's service account, so placeholders move to new nodes)
# or "off" (no cluster-scoped objects, for installs without rights to create
# them; the agents then warn once and only move on a lifetime you set).
# SELFDESTRUCT_PRIORITY_CHECK: "on" (default) or "off" (the cluster gives the
# placeholders a priority below the users' another way).
# SELFDESTRUCT_BIN: the selfdestruct binary that checks the agent settings.
# Every name this script adds is derived from the release (the StatefulSet's
# release label) and, for cluster-scoped objects, the namespace: two releases
# do not collide.
# KUBECTL: the kubectl to run [default: kubectl].
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
kubectl="${KUBECTL:-kubectl}"

fail() {
  echo "post-render.sh: $*" >&2
  exit 1
}

namespace_arg=""
settings=()
for arg in "$@"; do
  case "$arg" in
    *=*)
      name="${arg%%=*}"
      case "$name" in
        SELFDESTRUCT_IMAGE | SELFDESTRUCT_VARIANT | SELFDESTRUCT_NODE_READER | SELFDESTRUCT_PRIORITY_CHECK | SELFDESTRUCT_NAMESPACE | SELFDESTRUCT_BIN)
          printf -v "$name" '%s' "${arg#*=}" ;;
        SELFDESTRUCT_MODE)
          fail "SELFDESTRUCT_MODE cannot be set here: the Role grants eviction only (the mode stays evict, which honours the PodDisruptionBudget)" ;;
        SELFDESTRUCT_*) settings+=("$arg") ;;
        *) fail "$name: only SELFDESTRUCT_* settings can be passed (the pod's name, namespace, uid and node come from the Downward API)" ;;
      esac
      ;;
    *)
      [[ -z "$namespace_arg" ]] || fail "one namespace argument, not '$namespace_arg' and '$arg' (settings are NAME=VALUE)"
      namespace_arg="$arg"
      ;;
  esac
done
namespace="${namespace_arg:-${SELFDESTRUCT_NAMESPACE:-${HELM_NAMESPACE:-}}}"
variant="${SELFDESTRUCT_VARIANT:-minimal}"
node_reader="${SELFDESTRUCT_NODE_READER:-on}"
priority_check="${SELFDESTRUCT_PRIORITY_CHECK:-on}"

case "$variant" in
  full) component=selfdestruct ;;
  minimal) component=minimal ;;
  *) fail "SELFDESTRUCT_VARIANT must be full or minimal, not '$variant'" ;;
esac
case "$node_reader" in
  on | off) ;;
  *) fail "SELFDESTRUCT_NODE_READER must be on or off, not '$node_reader'" ;;
esac
case "$priority_check" in
  on | off) ;;
  *) fail "SELFDESTRUCT_PRIORITY_CHECK must be on or off, not '$priority_check'" ;;
esac
if [[ ! "$namespace" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]]; then
  fail "the release namespace is needed (and must be a DNS label): pass it with --post-renderer-args NAMESPACE (got '$namespace')"
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/selfdestruct-post-render.XXXXXX")"
trap 'rm -rf "$work"' EXIT

cat >"$work/all.yaml"

# The placeholder StatefulSet as the chart rendered it: its name and replicas
# (the pod names the Role may touch), its release label (the chart's own
# selector, and the names this script adds) and whether it has tolerations.
# Read locally by kubectl, a YAML parser (CRLF line endings, quoted or flow
# values read as Kubernetes reads them), never by a pattern over the text: an
# output it cannot read fails the render, since passing it through would leave
# the placeholders plain pause with nobody told (Helm hides stderr on success).
"$kubectl" annotate --local -f "$work/all.yaml" selfdestruct.post-render/unused- \
  -o jsonpath='{.kind}{"\t"}{.metadata.name}{"\t"}{.metadata.labels.component}{"\t"}{.spec.replicas}{"\t"}{.metadata.labels.release}{"\t"}{.spec.template.spec.tolerations}{"\n"}' \
  >"$work/input.tsv" 2>"$work/input.err" ||
  fail "could not read the chart's output: $(head -c 300 "$work/input.err")"
awk -F'\t' '$1 == "StatefulSet" && $3 == "user-placeholder"' "$work/input.tsv" >"$work/sts.tsv"
if [[ ! -s "$work/sts.tsv" ]]; then
  echo "post-render.sh: no StatefulSet labelled component=user-placeholder in the chart's output" \
    "(scheduling.userPlaceholder.enabled: false?): passing it through unchanged" >&2
  cat "$work/all.yaml"
  exit 0
fi
[[ "$(wc -l <"$work/sts.tsv")" -eq 1 ]] ||
  fail "expected one StatefulSet labelled component=user-placeholder, found $(wc -l <"$work/sts.tsv")"
IFS=$'\t' read -r _ sts_name _ replicas release tolerations <"$work/sts.tsv" || true
[[ "$sts_name" =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] || fail "odd StatefulSet name '$sts_name'"
[[ -z "$replicas" ]] && replicas=1 # the API's default
[[ "$replicas" =~ ^[0-9]+$ ]] || fail "odd replicas '$replicas' of StatefulSet $sts_name"
# The Role names every placeholder pod: bounded (and checked as text first, so
# no number overflows the shell's arithmetic).
max_replicas=10000
if [[ ${#replicas} -gt ${#max_replicas} || "$((10#$replicas))" -gt "$max_replicas" ]]; then
  fail "StatefulSet $sts_name has $replicas replicas: at most $max_replicas placeholders (the Role lists each one's pod name); lower scheduling.userPlaceholder.replicas"
fi
replicas="$((10#$replicas))"
if [[ "$replicas" -eq 0 ]]; then
  # scheduling.userPlaceholder.replicas: 0 (the chart's default): placeholders
  # turned off, nothing to patch.
  echo "post-render.sh: StatefulSet $sts_name has 0 replicas: passing the chart's output through unchanged" >&2
  cat "$work/all.yaml"
  exit 0
fi
[[ "$release" =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] ||
  fail "StatefulSet $sts_name has no usable release label (got '$release'): the names this script adds are derived from it"
[[ -n "${SELFDESTRUCT_IMAGE:-}" ]] ||
  fail "SELFDESTRUCT_IMAGE is not set: set it to your build of the selfdestruct image (nobody publishes one), e.g. --post-renderer-args SELFDESTRUCT_IMAGE=REGISTRY/selfdestruct:0.1.0"

# The pods' names: <name>-0 .. <name>-<replicas-1>, for the Role's
# resourceNames.
names="\"$sts_name-0\""
for ((i = 1; i < replicas; i++)); do names+=", \"$sts_name-$i\""; done

# The names this script adds, from the release: the namespaced ones are
# unique in the namespace, the cluster-scoped ones (":" is in no namespace or
# release name) in the cluster.
account="selfdestruct-$release"
node_reader_name="selfdestruct-nodes:$namespace:$release"

# The agent settings, checked by the agent's own parser (unknown names and
# invalid values fail, naming them) and turned into env entries.
if [[ ${#settings[@]} -gt 0 ]]; then
  for s in "${settings[@]}"; do
    if [[ "$s" == SELFDESTRUCT_SIBLING_SELECTOR=* && "$variant" != full ]]; then
      fail "SELFDESTRUCT_SIBLING_SELECTOR needs SELFDESTRUCT_VARIANT=full (the minimal Role cannot list pods)"
    fi
  done
  bin="${SELFDESTRUCT_BIN:-}"
  if [[ -z "$bin" ]]; then
    if command -v selfdestruct >/dev/null 2>&1; then
      bin="$(command -v selfdestruct)"
    elif [[ -x "$here/bin/selfdestruct" ]]; then
      bin="$here/bin/selfdestruct"
    else
      fail "agent settings were passed (${settings[*]}) and checking them needs the selfdestruct binary of your image's version: set SELFDESTRUCT_BIN=PATH, put selfdestruct on PATH, or copy it to $here/bin/selfdestruct (no Rust needed: the release's selfdestruct-VERSION-ARCH-linux-musl checked with its SHA256SUMS, or a script that runs the image, e.g. docker run --rm IMAGE \"\$@\"; docs/jupyterhub.md, step 1)"
    fi
  fi
  # A clean environment: only the settings given are checked.
  env -i "$bin" check-settings "${settings[@]}" >"$work/env.jsonl" 2>"$work/check.err" ||
    fail "$(sed 's/^selfdestruct: //' "$work/check.err" | head -c 600)"
fi

# The Components, copied next to all.yaml (kustomize loads files from below
# its root only), with the release's name for the account, Role and
# RoleBinding in place of the Components' selfdestruct-user-placeholder.
cp -R "$here/selfdestruct" "$here/minimal" "$work/"
sed -i "s/selfdestruct-user-placeholder/$account/g" "$work"/selfdestruct/*.yaml "$work"/minimal/*.yaml
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
      name: $account
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
      name: $account
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

# The node gate's startup taint (manifests/node-gate/) and the cluster
# autoscaler's soft taint on an empty new node, tolerated as by
# manifests/statefulset.yaml. Added to the chart's list (a JSON6902 add keeps
# its hub.jupyter.org/dedicated tolerations), or as the list when it has none.
startup_taint='{"key": "startup-taint.cluster-autoscaler.kubernetes.io/images-pending", "operator": "Exists", "effect": "NoSchedule"}'
deletion_candidate='{"key": "DeletionCandidateOfClusterAutoscaler", "operator": "Exists", "effect": "PreferNoSchedule"}'
if [[ -n "$tolerations" && "$tolerations" != "[]" ]]; then
  toleration_op="{\"op\": \"add\", \"path\": \"/spec/template/spec/tolerations/-\", \"value\": $startup_taint}
      - {\"op\": \"add\", \"path\": \"/spec/template/spec/tolerations/-\", \"value\": $deletion_candidate}"
else
  toleration_op="{\"op\": \"add\", \"path\": \"/spec/template/spec/tolerations\", \"value\": [$startup_taint, $deletion_candidate]}"
fi
# The head of a patch of the placeholder StatefulSet in the kustomization.
sts_patch="  - target:
      group: apps
      version: v1
      kind: StatefulSet
      name: $sts_name
    patch: |-"
cat >>"$work/kustomization.yaml" <<TOLERATION
$sts_patch
      - $toleration_op
TOLERATION


# Read access to Nodes for this release's placeholders (moving to new nodes).
# Cluster-scoped, so named after the namespace and the release: two releases
# each get their own pair, which Helm owns per release.
if [[ "$node_reader" == on ]]; then
  cat >"$work/node-reader.yaml" <<NODE_READER
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: "$node_reader_name"
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
  name: "$node_reader_name"
  labels:
    app.kubernetes.io/name: selfdestruct
    app.kubernetes.io/component: user-placeholder
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: "$node_reader_name"
subjects:
  - kind: ServiceAccount
    name: $account
    namespace: $namespace
NODE_READER
  sed -i 's|^  - all.yaml$|  - all.yaml\n  - node-reader.yaml|' "$work/kustomization.yaml"
fi

# Full variant: siblings are this release's placeholders only, as the chart's
# own selector (component, app, release) picks them, unless a setting names
# others.
if [[ "$variant" == full ]] && ! grep -qs '"SELFDESTRUCT_SIBLING_SELECTOR"' "$work/env.jsonl"; then
  echo "{\"name\":\"SELFDESTRUCT_SIBLING_SELECTOR\",\"value\":\"component=user-placeholder,release=$release\"}" >>"$work/env.jsonl"
fi

# The agent settings passed as arguments (and the full variant's siblings),
# last: they replace the Components' entries of the same name (env is merged
# by name).
if [[ -s "$work/env.jsonl" ]]; then
  cat >>"$work/kustomization.yaml" <<SETTINGS
$sts_patch
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
$(sed 's/^/                  - /' "$work/env.jsonl")
SETTINGS
fi

# SELFDESTRUCT_IMAGE: the image to run, with a tag or a digest. Its name
# follows the image reference grammar (github.com/distribution/reference): an
# optional registry (a host with a dot or a port, or localhost) and path
# components of lowercase letters and digits joined by single separators, at
# most 255 characters; no empty component.
image="$SELFDESTRUCT_IMAGE"
image_form="an image with a tag (REGISTRY/selfdestruct:TAG) or a digest (REGISTRY/selfdestruct@sha256:...)"
host_part='([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])'
registry="(localhost|$host_part(\.$host_part)+|$host_part:[0-9]+|localhost:[0-9]+|$host_part(\.$host_part)+:[0-9]+)"
path_part='[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*'
name="$image" tag="" digest=""
[[ "$name" == *@* ]] && digest="${name#*@}" name="${name%%@*}"
last="${name##*/}"
[[ "$last" == *:* ]] && tag="${last##*:}" name="${name%:*}"
if [[ -n "$digest" && ! "$digest" =~ ^sha256:[0-9a-f]{64}$ ]] ||
  [[ -n "$tag" && ! "$tag" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] ||
  [[ -z "$tag" && -z "$digest" ]] || [[ ${#name} -gt 255 ]] ||
  [[ ! "$name" =~ ^(($registry)/)?$path_part(/$path_part)*$ ]]; then
  fail "SELFDESTRUCT_IMAGE must be $image_form, not '$image'"
fi
if [[ -n "$digest" ]]; then
  # A tag beside the digest stays in the name (the digest decides what runs).
  name="$name${tag:+:$tag}"
  pin="digest: $digest"
else
  pin="newTag: \"$tag\""
fi
cat >>"$work/kustomization.yaml" <<IMAGES
images:
  - name: ghcr.io/selfdestruct/selfdestruct
    newName: $name
    $pin
IMAGES

"$kubectl" kustomize "$work" >"$work/out.yaml"

# What the result says about priority and budgets: one line per object (kind,
# name, component label, pod template's priorityClassName, PriorityClass
# value), read locally by kubectl (no cluster is contacted).
"$kubectl" annotate --local -f "$work/out.yaml" selfdestruct.post-render/unused- \
  -o jsonpath='{.kind}{"\t"}{.metadata.name}{"\t"}{.metadata.labels.component}{"\t"}{.spec.template.spec.priorityClassName}{"\t"}{.value}{"\n"}' \
  >"$work/objects.tsv" 2>"$work/objects.err" ||
  fail "could not check the placeholders' priority and budget: $(head -c 300 "$work/objects.err")"
# One line per finding: "priority<TAB>message" (fails the render unless
# SELFDESTRUCT_PRIORITY_CHECK=off) or "budget<TAB>message" (a warning).
awk -F'\t' '
  $1 == "StatefulSet" && $3 == "user-placeholder" { sts = $2; pc = $4 }
  $1 == "PriorityClass" { value[$2] = $5; if ($3 == "default-priority") user = $2 }
  $1 == "PodDisruptionBudget" && $3 == "user-placeholder" { pdbs++ }
  END {
    fix = "set scheduling.podPriority.enabled: true in the chart'"'"'s values"
    optout = " (or SELFDESTRUCT_PRIORITY_CHECK=off if the cluster gives the placeholders a priority below the users'"'"' another way)"
    if (pc == "") {
      print "priority\tStatefulSet " sts " has no priorityClassName, so the placeholders run at the priority of user pods and no user pod can preempt them: " fix optout
    } else if (!(pc in value)) {
      print "priority\tStatefulSet " sts " uses PriorityClass " pc ", which is not in the chart'"'"'s output, so its value cannot be checked against the users'"'"': " fix optout
    } else {
      up = (user != "") ? value[user] + 0 : 0
      who = (user != "") ? "PriorityClass " user : "user pods without a PriorityClass"
      if (value[pc] + 0 >= up) {
        print "priority\tPriorityClass " pc " of StatefulSet " sts " has value " value[pc] ", not below the user pods'"'"' priority (" who ": " up "), so no user pod can preempt the placeholders: set scheduling.podPriority.userPlaceholderPriority below scheduling.podPriority.defaultPriority (the chart'"'"'s defaults: -10 and 0)" optout
      }
    }
    if (pdbs != 1) {
      print "budget\t" pdbs + 0 " PodDisruptionBudgets labelled component=user-placeholder in the output, not 1: the chart (0.8.0 and later) renders one, which selfdestruct turns into maxUnavailable 1; without it placeholders are not moved one at a time"
    }
  }
' "$work/objects.tsv" >"$work/findings.tsv"
if [[ "$priority_check" == on ]] && grep -q '^priority' "$work/findings.tsv"; then
  fail "$(sed -n 's/^priority\t//p' "$work/findings.tsv" | head -n 1)"
fi
sed -n 's/^budget\t/post-render.sh: WARNING: /p' "$work/findings.tsv" >&2
cat "$work/out.yaml"
