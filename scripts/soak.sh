#!/usr/bin/env bash
# A soak of `idem consume`: a steady publish rate, random SIGKILLs, and samples of what
# must not grow. Shows that memory, descriptors and threads stay flat and that the
# store stays bounded by the TTL.
#
#   scripts/soak.sh --minutes N [--broker redis|nats|rabbitmq|kafka|pulsar] [--idem PATH]
#                   [--rate MSGS_PER_S] [--ttl-ms MS] [--kill-every S] [--warmup S] [--out DIR]
#
# Starts its own broker with scripts/broker.sh (default: Redis Streams), publishes
# --rate messages a second (default 200; one in ten a copy of an earlier one), runs
# `idem consume` on a SQLite store with --ttl-ms (default 60000) as a sidecar in front
# of a shell loop that answers ok (so the database holds idem's records alone), and
# kills it with SIGKILL at random, about every --kill-every seconds (default 300),
# starting it again at once. Every 5 s it samples the consumer: RSS, open
# descriptors, threads, messages decided per second, the records the store holds
# (`idem inspect`: live, and expired not yet purged) and the database file's size.
# Writes OUT/soak-BROKER.tsv and, when gnuplot is installed, draws OUT/soak-BROKER.svg
# (OUT defaults to docs/perf). Then checks, over the samples taken at least --warmup
# seconds after their process started (default 120: SQLite's page cache has grown to
# the records' steady state by then) and once the TTL has passed: each process's RSS
# and descriptors within 5% of that process's lowest value (descriptors: or 2; a
# leak grows a process, while a restarted one may settle a little apart from its
# predecessor, e.g. with a backlog in its client's buffers), and the store's records at
# most what the TTL keeps plus 30 s of purge lag (rate × (TTL + 30 s); a purge runs
# every 1000 commits, and a restarted consumer catches up on what its predecessor
# left). Prints one SOAK line and exits 0 when all hold, 1 otherwise, 2 on bad usage.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
minutes="" broker=redis idem="$root/build/release/tools/idem/idem" rate=200 ttl_ms=60000 kill_every=300
out="$root/docs/perf"
warmup=120

usage() {
  sed -n '2,24p' "$0" >&2
  exit 2
}

while (($#)); do
  case $1 in
    --minutes) minutes=$2 ;;
    --broker) broker=$2 ;;
    --idem) idem=$2 ;;
    --rate) rate=$2 ;;
    --ttl-ms) ttl_ms=$2 ;;
    --kill-every) kill_every=$2 ;;
    --warmup) warmup=$2 ;;
    --out) out=$2 ;;
    *) usage ;;
  esac
  shift 2 || usage
done
[[ $minutes =~ ^[0-9]+$ && $minutes -gt 0 && $rate =~ ^[0-9]+$ && $rate -gt 0 ]] || usage
[[ $ttl_ms =~ ^[0-9]+$ && $kill_every =~ ^[0-9]+$ && $kill_every -gt 0 && $warmup =~ ^[0-9]+$ ]] || usage
[[ -x $idem ]] || { echo "soak.sh: no idem at $idem (build it, or pass --idem)" >&2; exit 2; }
chart=1
command -v gnuplot >/dev/null || { echo "soak.sh: gnuplot not found, so no chart (apt-get install gnuplot-nox)" >&2; chart=0; }

