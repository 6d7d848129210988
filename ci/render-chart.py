"""Renders a Helm chart with Helm's own engine (helm-python-sdk: Helm v4's Go
SDK as a C library; no helm binary, no cluster) the way `helm template` does:
the values are checked against the chart's values.schema.json first, then
the templates are rendered.

    python ci/render-chart.py CHART RELEASE NAMESPACE [VALUES.yaml ...] [HELM VALUE FLAGS ...]
    python ci/render-chart.py --lint CHART

The value flags are `helm template`'s: -f/--values FILE (comma-separated
files too), --set, --set-string, --set-json, --set-file and --set-literal,
each also as --flag=VALUE; a bare file argument is a values file. As in Helm,
values files are merged first (in order), then every --set-json, --set,
--set-string, --set-file and --set-literal in that order (each kind in
command-line order), whatever the order on the command line.

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
    try:
        values = values_from(argv[3:])
    except (OSError, ValueError, helm.HelmError) as e:
        print(e, file=sys.stderr)
        return 1
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


# Helm's order of the value flags (pkg/cli/values.Options.MergeValues), and
# how each is parsed.
SET_FLAGS = {
    "--set-json": helm.parse_set_json,
    "--set": helm.parse_set_string,
    "--set-string": helm.parse_set_string_values,
    "--set-file": helm.parse_set_file,
    "--set-literal": helm.parse_set_literal,
}


def values_from(args):
    """The values `helm template` would take from these arguments."""
    files, sets = [], {flag: [] for flag in SET_FLAGS}
    i = 0
    while i < len(args):
        arg = args[i]
        flag, eq, value = arg.partition("=")
        if flag in ("-f", "--values") or flag in SET_FLAGS:
            if not eq:
                if i + 1 >= len(args):
                    raise ValueError("%s needs a value" % flag)
                value = args[i + 1]
                i += 1
            if flag in ("-f", "--values"):
                files.extend(v for v in value.split(",") if v)
            else:
                sets[flag].append(value)
        elif arg.startswith("-"):
            raise ValueError("unknown flag %s (render-chart.py takes helm template's "
                             "value flags: -f/--values, %s)" % (arg, ", ".join(SET_FLAGS)))
        else:
            files.append(arg)
        i += 1
    values = {}
    for path in files:
        with open(path) as f:
            values = merge(values, yaml.safe_load(f) or {})
    for flag, parse in SET_FLAGS.items():
        for expression in sets[flag]:
            values = merge(values, parse(expression))
    return values


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
