#!/usr/bin/env bash
# A soak of `idem consume`: a steady publish rate, SIGKILLs, and samples of what must
# not grow and what must keep moving. Shows that memory, descriptors and threads stay
# flat, that the store stays bounded by the TTL, and that the consumer keeps up and
# leaves nothing published undecided.
#
#   scripts/soak.sh --minutes N [--broker redis|nats|rabbitmq|kafka|pulsar] [--idem PATH]
#                   [--rate MSGS_PER_S] [--ttl-ms MS] [--kill-every S] [--warmup S]
#                   [--drain S] [--out DIR] [--handler-hang-after N]
#
# Starts its own broker with scripts/broker.sh (default: Redis Streams), publishes
# --rate messages a second (default 200; one in ten a copy of an earlier one), runs
# `idem consume` on a SQLite store with --ttl-ms (default 60000) as a sidecar in front
# of a shell loop that answers ok (so the database holds idem's records alone), and
# SIGKILLs it about every --kill-every seconds (default 300; at k × S plus a jitter of
# up to S/4), starting it again at once. No kill comes later than --warmup + 35 s
# before the end, so the last process always lives long enough to be judged (below).
# Every 5 s it samples the consumer: alive or not, RSS, open descriptors, threads,
# messages published and decided, the records the store holds (`idem inspect --json`:
# pending, in progress, done, dead-lettered, and expired not yet purged) and the
# database file's size. Writes OUT/soak-BROKER.tsv and, when gnuplot is installed,
# draws OUT/soak-BROKER.svg (OUT defaults to docs/perf). After the timed part it stops
# publishing, waits until the consumer is quiet for 5 s (at most --drain seconds,
# default 60) and stops it with SIGTERM, on which it flushes its decision lines. It
# fails when any of these holds:
# - a publish failed;
# - the consumer was not alive at a sample (other than the one right after a kill);
# - in a 5 s window outside the recovery after a start or kill (15 s; Kafka 25 s: a
#   killed member keeps the topic's one partition until its 10 s session times out,
#   then the backlog drains), fewer messages were acked as processed or duplicate
#   than half those published in it; or the backlog (published minus those decisions)
#   at such a sample exceeded rate × the recovery window;
# - after the drain, a published id has no decision (ack or dead letter). An id that
#   the handler ran among the last runs of a SIGKILLed process is counted as
#   unconfirmed instead, as long as no more of them point at that process than 8 KiB
#   of decision lines hold (its stdout buffer, which the SIGKILL lost): it ran and was
#   not delivered again, and its decision line died with the process;
# - a decision dead-lettered a message (the handler always answers ok);
# - over the samples taken at least --warmup seconds after their process started
#   (default 120: SQLite's page cache has grown to the records' steady state by then)
#   and once the TTL has passed ("counted"): a process with at least 6 counted samples
#   (a "judged" one; there must be at least one) grew its RSS or descriptors more than
#   5% above its lowest value (descriptors: or 2; a leak grows a process, while a
#   restarted one may settle a little apart from its predecessor), or the store held
#   more records than rate × (TTL + 30 s) (what the TTL keeps plus the purge's lag:
#   a purge runs every 1000 commits, and a restarted consumer catches up on what its
#   predecessor left), or `idem inspect` could not count them.
# --handler-hang-after N is a self-test of these checks: the handler stops answering
# after about N messages, and the run must fail. Prints one SOAK line (with the reason
# when it fails) and exits 0 when all hold, 1 otherwise, 2 on bad usage.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
minutes="" broker=redis idem="$root/build/release/tools/idem/idem" rate=200 ttl_ms=60000 kill_every=300
out="$root/docs/perf"
warmup=120 drain=60 hang_after=0
workers=4

usage() {
  awk 'NR > 1 && /^set -euo/ {exit} NR > 1' "$0" >&2
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
    --drain) drain=$2 ;;
    --out) out=$2 ;;
    --handler-hang-after) hang_after=$2 ;;
    *) usage ;;
  esac
  shift 2 || usage
