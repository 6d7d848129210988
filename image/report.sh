#!/usr/bin/env bash
# Figures of the image built by image/build.sh: layers and sizes, then the
# image run as a container (runc, as root) in plain pause mode under the
# placeholder manifest's security settings (uid 65534 from the image,
# read-only root, no capabilities, no new privileges), idle for a while:
# memory and CPU of the container's PID 1, and `runc kill TERM` to exit.
# bench/run.sh calls it; it prints figures and asserts nothing
# (tests/image.rs is the test).
#
#   bash image/report.sh LAYOUT:TAG [IDLE_SECONDS]     # default: 10 s idle
#
# Needs umoci, runc, python3 and root.
set -euo pipefail

reference="${1:?usage: image/report.sh LAYOUT:TAG [IDLE_SECONDS]}"
idle="${2:-10}"
layout="${reference%:*}"

for tool in umoci runc python3; do
  command -v "$tool" >/dev/null || { echo "image/report.sh: $tool is needed" >&2; exit 1; }
done
[[ "$(id -u)" == 0 ]] || { echo "image/report.sh: runc needs root" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/selfdestruct-image-report.XXXXXX")"
id="selfdestruct-report-$$"
state="$work/runc"
cleanup() {
  runc --root "$state" kill "$id" KILL 2>/dev/null || true
  runc --root "$state" delete --force "$id" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Layers and sizes from the layout's manifest.
python3 - "$layout" <<'PY'
import json, os, sys
layout = sys.argv[1]
def blob(d):
    alg, hex_ = d.split(":", 1)
    return os.path.join(layout, "blobs", alg, hex_)
index = json.load(open(os.path.join(layout, "index.json")))
desc = index["manifests"][0]
manifest = json.load(open(blob(desc["digest"])))
layers = [l["size"] for l in manifest["layers"]]
total = desc["size"] + manifest["config"]["size"] + sum(layers)
mib = lambda n: f"{n / 1048576:.2f} MiB"
print(f"image: {len(layers)} layer(s), {mib(sum(layers))} compressed (gzip layers; "
      f"{mib(total)} with manifest and config)")
PY

umoci unpack --image "$reference" "$work/bundle" >/dev/null
echo "image: $(du -b --apparent-size -s "$work/bundle/rootfs" | cut -f1) bytes unpacked ($(find "$work/bundle/rootfs" -mindepth 1 -maxdepth 1 -printf '%f\n' | LC_ALL=C sort | tr '\n' ' '))"
python3 - "$work/bundle/config.json" <<'PY'
import json, sys
path = sys.argv[1]
c = json.load(open(path))
p = c["process"]
p["terminal"] = False
p["env"] = [e for e in p.get("env", []) if not e.startswith("TERM=")] + [
    "HOME=/"]
p["capabilities"] = {k: [] for k in ("bounding", "effective", "inheritable", "permitted", "ambient")}
p["noNewPrivileges"] = True
c["root"]["readonly"] = True
c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] != "network"]
json.dump(c, open(path, "w"))
PY

runc --root "$state" run --bundle "$work/bundle" --pid-file "$work/pid" "$id" \
  </dev/null >"$work/log" 2>&1 &
runc_pid=$!
for _ in $(seq 300); do
  grep -q "plain pause container" "$work/log" 2>/dev/null && break
  kill -0 "$runc_pid" 2>/dev/null || break
  sleep 0.1
done
grep -q "plain pause container" "$work/log" || {
  echo "image/report.sh: the container did not reach its idle pause:" >&2
  cat "$work/log" >&2
  exit 1
}
pid="$(cat "$work/pid")"
# The log line comes just before the start-up memory is given back: let it
# settle (the default log level, as in a pod; debug logging would bring
# formatting code back into memory after the release).
sleep 1
field() { awk -v k="$1:" '$1 == k { $1 = ""; sub(/^ /, ""); print }' "/proc/$pid/status"; }
ticks() { awk '{ sub(/.*\) /, ""); split($0, f, " "); print f[12] + f[13] }' "/proc/$pid/stat"; }
switches() { echo $(( $(field voluntary_ctxt_switches) + $(field nonvoluntary_ctxt_switches) )); }
t0="$(ticks)" s0="$(switches)"
sleep "$idle"
t1="$(ticks)" s1="$(switches)"
echo "container PID 1 (NSpid $(field NSpid | tr '\t' ' '), uid $(field Uid | cut -d" " -f1), plain pause mode), after ${idle} s idle:"
echo "  VmRSS $(field VmRSS) (RssAnon $(field RssAnon), RssFile $(field RssFile)), VmHWM $(field VmHWM)"
echo "  CPU over ${idle} s idle: $((t1 - t0)) ticks; context switches: $((s1 - s0)); threads: $(field Threads)"
start="$(date +%s%N)"
runc --root "$state" kill "$id" TERM
code=0
wait "$runc_pid" || code=$?
end="$(date +%s%N)"
echo "  runc kill TERM -> container exit code $code in $(( (end - start) / 1000000 )) ms (runc's own start-up included)"
