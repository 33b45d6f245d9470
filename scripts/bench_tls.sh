#!/usr/bin/env bash
# TLS beside plaintext in one run: `idem bench --source` on Redis Streams and on Kafka,
# and `idem bench --store` on Redis, each server taking plaintext and TLS on two ports
# of 127.0.0.1, the plaintext and the TLS command run alternately, --repeat times each.
# Prints every BENCH line, then one line per pair and row with the medians of its rates:
#   TLS what=<redis-stream|kafka|redis-store> row=<plain|idem|raw|batch> plain=<msgs/s> tls=<msgs/s> tls/plain=<r>
# (the broker alone and idem with a SQLite store for --source; the store's primitive
# and idem's batch for the Redis store).
# The certificates (a CA, a server certificate for 127.0.0.1, a client certificate:
# Kafka's TLS listener asks for one) are made with openssl in a temporary folder.
#   usage: scripts/bench_tls.sh [--repeat N] [--messages N] [--build DIR]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

repeat=3 messages=20000 build="$IDEM_ROOT/build/release"
while (($#)); do
  case $1 in
    --repeat) repeat=$2; shift ;;
    --messages) messages=$2; shift ;;
    --build) build=$2; shift ;;
    -h|--help) sed -n '2,9p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "bench_tls: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
idem_install_packages
[[ -x $build/tools/idem/idem ]] || idem_build "$build"
idem=$build/tools/idem/idem
work=$(mktemp -d "${TMPDIR:-/tmp}/idem-bench-tls-XXXXXX")
pids=() kafka_dir=""
cleanup() {
  ((${#pids[@]})) && kill "${pids[@]}" 2>/dev/null
  [[ -n $kafka_dir ]] && bash "$IDEM_ROOT/scripts/broker.sh" stop "$kafka_dir" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

# A CA, a server certificate for IP 127.0.0.1 and localhost, a client certificate.
make_certs() {
  local d=$work/tls
  mkdir -p "$d"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=bench-ca \
    -keyout "$d/ca.key" -out "$d/ca.pem" 2>/dev/null
  local who
  for who in server client; do
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=bench-$who" \
      -keyout "$d/$who.key" -out "$d/$who.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n' >"$d/$who.ext"
    openssl x509 -req -in "$d/$who.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
      -extfile "$d/$who.ext" -out "$d/$who.pem" 2>/dev/null
  done
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Row $2's rate in bench output $1.
rate_of() { sed -n "s/^BENCH .*path=$2 .*msgs_per_s=\([0-9.]*\).*/\1/p" "$1" | head -n 1; }

median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# pair NAME "ROW…" PLAIN_ARGS… -- TLS_ARGS…: both runs alternately, then one TLS line
# per row named (the medians of that row's rates).
pair() {
  local name=$1 rows=$2 plain=() tls=() r row
  shift 2
  while [[ $1 != -- ]]; do plain+=("$1"); shift; done
  shift
  tls=("$@")
  for row in $rows; do : >"$work/$name.$row.plain" >"$work/$name.$row.tls"; done
  for ((r = 0; r < repeat; r++)); do
    "$idem" bench "${plain[@]}" --messages "$messages" | tee "$work/out" | grep '^BENCH'
    for row in $rows; do rate_of "$work/out" "$row" >>"$work/$name.$row.plain"; done
    "$idem" bench "${tls[@]}" --messages "$messages" | tee "$work/out" | grep '^BENCH'
    for row in $rows; do rate_of "$work/out" "$row" >>"$work/$name.$row.tls"; done
  done
  local p t
  for row in $rows; do
    p=$(median <"$work/$name.$row.plain") t=$(median <"$work/$name.$row.tls")
    awk -v n="$name" -v row="$row" -v p="$p" -v t="$t" \
      'BEGIN {printf "TLS what=%s row=%s plain=%.0f tls=%.0f tls/plain=%.2f\n", n, row, p, t, t / p}' |
      tee -a "$work/summary"
  done
}

make_certs
ca=$work/tls/ca.pem
port=$(free_port) tls_port=$(free_port)
redis-server --port "$port" --tls-port "$tls_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" \
  --tls-cert-file "$work/tls/server.pem" --tls-key-file "$work/tls/server.key" --tls-ca-cert-file "$ca" \
  --tls-auth-clients no --logfile "$work/redis.log" &
pids+=($!)
for _ in $(seq 100); do redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done

store="sqlite:$work/bench.db"
pair redis-stream "plain idem" --source "redis-stream://127.0.0.1:$port/bench?group=g" --store "$store" -- \
  --source "rediss-stream://127.0.0.1:$tls_port/bench?group=g&tls_ca=$ca" --store "$store"
pair redis-store "raw batch" --store "redis://127.0.0.1:$port" -- --store "rediss://127.0.0.1:$tls_port?tls_ca=$ca"

kafka_dir=$work/kafka
mkdir -p "$kafka_dir"
bash "$IDEM_ROOT/scripts/broker.sh" start kafka --dir "$kafka_dir" --tls "$work/tls" >"$work/kafka.env"
plain_boot=$(sed -n 's/^KAFKA_BOOTSTRAP=//p' "$work/kafka.env")
tls_boot=$(sed -n 's/^KAFKA_SSL_BOOTSTRAP=//p' "$work/kafka.env")
client="tls_ca=$ca&tls_cert=$work/tls/client.pem&tls_key=$work/tls/client.key"
pair kafka "plain idem" --source "kafka://$plain_boot/bench?group=g" --store "$store" -- \
  --source "kafka://$tls_boot/bench?group=g&$client" --store "$store"

echo "== bench_tls: medians of $repeat runs each, $messages messages =="
cat "$work/summary"