done
[[ $minutes =~ ^[0-9]+$ && $minutes -gt 0 && $rate =~ ^[0-9]+$ && $rate -gt 0 ]] || usage
[[ $ttl_ms =~ ^[0-9]+$ && $kill_every =~ ^[0-9]+$ && $kill_every -gt 0 && $warmup =~ ^[0-9]+$ ]] || usage
[[ $drain =~ ^[0-9]+$ && $hang_after =~ ^[0-9]+$ ]] || usage
case $broker in redis | nats | rabbitmq | kafka | pulsar) ;; *) usage ;; esac
[[ -x $idem ]] || { echo "soak.sh: no idem at $idem (build it, or pass --idem)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "soak.sh: python3 not found (it checks the samples)" >&2; exit 2; }

# The recovery window after a start or a SIGKILL, in which the decision rate is not
# judged: the new process starts at once and reads new messages while the killed one's
# unacked ones come back (RabbitMQ and Pulsar at once, Redis and NATS after the 5 s
# lease); in 2-minute runs the rate did not dip. A Kafka group keeps the killed
# member's partition (the topic has one) until its session times out (10 s, idem's
# default) and rebalances: nothing is decided for about 10 s, then the backlog drains
# (measured: caught up within 15 s of the kill; 25 s leaves room on a loaded machine).
case $broker in
  kafka) recovery=25 ;;
  *) recovery=15 ;;
esac
ttl_s=$((ttl_ms / 1000))
total=$((minutes * 60))
# A counted sample is at least --warmup into its process and --warmup + TTL into the run;
# 35 s of them is 7 or 8 samples, so 6 hold even when a sample or two come late.
if ((total - warmup - ttl_s < 35)); then
  echo "soak.sh: --minutes $minutes leaves less than 35 s after --warmup + the TTL ($((warmup + ttl_s)) s):" \
    "no process could be judged" >&2
  exit 2
fi
last_kill=$(((total - warmup - 35) / 5 * 5))

