#!/usr/bin/env bash
# Renders the deployment YAML from the Helm chart, its one source:
# manifests/ and rbac/ (the kustomize bases) and the zero-to-jupyterhub
# Component manifests/jupyterhub/selfdestruct/ (ci/render-manifests.py says
# with which values). Run it after changing charts/selfdestruct and commit
# what it writes; tests/chart.rs fails when a fresh render differs.
#
#   bash ci/render-manifests.sh [--out DIR]
#
# Uses the venv of ci/validate-manifests.sh (helm-python-sdk: Helm's engine
# as a library, no helm binary).
set -euo pipefail
cd "$(dirname "$0")/.."
python="${VALIDATE_VENV:-${TMPDIR:-/tmp}/selfdestruct-validate-venv}/bin/python"
if ! "$python" -c 'import helm_python, yaml' 2>/dev/null; then
  echo "render-manifests: needs $python with helm-python-sdk and PyYAML: run \`bash ci/validate-manifests.sh\` once" >&2
  exit 1
fi
exec "$python" ci/render-manifests.py "$@"
