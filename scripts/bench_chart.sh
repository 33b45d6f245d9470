#!/usr/bin/env bash
# Draws benchmark output as SVG charts with gnuplot: `idem bench`'s BENCH lines, and
# idem_bench_runtime's broker rows and workers curves.
#
#   scripts/bench_chart.sh run IDEM OUT_DIR URI [idem bench options...]
#       runs `IDEM bench --store URI [options]`, keeps its output as
#       OUT_DIR/bench-<scheme>.txt (with the command, machine and date on top) and
#       draws OUT_DIR/bench-<scheme>.svg from it; exits with idem bench's status.
#   scripts/bench_chart.sh draw BENCH_TXT OUT_SVG
#       draws OUT_SVG from a saved output (only its BENCH lines and header are read).
#   scripts/bench_chart.sh brokers RUNTIME_TXT OUT_SVG
#       draws, from idem_bench_runtime's output, each broker's plain and idem rows
#       beside SQLite's batch floor.
#   scripts/bench_chart.sh curve RUNTIME_TXT OUT_SVG
#       draws, from idem_bench_runtime's output, the workers curves (sleep1ms_w<W>,
#       kafka_sleep1ms_w<W>): msgs/s over one worker's, with W and 0.8 W.
#
# Needs gnuplot (Debian: apt-get install gnuplot-nox).
set -euo pipefail

usage() {
  sed -n '2,19p' "$0" >&2
  exit 2
}

need_gnuplot() {
  command -v gnuplot >/dev/null || { echo "bench_chart.sh: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
}

# The rate of row $2 in idem_bench_runtime's output $1 (commas dropped), or nothing.
row_rate() { awk -v row="$2" '$1 == row { gsub(",", "", $2); print $2; exit }' "$1"; }

# draw TXT SVG: one bar per BENCH line, msgs/s, the rate printed above each bar.
draw() {
  local txt=$1 svg=$2
  need_gnuplot
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

# brokers TXT SVG: per broker, plain and idem side by side, and SQLite's batch floor.
brokers() {
  local txt=$1 svg=$2
  need_gnuplot
  local data floor
  data=$(mktemp)
  floor=$(row_rate "$txt" sqlite_batch_floor)
  for b in stream amqp nats kafka pulsar; do
    local plain idem
    plain=$(row_rate "$txt" "plain_$b")
    idem=$(row_rate "$txt" "idem_$b")
    if [[ -n $plain && -n $idem ]]; then echo "$b $plain $idem ${floor:-0}" >>"$data"; fi
  done
  [[ -s $data ]] || { echo "bench_chart.sh: no broker rows in $txt" >&2; exit 1; }
  gnuplot <<EOF
set terminal svg size 760,420 dynamic font "sans,12" background rgb "white"
set output "${svg}"
set title "idem_bench_runtime: each broker's plain loop and idem (SQLite transactional, batch 100)" noenhanced
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set yrange [0:*]
set format y "%.1s%c"
set ylabel "msgs/s"
set grid ytics
set key top right
set xtics noenhanced
plot "${data}" using 2:xtic(1) title "plain (no dedup)" linecolor rgb "#a5a5a5", \
     "" using 3 title "idem" linecolor rgb "#4472c4", \
     "" using 4 title "SQLite batch floor" linecolor rgb "#ed7d31"
EOF
  rm -f "$data"
}

# curve TXT SVG: msgs/s with W workers over one worker's, for each curve in TXT.
curve() {
  local txt=$1 svg=$2
  need_gnuplot
  local redis kafka r1 k1
  redis=$(mktemp)
  kafka=$(mktemp)
  r1=$(row_rate "$txt" sleep1ms_w1)
  k1=$(row_rate "$txt" kafka_sleep1ms_w1)
  for w in 1 2 4 8 16; do
    local r k
    r=$(row_rate "$txt" "sleep1ms_w$w")
    k=$(row_rate "$txt" "kafka_sleep1ms_w$w")
    if [[ -n $r && -n $r1 ]]; then echo "$w $(awk -v a="$r" -v b="$r1" 'BEGIN { print a / b }')" >>"$redis"; fi
    if [[ -n $k && -n $k1 ]]; then echo "$w $(awk -v a="$k" -v b="$k1" 'BEGIN { print a / b }')" >>"$kafka"; fi
  done
  [[ -s $redis ]] || { echo "bench_chart.sh: no sleep1ms_w rows in $txt" >&2; exit 1; }
  local more=""
  [[ -s $kafka ]] && more=", \"${kafka}\" using 1:2 with linespoints lw 2 lc rgb \"#70ad47\" title \"Kafka, memory store\""
  gnuplot <<EOF
set terminal svg size 760,420 dynamic font "sans,12" background rgb "white"
set output "${svg}"
set title "Workers curve: a handler that sleeps 1 ms (idem_bench_runtime)" noenhanced
set xlabel "workers"
set ylabel "msgs/s over one worker's"
set logscale x 2
set xrange [0.9:17]
set yrange [0:17]
set grid
set key top left
plot x with lines dt 2 lc rgb "#a5a5a5" title "W (linear)", \
     0.8*x with lines dt 3 lc rgb "#ed7d31" title "0.8 W (target)", \
     "${redis}" using 1:2 with linespoints lw 2 lc rgb "#4472c4" title "Redis Streams, Redis store"${more}
EOF
  rm -f "$redis" "$kafka"
}

[[ $# -ge 1 ]] || usage
case $1 in
  draw) [[ $# -eq 3 ]] || usage; draw "$2" "$3" ;;
  run) [[ $# -ge 4 ]] || usage; shift; run "$@" ;;
  brokers) [[ $# -eq 3 ]] || usage; brokers "$2" "$3" ;;
  curve) [[ $# -eq 3 ]] || usage; curve "$2" "$3" ;;
  *) usage ;;
esac