work=$(mktemp -d)
consumer_pid=""
publisher_pid=""
cleanup() {
  [[ -n $publisher_pid ]] && kill "$publisher_pid" 2>/dev/null || true
  [[ -n $consumer_pid ]] && { kill -9 "$consumer_pid"; wait "$consumer_pid"; } 2>/dev/null || true
  [[ -n ${broker_dir:-} ]] && "$root/scripts/broker.sh" stop "$broker_dir" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
cp "$idem" "$work/idem" && idem="$work/idem"  # a rebuild meanwhile cannot replace it under the run

# The broker, and the URIs of its stream: publish_uri and source_uri.
start_broker() {
  local env u
  env=$("$root/scripts/broker.sh" start "$broker" --owner $$)
  value() { sed -n "s/^$1=//p" <<<"$env"; }
  broker_dir=$(value DIR)
  case $broker in
    redis) u=$(value REDIS_URL) && u="redis-stream${u#redis}/soak" && publish_uri=$u source_uri="$u?group=soak" ;;
    nats) u="$(value NATS_URL)?stream=SOAK" && publish_uri=$u source_uri="$u&durable=soak" ;;
    rabbitmq) u="$(value AMQP_URL)?queue=soak" && publish_uri=$u source_uri=$u ;;
    kafka) u="kafka://$(value KAFKA_BOOTSTRAP)/soak" && publish_uri=$u source_uri="$u?group=soak" ;;
    pulsar) u=$(value PULSAR_WEB) && u="pulsar-ws${u#http}/public/default/soak" && publish_uri=$u \
      source_uri="$u?subscription=soak" ;;
    *) usage ;;
  esac
}

# Publishes `rate` messages a second, one in ten a copy of an earlier id.
publish_loop() {
  local n=0 second
  while :; do
    second=$(date +%s)
    : >"$work/batch.jsonl"
    for ((i = 0; i < rate; i++)); do
      if ((i % 10 == 9 && n > 0)); then
        echo "{\"id\":\"s-$((RANDOM % n))\"}" >>"$work/batch.jsonl"
      else
        echo "{\"id\":\"s-$n\"}" >>"$work/batch.jsonl"
        n=$((n + 1))
      fi
    done
    "$idem" publish --to "$publish_uri" "$work/batch.jsonl" >/dev/null 2>>"$work/publish.err" || true
    while (($(date +%s) == second)); do sleep 0.05; done
  done
}

# As a sidecar in front of a handler that answers ok at once (a shell loop), so that
# the database holds idem's records alone, not an effect row per message.
start_consumer() {
  "$idem" consume --source "$source_uri" --store "sqlite:$work/soak.db?leases=shared" --ttl-ms "$ttl_ms" --workers 4 \
    --lease-ms 5000 --id /id --handler "exec:$handler" >>"$work/decisions.jsonl" 2>>"$work/consume.err" &
  consumer_pid=$!
  consumer_started=$(date +%s)
}

# The records the store holds: live, and expired but not yet purged.
store_records() {
  "$idem" inspect --store "sqlite:$work/soak.db?leases=shared" 2>/dev/null |
    awk '/^records:/{n += $2 + $4 + $7 + $10} /^expired:/{n += $2} END {print n + 0}'
}

