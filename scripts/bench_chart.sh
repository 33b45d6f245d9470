#!/usr/bin/env bash
# Draws `idem bench`'s BENCH lines as a bar chart (SVG) with gnuplot.
#
#   scripts/bench_chart.sh run IDEM OUT_DIR URI [idem bench options...]
#       runs `IDEM bench --store URI [options]`, keeps its output as
#       OUT_DIR/bench-<scheme>.txt (with the command, machine and date on top) and
#       draws OUT_DIR/bench-<scheme>.svg from it; exits with idem bench's status.
#   scripts/bench_chart.sh draw BENCH_TXT OUT_SVG
#       draws OUT_SVG from a saved output (only its BENCH lines and header are read).
#
# Needs gnuplot (Debian: apt-get install gnuplot-nox).
set -euo pipefail

usage() {
  sed -n '2,12p' "$0" >&2
  exit 2
}

# draw TXT SVG: one bar per BENCH line, msgs/s, the rate printed above each bar.
draw() {
  local txt=$1 svg=$2
  command -v gnuplot >/dev/null || { echo "bench_chart.sh: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
  local data
  data=$(mktemp)
  awk '/^BENCH /{ for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
                  print f["path"], f["msgs_per_s"], f["p99_us"]; store = f["store"] }
       END { if (store == "") exit 1 }' "$txt" >"$data" ||
    { echo "bench_chart.sh: no BENCH lines in $txt" >&2; exit 1; }
  local store title subtitle
  store=$(awk '/^BENCH /{ sub(/.*store=/, ""); sub(/ .*/, ""); print; exit }' "$txt")
  title="idem bench, store=${store}: messages per second (higher is better)"
  subtitle=$(grep -m1 '^# machine:' "$txt" | sed 's/^# machine: //' || true)
  local command
  command=$(grep -m1 "^# command:" "$txt" | sed "s/^# command: //" || true)
  gnuplot <<EOF
set terminal svg size 760,420 dynamic font "sans,12" background rgb "white"
set output "${svg}"
set title "${title}\n${command}\n${subtitle}" noenhanced
set style data histograms
set style fill solid 0.85 border -1
set boxwidth 0.7
set yrange [0:*]
set format y "%.1s%c"
set ylabel "msgs/s"
set grid ytics
unset key
set xtics noenhanced
set offsets 0, 0, graph 0.1, 0
plot "${data}" using 2:xtic(1) linecolor rgb "#4472c4", \
     "" using 0:2:(gprintf("%.2s%c", \$2)) with labels offset 0,0.8 notitle
EOF
  rm -f "$data"
}

# run IDEM OUT_DIR URI [options]: idem bench, its output saved with a header, then draw.
run() {
  local idem=$1 out=$2 uri=$3
  shift 3
  local scheme=${uri%%:*}
  mkdir -p "$out"
  local txt="$out/bench-${scheme}.txt"
  {
    echo "# command: idem bench --store ${uri}${*:+ $*}"
    echo "# machine: $(nproc) vCPU $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(uname -sr), $(date -u +%Y-%m-%d)"
  } >"$txt"
  local rc=0
  "$idem" bench --store "$uri" "$@" >>"$txt" || rc=$?
  cat "$txt"
  draw "$txt" "$out/bench-${scheme}.svg"
  return "$rc"
}

[[ $# -ge 1 ]] || usage
case $1 in
  draw) [[ $# -eq 3 ]] || usage; draw "$2" "$3" ;;
  run) [[ $# -ge 4 ]] || usage; shift; run "$@" ;;
  *) usage ;;
esac
