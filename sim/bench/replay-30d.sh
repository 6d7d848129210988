#!/usr/bin/env bash
# The 30-day replay benchmark (sim/README.md, "Streaming and speed"): writes a
# SYNTHETIC BinderHub-like 30-day launch log (about 2.9 million launches, a
# daily ramp from 4 to 130 launches a minute, about 38 nodes at the peak) with
# sim/data/make-launches.py, builds the simulator (release) and times the
# replay of every row with one seed. Prints the simulator's own timings and
# /usr/bin/time's wall, CPU and peak RSS. Nothing is asserted. Further
# arguments go to simulate.
#
#   bash sim/bench/replay-30d.sh              # the log goes to ${TMPDIR:-/tmp}
#   bash sim/bench/replay-30d.sh --recommend  # the 30-day search (docs/benchmarks.md)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
log="${TMPDIR:-/tmp}/selfdestruct-launches-30d.jsonl"
out="${TMPDIR:-/tmp}/selfdestruct-replay-30d.out"
if [ ! -s "$log" ]; then
  python3 "$root/sim/data/make-launches.py" --days 30 --rate-low 40 --rate-high 1300 \
    --class none --out "$log"
fi
(cd "$root" && cargo build --release -p selfdestruct-sim >&2)
/usr/bin/time -f "%e s wall, %U s user, %S s sys, %M KB peak RSS" \
  "${CARGO_TARGET_DIR:-$root/target}/release/simulate" --arrivals "$log" --seeds 1 "$@" >"$out"
echo "the table: $out" >&2
