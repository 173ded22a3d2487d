#!/usr/bin/env bash
# Sequential tests over many groups and looks (issue 44): `batch` wall time per mechanism,
# one sequential gof test per group looked at every second of event time.
#
#   benches/sequential_groups.sh [MECHANISM ...]     (default: all six below)
#
# Input: SLICES files (one per second of event time), each with GROUPS groups of PER
# reports (d = 16, ε = 1, uniform truth), so each of the SLICES looks of the cumulative
# window sees every group: GROUPS × SLICES evaluations (300 × 100 by default, with the
# window's final record). mc_samples = 21 (it matters for olh only: OlhSupportGOF is
# always Monte Carlo). Uses LDPSTREAM_BIN (default target/release/ldpstream), or every
# binary in LDPSTREAM_BINS (space-separated: a column each, run back to back on the same
# input, e.g. a build of main's commit beside the branch's, with `cmp` of their records);
# prints `uptime` before and after, since the figures are only comparable on one load.
# SMOKE=1: 3 groups × 3 slices, for benches/smoke.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${LDPSTREAM_BIN:-${LDPSTREAM_BIN_DIR:-target/release}/ldpstream}
if [ "${SMOKE:-0}" = 1 ]; then
  groups=${GROUPS_N:-3} slices=${SLICES:-3} per=${PER:-20}
else
  groups=${GROUPS_N:-300} slices=${SLICES:-100} per=${PER:-20}
fi
mechanisms=("$@")
[ ${#mechanisms[@]} -gt 0 ] || mechanisms=(grr oue bitflip subset hadamard olh)
# WORK=DIR keeps the inputs, configs and records there (for a profiler); else a temp dir.
if [ -n "${WORK:-}" ]; then
  work=$WORK
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
labels=$(python3 -c "print(','.join(f'g{i:03d}={$per}' for i in range($groups)))")
t0=1767225600
read -r -a bins <<<"${LDPSTREAM_BINS:-$bin}"
echo "# $groups groups x $slices looks x $per reports per group per look; ${bins[*]}"
uptime
printf '| mechanism | reports | records |'
for b in "${bins[@]}"; do printf ' %s (s) |' "$(basename "$b")"; done
printf ' records |\n|---|---|---|'
for _ in "${bins[@]}"; do printf -- '---|'; done
printf -- '---|\n'
for mech in "${mechanisms[@]}"; do
  mkdir -p "$work/$mech"
  for ((s = 0; s < slices; s++)); do
    "${bins[0]}" simulate --mechanism "$mech" --epsilon 1 --domain 16 --groups "$labels" \
      --seed "$s" --ts-start "$(date -u -d "@$((t0 + s))" +%Y-%m-%dT%H:%M:%SZ)" \
      --rate 1000000 --out "$work/$mech/part-$s.parquet" >/dev/null 2>&1
  done
  cat >"$work/$mech.toml" <<EOF
[[stream]]
name = "s"
source = { kind = "parquet", paths = ["$work/$mech/*.parquet"] }
mechanism = { kind = "$mech", epsilon = 1.0, domain = 16 }
columns = { group_by = ["group"] }
[[stream.test]]
name = "anytime"
kind = "gof"
null = "uniform"
sequential = true
mc_samples = 21
window = { kind = "cumulative", looks = "1s" }
EOF
  walls=()
  for i in "${!bins[@]}"; do
    started=$(date +%s.%N)
    "${bins[$i]}" batch --config "$work/$mech.toml" --output "$work/$mech.$i.jsonl" 2>/dev/null
    ended=$(date +%s.%N)
    walls+=("$(printf '%.1f' "$(echo "$ended - $started" | bc)")")
  done
  records=$(wc -l <"$work/$mech.0.jsonl")
  [ "$records" -gt 0 ] || { echo "no records for $mech" >&2; exit 1; }
  same=identical
  for i in "${!bins[@]}"; do
    cmp -s "$work/$mech.0.jsonl" "$work/$mech.$i.jsonl" || same=different
  done
  printf '| %s | %d | %d |' "$mech" $((groups * slices * per)) "$records"
  for w in "${walls[@]}"; do printf ' %s |' "$w"; done
  printf ' %s |\n' "$same"
done
uptime