# One sample line: t, rss_kib, fds, threads, decided/s, records, kill (0/1), age, db_kib.
sample() {
  local t=$1 killed=$2 decided rate_now rss fds threads records db
  decided=$(grep -c '"type":"decision"' "$work/decisions.jsonl" || true)
  rate_now=$(((decided - last_decided) / 5))
  last_decided=$decided
  rss=$(awk '/^VmRSS:/{print $2}' "/proc/$consumer_pid/status" 2>/dev/null || echo 0)
  threads=$(awk '/^Threads:/{print $2}' "/proc/$consumer_pid/status" 2>/dev/null || echo 0)
  fds=$(find "/proc/$consumer_pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
  records=$(store_records)
  db=$(du -sk "$work/soak.db" 2>/dev/null | awk '{print $1}')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$rss" "$fds" "$threads" "$rate_now" "$records" "$killed" \
    "$(($(date +%s) - consumer_started))" "${db:-0}" >>"$tsv"
}

draw() {
  gnuplot <<EOF
set terminal svg size 900,640 dynamic font "sans,11" background rgb "white"
set output "$svg"
set multiplot layout 2,1 title "idem consume soak on $broker: $minutes min, $rate msg/s published, SIGKILL about every ${kill_every} s, TTL $((ttl_ms / 1000)) s"
set xlabel "seconds"
set key outside right
set ylabel "MiB"
set y2label "count"
set y2tics
plot "$tsv" using 1:(\$2/1024) with lines lw 2 title "RSS (MiB)", \
     "$tsv" using 1:(\$9/1024) with lines title "database file (MiB)", \
     "$tsv" using 1:3 axes x1y2 with lines title "descriptors", \
     "$tsv" using 1:4 axes x1y2 with lines title "threads", \
     "$tsv" using 1:(\$7 > 0 ? 0 : 1/0) with points pt 7 ps 0.6 title "SIGKILL"
set ylabel "messages/s"
set y2label "records"
plot "$tsv" using 1:5 with lines lw 2 title "decided per second", \
     "$tsv" using 1:6 axes x1y2 with lines lw 2 title "store records"
unset multiplot
EOF
}

# Checks the samples; prints the SOAK line; returns 0 when all hold.
check() {
  awk -F'\t' -v warmup="$warmup" -v ttl="$((ttl_ms / 1000))" -v broker="$broker" -v minutes="$minutes" \
    -v keep="$((rate * (ttl_ms / 1000 + 30)))" '
    $8 < age { process++ }  # a new process: its age starts again
    { age = $8 }
    $8 >= warmup && $1 >= warmup + ttl && $2 > 0 {
      if (!n++) { rmin = rmax = $2; fmin = fmax = $3 }
      rmin = $2 < rmin ? $2 : rmin; rmax = $2 > rmax ? $2 : rmax
      fmin = $3 < fmin ? $3 : fmin; fmax = $3 > fmax ? $3 : fmax
      smax = $6 > smax ? $6 : smax
      if (!(process in pmin) || $2 < pmin[process]) pmin[process] = $2
      if ($2 > pmax[process]) pmax[process] = $2
      if (!(process in qmin) || $3 < qmin[process]) qmin[process] = $3
      if ($3 > qmax[process]) qmax[process] = $3
    }
    { kills += $7; decided += $5 * 5 }
    END {
      if (n == 0) { print "SOAK broker=" broker " result=too_short (no sample after warm-up and the TTL)"; exit 1 }
      ok = smax <= keep
      for (p in pmin) {
        grew = pmax[p] / pmin[p] - 1
        worst = grew > worst ? grew : worst
        ok = ok && grew <= 0.05 && (qmax[p] <= qmin[p] * 1.05 || qmax[p] - qmin[p] <= 2)
      }
      printf "SOAK broker=%s minutes=%s samples=%d kills=%d decided=%d rss_mib=%.1f..%.1f rss_growth_in_a_process=%.1f%% fds=%d..%d records_max=%d records_bound=%d result=%s\n",
        broker, minutes, n, kills, decided, rmin / 1024, rmax / 1024, worst * 100, fmin, fmax, smax, keep,
        ok ? "ok" : "grew"
      exit ok ? 0 : 1
    }' "$tsv"
}

mkdir -p "$out"
handler='while read -r line; do echo "{\"status\":\"ok\"}"; done'
tsv="$out/soak-$broker.tsv" svg="$out/soak-$broker.svg"
printf '# t_s\trss_kib\tfds\tthreads\tdecided_per_s\tstore_records\tkilled\tprocess_age_s\tdb_kib\n' >"$tsv"
start_broker
publish_loop &
publisher_pid=$!
last_decided=0
start_consumer
next_kill=$((RANDOM % kill_every + kill_every / 2))
begin=$(date +%s)
while (($(date +%s) - begin < minutes * 60)); do
  sleep 5
  t=$(($(date +%s) - begin))
  killed=0
  if ((t >= next_kill)); then
    kill -9 "$consumer_pid" 2>/dev/null || true
    wait "$consumer_pid" 2>/dev/null || true
    start_consumer
    killed=1
    next_kill=$((t + RANDOM % kill_every + kill_every / 2))
  fi
  sample "$t" "$killed"
done
((chart)) && draw
check