# The kill times: k × kill_every plus a jitter of up to a quarter of it, on the 5 s
# sample grid, at least half of kill_every apart, none after last_kill.
kills=()
jitter=$((kill_every / 4))
for ((k = kill_every; k <= last_kill; k += kill_every)); do
  at=$((k + RANDOM % (2 * jitter + 1) - jitter))
  at=$(((at + 4) / 5 * 5))
  prev=0 && ((${#kills[@]})) && prev=${kills[-1]}
  ((at < prev + kill_every / 2)) && at=$(((prev + kill_every / 2 + 4) / 5 * 5))
  ((at < 5)) && at=5
  ((at > last_kill)) && at=$last_kill
  ((at > prev)) && kills+=("$at")
done

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
  esac
}

# Publishes `rate` messages a second, one in ten a copy of an earlier id, until
# $work/stop exists. After each batch, a line in published.log: the time (ms), the
# messages published so far, the failed batches so far, the batch's new ids
# (s-FIRST..s-NEXT-1) and ok or fail; a failure's error goes to publish.err.
publish_loop() {
  local n=0 first second sent=0 failed=0 i
  while [[ ! -e $work/stop ]]; do
    second=$(date +%s)
    first=$n
    for ((i = 0; i < rate; i++)); do
      if ((i % 10 == 9 && n > 0)); then
        echo "{\"id\":\"s-$((RANDOM % n))\"}"
      else
        echo "{\"id\":\"s-$n\"}"
        n=$((n + 1))
      fi
    done >"$work/batch.jsonl"
    if "$idem" publish --to "$publish_uri" "$work/batch.jsonl" >/dev/null 2>"$work/publish.last"; then
      sent=$((sent + rate))
      echo "$(date +%s%3N) $sent $failed $first $n ok" >>"$work/published.log"
    else
      failed=$((failed + 1))
      echo "$(date +%s%3N) $sent $failed $first $n fail" >>"$work/published.log"
      { echo "batch s-$first..s-$((n - 1)) at $(date -u +%FT%TZ):"; cat "$work/publish.last"; } >>"$work/publish.err"
    fi
    while (($(date +%s) == second)); do sleep 0.05; done
  done
}

# The handler: a shell loop that answers ok for the request's id (the soak's ids are
# plain text, so the id is the text after the request's first "id":"), after appending
# the message's line to the process's handled.N (so that an id whose decision line died
# with a SIGKILLed process is told apart from one that never ran). With
# --handler-hang-after N, once about N messages are answered every child stops answering
# (reads its input until idem closes it).
if ((hang_after > 0)); then
  handler='n=0; exec 3>>"$SOAK_HANDLED"; while read -r line; do
    if [ -e "$SOAK_HANG" ]; then exec cat >/dev/null; fi
    printf "%s\n" "$line" >&3; n=$((n + 1))
    if [ $n -ge '$(((hang_after + workers - 1) / workers))' ]; then : >"$SOAK_HANG"; fi
    id=${line#*\"id\":\"}; echo "{\"id\":\"${id%%\"*}\",\"status\":\"ok\"}"; done'
else
  handler='exec 3>>"$SOAK_HANDLED"
    while read -r line; do printf "%s\n" "$line" >&3
      id=${line#*\"id\":\"}; echo "{\"id\":\"${id%%\"*}\",\"status\":\"ok\"}"; done'
fi

# As a sidecar in front of the handler, so that the database holds idem's records
# alone, not an effect row per message. Each process writes its own decisions.N.jsonl.
process=0
start_consumer() {
  process=$((process + 1))
  SOAK_HANDLED="$work/handled.$process" SOAK_HANG="$work/hang" "$idem" consume --source "$source_uri" \
    --store "sqlite:$work/soak.db?leases=shared" --ttl-ms "$ttl_ms" --workers "$workers" --lease-ms 5000 --id /id \
    --handler "exec:$handler" >"$work/decisions.$process.jsonl" 2>>"$work/consume.err" &
  consumer_pid=$!
  consumer_started=$1
}

# The records the store holds, by name from `idem inspect --json`: pending, in progress,
# done, dead-lettered, and expired not yet purged. -1 when inspect could not count them.
store_records() {
  "$idem" inspect --store "sqlite:$work/soak.db?leases=shared" --json 2>>"$work/inspect.err" |
    awk 'index($0, "{\"type\":\"records\",\"counted\":true,") == 1 {
        split("pending in_progress done dead_lettered expired", k, " ")
        for (i = 1; i <= 5; i++) {
          if (!match($0, "\"" k[i] "\":[0-9]+")) exit
          n += substr($0, RSTART + length(k[i]) + 3, RLENGTH - length(k[i]) - 3)
          found++
        }
      }
      END { print found == 5 ? n : -1 }'
}

# Decision lines that are progress: acked as processed or as a duplicate.
count_progress() { grep -c -E '"action":"ack","reason":"(processed|duplicate)"' "$1" || true; }
count_decided() { grep -c '^{"type":"decision"' "$1" || true; }

# One sample line: t, rss_kib, fds, threads, progress/s, records, kill (0/1), age, db_kib,
# process, alive (0/1), published, progress, decided, failed publish batches.
sample() {
  local t=$1 killed=$2 status rss=0 fds=0 threads=0 alive=0 records db progress decided pub
  if status=$(cat "/proc/$consumer_pid/status" 2>/dev/null) && ! grep -q '^State:[[:space:]]*[ZX]' <<<"$status"; then
    alive=1
    rss=$(awk '/^VmRSS:/{print $2}' <<<"$status")
    threads=$(awk '/^Threads:/{print $2}' <<<"$status")
    fds=$(find "/proc/$consumer_pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
  fi
  progress=$((progress_before + $(count_progress "$work/decisions.$process.jsonl")))
  decided=$((decided_before + $(count_decided "$work/decisions.$process.jsonl")))
  pub=$(tail -n 1 "$work/published.log" 2>/dev/null || true)
  read -r _ published failed _ <<<"${pub:-0 0 0}"
  records=$(store_records)
  db=$(du -sk "$work/soak.db" 2>/dev/null | awk '{print $1}')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "${rss:-0}" "$fds" "${threads:-0}" \
    "$(((progress - last_progress) / (t - last_t)))" "$records" "$killed" "$((t - consumer_started))" "${db:-0}" \
    "$process" "$alive" "$published" "$progress" "$decided" "$failed" >>"$tsv"
  last_progress=$progress last_t=$t
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
plot "$tsv" using 1:5 with lines lw 2 title "processed or duplicate per second", \
     "$tsv" using 1:6 axes x1y2 with lines lw 2 title "store records"
unset multiplot
EOF
}

# After the timed part: stops publishing, waits until the consumer is quiet (its
# decision lines and handler runs unchanged for 5 s) or $drain s have passed, and stops
# it with SIGTERM, on which it flushes its decision lines and acks and exits.
drain_and_stop() {
  local start sizes last_sizes="" quiet=0 i rc=0
  stop_status=0
  : >"$work/stop"
  for ((i = 0; i < 300; i++)); do kill -0 "$publisher_pid" 2>/dev/null || break; sleep 0.1; done
  kill "$publisher_pid" 2>/dev/null || true
  wait "$publisher_pid" 2>/dev/null || true
  publisher_pid=""
  start=$(date +%s)
  while (($(date +%s) - start < drain && quiet < 5)); do
    sleep 1
    sizes=$(stat -c %s "$work/decisions.$process.jsonl" "$work/handled.$process" 2>/dev/null | tr '\n' ' ' || true)
    if [[ $sizes == "$last_sizes" ]]; then quiet=$((quiet + 1)); else quiet=0; fi
    last_sizes=$sizes
  done
  drain_s=$(($(date +%s) - start))
  if ! running "$consumer_pid"; then
    wait "$consumer_pid" 2>/dev/null || rc=$?
    stop_status="exited:$rc"  # before it was told to stop
  else
    kill -TERM "$consumer_pid" 2>/dev/null || true
    for ((i = 0; i < 300; i++)); do running "$consumer_pid" || break; sleep 0.1; done
    if running "$consumer_pid"; then
      stop_status=timeout
      kill -9 "$consumer_pid" 2>/dev/null || true
    fi
    wait "$consumer_pid" 2>/dev/null || rc=$?
    [[ $stop_status == timeout ]] || stop_status=$rc
  fi
  consumer_pid=""
}

# Whether process $1 runs (exists and is not a zombie).
running() { [[ -e /proc/$1/status ]] && ! grep -q '^State:[[:space:]]*[ZX]' "/proc/$1/status" 2>/dev/null; }

# Whether every id published in a batch that succeeded has a decision (ack or dead
# letter) in some decisions.N.jsonl; writes what it found to decided.json.
decided_check() {
  python3 - "$work" "$process" <<'PY'
import glob, json, os, sys

work, last = sys.argv[1], int(sys.argv[2])
published = set()
with open(os.path.join(work, "published.log")) as f:
    for line in f:
        _, _, _, first, nxt, status = line.split()
        if status == "ok":
            published.update(range(int(first), int(nxt)))

def sid(s):
    return int(s[2:]) if isinstance(s, str) and s.startswith("s-") and s[2:].isdigit() else None

decided, dead_lettered = set(), 0
for path in glob.glob(os.path.join(work, "decisions.*.jsonl")):
    for l in open(path, "rb"):
        try:
            d = json.loads(l)
        except ValueError:
            continue  # a line cut short by a SIGKILL
        if d.get("type") != "decision" or d.get("action") not in ("ack", "dead_letter"):
            continue
        dead_lettered += d["action"] == "dead_letter"
        i = sid(d.get("id"))
        if i is not None:
            decided.add(i)

# The decision lines a SIGKILL lost. A killed process (every one but the last) loses
# what its stdout buffer held: 8 KiB (libstdc++'s, not flushed by a SIGKILL), at most
# `fit` lines (one of them cut short). An id without a decision that the handler ran
# among that process's last 3 x fit runs counts as unconfirmed (the decisions come in
# a different order than the runs: four workers, settled in batches; in 2- and
# 3-minute runs on Redis the lost ones were among the last 99), unless more such ids
# than `fit` point at that process: those cannot all be lost lines.
missing = published - decided
lost = set()
for p in range(1, last):
    lines = open(os.path.join(work, f"decisions.{p}.jsonl"), "rb").read().split(b"\n")
    fit = 8192 // min((len(l) + 1 for l in lines if l.startswith(b'{"type":"decision"')), default=64) + 1
    try:
        handled = [l for l in open(os.path.join(work, f"handled.{p}"), "rb").read().split(b"\n") if l]
    except FileNotFoundError:
        continue
    here = set()
    for l in handled[-3 * fit:]:
        try:
            i = sid(json.loads(l).get("id"))
        except ValueError:
            continue
        if i in missing:
            here.add(i)
    if len(here) <= fit:
        lost |= here

undecided = sorted(missing - lost)
json.dump({"published_ids": len(published), "decided_ids": len(published & decided), "undecided": len(undecided),
           "undecided_sample": ["s-%d" % i for i in undecided[:5]], "unconfirmed": len(missing & lost),
           "dead_lettered": dead_lettered}, open(os.path.join(work, "decided.json"), "w"))
PY
}

# Checks the samples and the drain; prints the SOAK line; returns 0 when all hold.
check() {
  python3 - "$tsv" "$work" "$broker" "$minutes" "$rate" "$warmup" "$ttl_s" "$recovery" "$total" "$drain_s" \
    "$stop_status" <<'PY'
import json, os, sys

tsv, work, broker, minutes = sys.argv[1:5]
rate, warmup, ttl, recovery, total, drain_s = map(int, sys.argv[5:11])
stop_status = sys.argv[11]
names = ["t", "rss", "fds", "threads", "rate", "records", "killed", "age", "db", "process", "alive", "published",
         "progress", "decided", "failed"]
rows = [dict(zip(names, map(float, l.split("\t")))) for l in open(tsv) if not l.startswith("#")]
drain = json.load(open(os.path.join(work, "decided.json")))
pubs = [l.split() for l in open(os.path.join(work, "published.log"))]
failed = int(pubs[-1][2]) if pubs else 0
reasons = []
if not rows:
    reasons.append("no samples")
    rows = [dict.fromkeys(names, 0.0)]

# Publishing: no failure, and about the rate asked for.
if failed:
    err = open(os.path.join(work, "publish.err")).read().strip().splitlines()
    reasons.append(f"{failed} publish batches failed, first: {' '.join(err[:2])}")
published = rows[-1]["published"]
if published < rate * total / 2:
    reasons.append(f"the publisher fell behind: {published:.0f} messages in {total} s")

# The consumer alive at every sample but the one right after a kill.
dead = [r for r in rows if not r["alive"] and not r["killed"]]
if dead:
    tail = open(os.path.join(work, "consume.err")).read().strip().splitlines()[-3:]
    reasons.append(f"the consumer was not running at {len(dead)} samples, first at t={dead[0]['t']:.0f} s"
                   + (f" (its stderr ends: {' | '.join(tail)})" if tail else ""))

# Progress: in each 5 s window outside the recovery after a start or kill, decisions
# acked processed or duplicate at least half the messages published; the backlog at
# such a sample at most rate x recovery.
kill_t, windows, worst, backlog = 0.0, 0, None, 0.0
prev = dict.fromkeys(names, 0.0)
for r in rows:
    if r["killed"]:
        kill_t = r["t"]
    elif prev["t"] >= kill_t + recovery:
        windows += 1
        dt = r["t"] - prev["t"]
        pub, prog = (r["published"] - prev["published"]) / dt, (r["progress"] - prev["progress"]) / dt
        if worst is None or prog - pub / 2 < worst[0] - worst[1] / 2:
            worst = (prog, pub, r["t"])
        backlog = max(backlog, r["published"] - r["progress"])
    prev = r
if windows == 0:
    reasons.append("no 5 s window outside the recovery after a start or kill")
elif worst[0] < worst[1] / 2:
    reasons.append(f"in the window ending at t={worst[2]:.0f} s {worst[0]:.0f} msg/s were processed while"
                   f" {worst[1]:.0f} msg/s were published (less than half)")
if backlog > rate * recovery:
    reasons.append(f"the backlog reached {backlog:.0f} messages outside recovery (bound {rate * recovery})")
if drain["undecided"]:
    reasons.append(f"{drain['undecided']} published ids had no decision after {drain_s} s of drain,"
                   f" e.g. {', '.join(drain['undecided_sample'])}")
if stop_status != "0":
    tail = open(os.path.join(work, "consume.err")).read().strip().splitlines()[-3:]
    reasons.append("the consumer " + ("did not stop within 30 s of SIGTERM" if stop_status == "timeout" else
                   f"had exited with status {stop_status[7:]} before the drain ended"
                   if stop_status.startswith("exited:") else f"exited with status {stop_status} on SIGTERM")
                   + (f" (its stderr ends: {' | '.join(tail)})" if tail else ""))
if drain["dead_lettered"]:
    reasons.append(f"{drain['dead_lettered']} messages were dead-lettered")

# Growth: counted samples (alive, --warmup into their process, warmup + TTL into the
# run); a process with at least 6 of them is judged; at least one must be.
keep = rate * (ttl + 30)
counted = [r for r in rows if r["alive"] and r["rss"] > 0 and r["age"] >= warmup and r["t"] >= warmup + ttl]
by_process = {}
for r in counted:
    by_process.setdefault(r["process"], []).append(r)
judged = {p: s for p, s in by_process.items() if len(s) >= 6}
growth, grew = 0.0, []
for p, s in judged.items():
    rss, fds = [r["rss"] for r in s], [r["fds"] for r in s]
    g = max(rss) / min(rss) - 1
    growth = max(growth, g)
    if g > 0.05 or not (max(fds) <= min(fds) * 1.05 or max(fds) - min(fds) <= 2):
        grew.append(f"process {p:.0f}: RSS {min(rss):.0f}..{max(rss):.0f} KiB,"
                    f" descriptors {min(fds):.0f}..{max(fds):.0f}")
if not judged:
    reasons.append(f"no process had 6 counted samples (counted: {len(counted)}), so growth was not measured")
if grew:
    reasons.append("grew: " + "; ".join(grew))
records = [r["records"] for r in counted]
if any(x < 0 for x in records):
    reasons.append(f"idem inspect could not count the records at {sum(x < 0 for x in records)} samples")
records_max = max(records, default=0)
if records_max > keep:
    reasons.append(f"the store held {records_max:.0f} records (bound {keep})")

timed = rows[-1]
rss = [r["rss"] for r in counted] or [0]
fds = [r["fds"] for r in counted] or [0]
line = (f"SOAK broker={broker} minutes={minutes} samples={len(rows)} kills={sum(r['killed'] for r in rows):.0f}"
        f" published={published:.0f} publish_failures={failed} decided={timed['decided']:.0f}"
        f" processed={timed['progress']:.0f} processed_rate={timed['progress'] / max(timed['t'], 1):.0f}/s"
        f" min_window_rate={worst[0] if worst else 0:.0f}/s min_window_published={worst[1] if worst else 0:.0f}/s"
        f" backlog_max={backlog:.0f} undecided={drain['undecided']} unconfirmed={drain['unconfirmed']}"
        f" drain_s={drain_s} dead_samples={len(dead)} counted={len(counted)} judged_processes={len(judged)}"
        f" judged_samples_min={min((len(s) for s in judged.values()), default=0)}"
        f" rss_mib={min(rss) / 1024:.1f}..{max(rss) / 1024:.1f} rss_growth_in_a_process={growth * 100:.1f}%"
        f" fds={min(fds):.0f}..{max(fds):.0f} records_max={records_max:.0f} records_bound={keep}"
        f" result={'fail' if reasons else 'ok'}")
print(line + (" reason=" + json.dumps("; ".join(reasons)) if reasons else ""))
sys.exit(1 if reasons else 0)
PY
}

mkdir -p "$out"
tsv="$out/soak-$broker.tsv" svg="$out/soak-$broker.svg"
: >"$work/published.log"
columns="t_s rss_kib fds threads processed_per_s store_records killed process_age_s db_kib"
columns+=" process alive published processed decided publish_failures"
printf '# %s\n' "${columns// /$'\t'}" >"$tsv"
start_broker
echo "soak.sh: $broker, $minutes min, kills at ${kills[*]:-none} s, recovery window $recovery s" >&2
publish_loop &
publisher_pid=$!
progress_before=0 decided_before=0 last_progress=0 last_t=0
start_consumer 0
begin=$(date +%s%3N)
next=0
for ((t = 5; t <= total; t += 5)); do
  wait_ms=$((t * 1000 - ($(date +%s%3N) - begin)))
  ((wait_ms > 0)) && sleep "$((wait_ms / 1000)).$(printf '%03d' $((wait_ms % 1000)))"
  while (($(date +%s%3N) - begin >= (t + 5) * 1000 && t + 5 <= total)); do t=$((t + 5)); done  # late: skip
  killed=0
  if ((next < ${#kills[@]} && t >= kills[next])); then
    kill -9 "$consumer_pid" 2>/dev/null || true
    wait "$consumer_pid" 2>/dev/null || true
    progress_before=$((progress_before + $(count_progress "$work/decisions.$process.jsonl")))
    decided_before=$((decided_before + $(count_decided "$work/decisions.$process.jsonl")))
    start_consumer "$t"
    killed=1
    next=$((next + 1))
  fi
  sample "$t" "$killed"
done
drain_and_stop
decided_check
((chart)) && draw
check
