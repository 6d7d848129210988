"""Renders a Helm chart with Helm's own engine (helm-python-sdk: Helm v4's Go
SDK as a C library; no helm binary, no cluster) the way `helm template` does:
the values are checked against the chart's values.schema.json first, then
the templates are rendered.

    python ci/render-chart.py CHART RELEASE NAMESPACE [VALUES.yaml ...] [--set K=V ...] [--set-json K=JSON ...]
    python ci/render-chart.py --lint CHART

Writes the rendered objects as one YAML stream to stdout (templates in name
order, NOTES.txt left out) and exits 0; or writes Helm's message to stderr and
exits 1 (a schema error names each offending value). `--notes` writes the
rendered NOTES.txt instead; `--json` writes the objects as one JSON array.
`--lint` runs `helm lint --strict` on the chart: exit 1 on any warning or
error, each printed. Used by ci/validate-manifests.sh and
tests/chart.rs, from the venv ci/validate-manifests.sh builds.
"""
import json
import sys

import helm_python as helm
import yaml


def lint(chart_dir):
    report = helm.lint(chart_dir, strict=True)
    bad = [m for m in report["messages"] if m["severity"] >= 2]
    for m in bad:
        print("%s: %s" % (m["path"], m["error"]), file=sys.stderr)
    for e in report["errors"]:
        print(e, file=sys.stderr)
    return 1 if bad or report["errors"] else 0


def main(argv):
    if argv[:1] == ["--lint"] and len(argv) == 2:
        return lint(argv[1])
    notes, as_json = "--notes" in argv, "--json" in argv
    argv = [a for a in argv if a not in ("--notes", "--json")]
    if len(argv) < 3:
        sys.exit(__doc__)
    chart_dir, release, namespace = argv[:3]
    values = {}
    rest = argv[3:]
    i = 0
    while i < len(rest):
        if rest[i] in ("--set", "--set-json"):
            parse = helm.parse_set_string if rest[i] == "--set" else helm.parse_set_json
            values = merge(values, parse(rest[i + 1]))
            i += 2
            continue
        with open(rest[i]) as f:
            values = merge(values, yaml.safe_load(f) or {})
        i += 1
    try:
        with helm.Chart.load(chart_dir) as chart:
            chart.validate_schema(chart.merge_values(values))
            out = chart.render(values, name=release, namespace=namespace,
                               is_install=True)
    except helm.HelmError as e:
        print(e, file=sys.stderr)
        return 1
    docs = []
    for path in sorted(out):
        text = out[path]
        if path.endswith("NOTES.txt"):
            if notes:
                sys.stdout.write(text)
                return 0
            continue
        if text.strip():
            docs.append("# Source: %s\n%s" % (path, text.strip("\n")))
    if notes:
        print("no NOTES.txt", file=sys.stderr)
        return 1
    if as_json:
        objects = [o for d in docs for o in yaml.safe_load_all(d) if o is not None]
        json.dump(objects, sys.stdout)
        return 0
    sys.stdout.write("---\n".join(d + "\n" for d in docs))
    return 0


def merge(base, over):
    """Values files merge as Helm merges them: maps key by key, the rest replaced."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


sys.exit(main(sys.argv[1:]))
