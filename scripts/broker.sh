#!/usr/bin/env bash
# Private brokers on 127.0.0.1 (or a partition test's link address) for the tests and
# for trying idem locally: free ports, a private data folder, a readiness check, stopped
# by PID. Never a system-wide service.
#
#   scripts/broker.sh start kafka [--dir DIR] [--nodes N] [--owner PID] [--also-listen ADDR] [--tls TLSDIR]
#   scripts/broker.sh start pulsar|redis|nats|rabbitmq|postgres [--dir DIR] [--owner PID]
#   scripts/broker.sh start pulsar --address ADDR   Pulsar on ADDR instead of 127.0.0.1
#   scripts/broker.sh start pulsar --tls TLSDIR     its web APIs over TLS too
#   scripts/broker.sh stop DIR                 every process started in DIR, by PID
#   scripts/broker.sh restart DIR [--kill]     stop a Pulsar standalone and start it again
#   scripts/broker.sh kill-node DIR N          SIGKILL node N (1-based) of a Kafka cluster
#   scripts/broker.sh start-node DIR N         start node N again, wait until it serves
#   scripts/broker.sh fetch kafka|pulsar       fill the jar cache only (then works offline)
#
# `start` prints KEY=VALUE lines on stdout (DIR=…, then the broker's addresses, e.g.
# KAFKA_BOOTSTRAP=127.0.0.1:PORT[,…]); progress and errors go to stderr. Without --dir
# it makes a temporary folder, which `stop` removes. --owner PID: the broker is stopped
# when that process ends (the tests pass their own PID, so a crashed test leaves no
# broker behind).
#
# Kafka runs from Maven Central's jars (org.apache.kafka:kafka_2.13, KRaft mode,
# combined broker+controller nodes), resolved once with Maven into
# ${IDEM_CACHE:-~/.cache/idem}/maven and reused by every later run. Each node has two
# client listeners: PLAINTEXT (KAFKA_BOOTSTRAP) and SASL_PLAINTEXT with the PLAIN
# mechanism (KAFKA_SASL_BOOTSTRAP, user KAFKA_SASL_USER, password KAFKA_SASL_PASSWORD).
# --also-listen ADDR adds a third, PLAINTEXT on ADDR (KAFKA_LINK_BOOTSTRAP), advertised
# as ADDR: for a partition test's network namespace, which reaches this host only there.
# --tls TLSDIR (holding ca.pem, server.pem and server.key, an unencrypted PKCS#8 key)
# adds three TLS listeners: SSL requiring a client certificate signed by the CA
# (KAFKA_SSL_BOOTSTRAP), SASL_SSL with PLAIN for the same user and password
# (KAFKA_SASL_SSL_BOOTSTRAP), and SSL on 127.0.0.2 without client certificates
# (KAFKA_ALT_BOOTSTRAP: an address the certificate does not name). No SCRAM: Debian 12's
# librdkafka 2.0.2 fails SCRAM against Kafka 4 brokers (invalid credentials; fixed in
# librdkafka 2.6.1).
#
# Pulsar runs the same way from Maven Central's jars (org.apache.pulsar:pulsar-broker):
# one standalone JVM with the broker, one bookie and a RocksDB metadata store, all data
# under DIR. PULSAR_WEB serves the admin REST API and the WebSocket API, PULSAR_BROKER
# the binary protocol; no functions worker, no transactions. --address ADDR binds and
# advertises ADDR instead of 127.0.0.1 (a partition test's link; the bookie stays on lo).
# --tls TLSDIR (as for Kafka) serves the same web APIs over TLS too (PULSAR_WEB_TLS),
# asking for a client certificate and checking one that is sent against the CA.
set -euo pipefail

KAFKA_VERSION=4.1.1
PULSAR_VERSION=4.2.4
LOG4J_VERSION=2.24.3
CACHE=${IDEM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/idem}

die() { echo "broker.sh: $*" >&2; exit 1; }
say() { echo "broker.sh: $*" >&2; }

# A port that nothing on 127.0.0.1 accepts on and that no earlier call of this start
# handed out (they are listed in PORTS_FILE: callers run it in $(…)). It is taken below
# the kernel's ephemeral range when that leaves room (10000..32767 with Linux's default
# range): a port free now is not later taken by some process's outgoing connection
# before the broker binds it.
PORTS_FILE=/dev/null
free_port() {
  local p lo=20000 span=40000 ephemeral
  read -r ephemeral _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || ephemeral=0
  ((ephemeral > 15000)) && lo=10000 span=$((ephemeral - 10000))
  for _ in $(seq 200); do
    p=$((lo + (RANDOM * 32768 + RANDOM) % span))
    grep -qx "$p" "$PORTS_FILE" 2>/dev/null && continue
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p" >>"$PORTS_FILE"
      echo "$p"
      return
    fi
  done
  die "no free port found"
}

# wait_for SECONDS WHAT CMD…: runs CMD every 0.2 s until it succeeds.
wait_for() {
  local secs=$1 what=$2
  shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

# launch DIR NAME CMD…: runs CMD in the background with its output in DIR/NAME.log and
# its PID in DIR/NAME.pid.
launch() {
  local dir=$1 name=$2
  shift 2
  "$@" </dev/null >>"$dir/$name.log" 2>&1 &
  echo $! >"$dir/$name.pid"
}

stop_pid_file() {  # stop_pid_file FILE SIGNAL
  local f=$1 sig=$2 pid
  pid=$(cat "$f" 2>/dev/null) || return 0
  rm -f "$f"
  kill "-$sig" "$pid" 2>/dev/null || return 0
  for _ in $(seq 150); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

# --- Kafka ---------------------------------------------------------------------------

# maven_jars NAME POM_XML: resolves the runtime jars of POM_XML (a <dependencies>
# element, and a <dependencyManagement> one if needed) with Maven into
# $CACHE/maven/NAME and prints that folder; does nothing once they are there.
maven_jars() {
  local name=$1 xml=$2 jars="$CACHE/maven/$1"
  mkdir -p "$CACHE/maven"
  exec 9>"$CACHE/maven/.lock"
  flock 9  # one fetch at a time: test binaries start brokers side by side
  if [[ ! -f $jars/.complete ]]; then
    command -v mvn >/dev/null || die "Maven is needed once to fetch $name's jars (apt-get install maven)"
    local pom
    pom=$(mktemp -d)
    cat >"$pom/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>idem.scripts</groupId><artifactId>$name</artifactId><version>1</version>
  <packaging>pom</packaging>
  $xml
</project>
EOF
    say "fetching $name's jars into $jars (once)"
    rm -rf "$jars.tmp"
    if ! mvn -q -B -f "$pom/pom.xml" -Dmaven.repo.local="$CACHE/maven/repo" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$jars.tmp" >"$pom/mvn.log" 2>&1; then
      cat "$pom/mvn.log" >&2
      die "Maven could not resolve $name's jars"
    fi
    rm -rf "$pom" "$jars"
    mv "$jars.tmp" "$jars"
    touch "$jars/.complete"
  fi
  exec 9>&-
  echo "$jars"
}

pom_dep() {  # pom_dep GROUP:ARTIFACT:VERSION [XML]: a <dependency> element
  local g a v
  IFS=: read -r g a v <<<"$1"
  echo "<dependency><groupId>$g</groupId><artifactId>$a</artifactId><version>$v</version>${2:-}</dependency>"
}

# Kafka's broker jars, and a log4j binding so the broker writes a log.
kafka_jars() {
  maven_jars "kafka-$KAFKA_VERSION" "<dependencies>$(pom_dep "org.apache.kafka:kafka_2.13:$KAFKA_VERSION")$(
    pom_dep "org.apache.logging.log4j:log4j-slf4j-impl:$LOG4J_VERSION")</dependencies>"
}

java_cmd() {
  command -v java >/dev/null || die "Java 17 is needed (apt-get install openjdk-17-jre-headless)"
  echo java
}

# kafka_ready PORT NODES: a Metadata request (v4, all topics) on PORT is answered and
# lists NODES brokers. Bytes: size, api key 3, version 4, correlation id, client id
# "idem", topics null, allow_auto_topic_creation false.
kafka_ready() {
  local port=$1 nodes=$2 reply
  reply=$(
    exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
    printf '\x00\x00\x00\x13\x00\x03\x00\x04\x00\x00\x00\x01\x00\x04idem\xff\xff\xff\xff\x00' >&3
    timeout 2 head -c 16 <&3 | od -An -v -tu1
  ) || return 1
  local b=($reply)
  ((${#b[@]} == 16)) || return 1
  # bytes 12..15: the number of brokers, after size, correlation id and throttle time
  (((b[12] << 24) + (b[13] << 16) + (b[14] << 8) + b[15] == nodes))
}

kafka_plain_jaas() {  # the PLAIN mechanism's one user, idem
  echo 'org.apache.kafka.common.security.plain.PlainLoginModule required user_idem="idem-test-secret";'
}

# kafka_tls_config NODEDIR TLSDIR: the TLS listeners' settings (--tls); their addresses
# are in kafka_node_config's listener lists.
kafka_tls_config() {
  local node=$1 tls=$2
  cat "$tls/server.key" "$tls/server.pem" >"$node/keystore.pem"
  cat <<EOF
ssl.keystore.type=PEM
ssl.keystore.location=$node/keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$tls/ca.pem
listener.name.ssl.ssl.client.auth=required
listener.name.sasl_ssl.plain.sasl.jaas.config=$(kafka_plain_jaas)
EOF
}

# kafka_node_config DIR NODE PORT SASL_PORT CONTROLLER_PORT VOTERS NODES LINK_ADDR LINK_PORT
#                   TLSDIR SSL_PORT SASL_SSL_PORT ALT_PORT (LINK_ADDR and TLSDIR may be empty)
kafka_node_config() {
  local dir=$1 n=$2 port=$3 sasl=$4 cport=$5 voters=$6 nodes=$7 more=""
  local rf=$((nodes >= 3 ? 3 : 1)) isr=$((nodes >= 3 ? 2 : 1))
  [[ -z $8 ]] || more=",LINK://$8:$9"
  [[ -z ${10} ]] || more+=",SSL://127.0.0.1:${11},SASL_SSL://127.0.0.1:${12},ALT://127.0.0.2:${13}"
  cat <<EOF
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$port,SASL_PLAINTEXT://127.0.0.1:$sasl,CONTROLLER://127.0.0.1:$cport$more
advertised.listeners=PLAINTEXT://127.0.0.1:$port,SASL_PLAINTEXT://127.0.0.1:$sasl$more
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT,LINK:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,ALT:SSL
sasl.enabled.mechanisms=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=$(kafka_plain_jaas)
log.dirs=$dir/node$n/data
num.partitions=1
default.replication.factor=$rf
min.insync.replicas=$isr
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$isr
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=500
auto.create.topics.enable=true
log.flush.interval.messages=9223372036854775807
unclean.leader.election.enable=false
EOF
  [[ -z ${10} ]] || kafka_tls_config "$dir/node$n" "${10}"
}

kafka_log4j() {  # the node's log, INFO and up, in DIR/nodeN/server.log
  cat <<EOF
appender.f.type=File
appender.f.name=f
appender.f.fileName=$1/server.log
appender.f.layout.type=PatternLayout
appender.f.layout.pattern=[%d] %p %m (%c)%n
rootLogger.level=INFO
rootLogger.appenderRef.f.ref=f
EOF
}

start_kafka_node() {  # start_kafka_node DIR N
  local dir=$1 n=$2 jars
  jars=$(kafka_jars)
  launch "$dir" "node$n" "$(java_cmd)" -Xms64m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -Dlog4j2.configurationFile="$dir/node$n/log4j2.properties" -cp "$jars/*" kafka.Kafka "$dir/node$n/server.properties"
}

wait_kafka() {  # wait_kafka DIR PORT NODES
  wait_for 120 kafka kafka_ready "$2" "$3" ||
    die "Kafka on port $2 did not answer a metadata request with $3 brokers within 120 s (logs in $1)"
}

start_kafka() {  # start_kafka DIR NODES [LINK_ADDR [TLSDIR]]
  local dir=$1 nodes=$2 link_addr=${3:-} tls=${4:-} jars voters="" id
  jars=$(kafka_jars)
  local -a ports sasl cports links ssl sasl_ssl alt
  for ((n = 1; n <= nodes; n++)); do
    ports[n]=$(free_port) sasl[n]=$(free_port) cports[n]=$(free_port) links[n]=$(free_port)
    [[ -z $tls ]] || ssl[n]=$(free_port) sasl_ssl[n]=$(free_port) alt[n]=$(free_port)
    voters+="${voters:+,}$n@127.0.0.1:${cports[n]}"
  done
  id=$("$(java_cmd)" -cp "$jars/*" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
  local -A boot=()
  for ((n = 1; n <= nodes; n++)); do
    mkdir -p "$dir/node$n"
    kafka_node_config "$dir" "$n" "${ports[n]}" "${sasl[n]}" "${cports[n]}" "$voters" "$nodes" "$link_addr" \
      "${links[n]}" "$tls" "${ssl[n]:-}" "${sasl_ssl[n]:-}" "${alt[n]:-}" >"$dir/node$n/server.properties"
    kafka_log4j "$dir/node$n" >"$dir/node$n/log4j2.properties"
    "$(java_cmd)" -cp "$jars/*" kafka.tools.StorageTool format -t "$id" -c "$dir/node$n/server.properties" \
      >>"$dir/node$n/format.log" 2>&1 || die "formatting node $n failed: $(tail -n 3 "$dir/node$n/format.log")"
    echo "${ports[n]}" >"$dir/node$n/port"
    boot[KAFKA_BOOTSTRAP]+="${boot[KAFKA_BOOTSTRAP]:+,}127.0.0.1:${ports[n]}"
    boot[KAFKA_SASL_BOOTSTRAP]+="${boot[KAFKA_SASL_BOOTSTRAP]:+,}127.0.0.1:${sasl[n]}"
    [[ -z $link_addr ]] || boot[KAFKA_LINK_BOOTSTRAP]+="${boot[KAFKA_LINK_BOOTSTRAP]:+,}$link_addr:${links[n]}"
    if [[ -n $tls ]]; then
      boot[KAFKA_SSL_BOOTSTRAP]+="${boot[KAFKA_SSL_BOOTSTRAP]:+,}127.0.0.1:${ssl[n]}"
      boot[KAFKA_SASL_SSL_BOOTSTRAP]+="${boot[KAFKA_SASL_SSL_BOOTSTRAP]:+,}127.0.0.1:${sasl_ssl[n]}"
      boot[KAFKA_ALT_BOOTSTRAP]+="${boot[KAFKA_ALT_BOOTSTRAP]:+,}127.0.0.2:${alt[n]}"
    fi
  done
  for ((n = 1; n <= nodes; n++)); do start_kafka_node "$dir" "$n"; done
  echo "$nodes" >"$dir/nodes"
  for ((n = 1; n <= nodes; n++)); do wait_kafka "$dir" "${ports[n]}" "$nodes"; done
  local key
  for key in KAFKA_BOOTSTRAP KAFKA_SASL_BOOTSTRAP KAFKA_LINK_BOOTSTRAP KAFKA_SSL_BOOTSTRAP KAFKA_SASL_SSL_BOOTSTRAP \
    KAFKA_ALT_BOOTSTRAP; do
    [[ -z ${boot[$key]:-} ]] || echo "$key=${boot[$key]}"
  done
  echo "KAFKA_SASL_USER=idem"
  echo "KAFKA_SASL_PASSWORD=idem-test-secret"
  echo "KAFKA_VERSION=$KAFKA_VERSION"
}

# --- Pulsar ----------------------------------------------------------------------------

# Pulsar's broker jars. Importing Pulsar's parent POM pins the versions Pulsar is built
# with: without it Maven's nearest-wins mixes versions (log4j-core 2.18 with
# log4j-slf4j2-impl 2.25, OpenTelemetry 1.56 with 1.62) and the broker fails to start.
pulsar_jars() {
  maven_jars "pulsar-$PULSAR_VERSION" "<dependencyManagement><dependencies>$(
    pom_dep "org.apache.pulsar:pulsar:$PULSAR_VERSION" '<type>pom</type><scope>import</scope>'
  )</dependencies></dependencyManagement>
  <dependencies>$(pom_dep "org.apache.pulsar:pulsar-broker:$PULSAR_VERSION")</dependencies>"
}

# The standalone's one config file, read by both the broker and its bookie: metadata in
# RocksDB under DIR (no ZooKeeper), one bookie on loopback, no functions worker.
pulsar_config() {  # pulsar_config WEB_PORT BROKER_PORT BOOKIE_PORT ADDRESS
  cat <<EOF
clusterName=standalone
bindAddress=$4
advertisedAddress=$4
webServicePort=$1
brokerServicePort=$2
bookiePort=$3
# the bookie binds to lo's address and keeps bookiePort (not a port of its own choosing)
listeningInterface=lo
allowEphemeralPorts=true
# the broker's own client sends DNS queries from its address rather than 0.0.0.0
brokerClient_dnsLookupBindAddress=$4
functionsWorkerEnabled=false
webSocketServiceEnabled=true
transactionCoordinatorEnabled=false
brokerDeleteInactiveTopicsEnabled=false
allowAutoTopicCreation=true
allowAutoTopicCreationType=non-partitioned
subscriptionRedeliveryTrackerEnabled=true
managedLedgerDefaultEnsembleSize=1
managedLedgerDefaultWriteQuorum=1
managedLedgerDefaultAckQuorum=1
# no fsync; a nearly full disk does not turn the bookie read-only
journalSyncData=false
diskUsageThreshold=0.99
diskUsageWarnThreshold=0.98
# few threads: the tests' machines have 2 CPUs
numIOThreads=1
numOrderedExecutorThreads=2
numExecutorThreadPoolSize=1
numCacheExecutorThreadPoolSize=1
topicOrderedExecutorThreadNum=1
managedLedgerNumSchedulerThreads=1
bookkeeperClientNumWorkerThreads=1
bookkeeperClientNumIoThreads=1
webSocketNumIoThreads=1
webSocketNumServiceThreads=2
serverNumIOThreads=1
numAddWorkerThreads=1
numReadWorkerThreads=1
numHighPriorityWorkerThreads=1
numJournalCallbackThreads=1
EOF
}

# pulsar_tls_config PORT TLSDIR (--tls): the web service (the REST and WebSocket APIs)
# also on PORT over TLS with TLSDIR's server certificate; a client certificate is asked
# for and, when one is sent, must chain to TLSDIR's CA. The plaintext port stays (the
# health check uses it).
pulsar_tls_config() {
  cat <<EOF
webServicePortTls=$1
tlsCertificateFilePath=$2/server.pem
tlsKeyFilePath=$2/server.key
tlsTrustCertsFilePath=$2/ca.pem
tlsAllowInsecureConnection=false
tlsRequireTrustedClientCertOnConnect=false
EOF
}

# INFO and up on stdout, which launch writes to DIR/pulsar.log. No log4j shutdown hook:
# the standalone's own hook logs while the broker stops.
pulsar_log4j() {
  cat <<EOF
shutdownHook=disable
appender.out.type=Console
appender.out.name=out
appender.out.layout.type=PatternLayout
appender.out.layout.pattern=[%d] %p %m (%c{1})%n
rootLogger.level=INFO
rootLogger.appenderRef.out.ref=out
EOF
}

pulsar_setting() {  # pulsar_setting DIR KEY: KEY's value in DIR/standalone.conf
  sed -n "s/^$2=//p" "$1/standalone.conf"
}

# Runs in DIR: the standalone resolves some paths from its working folder (an existing
# data/standalone/zookeeper there would switch it to ZooKeeper on port 2181). The
# --add-opens are those Pulsar's own launcher passes. C1 only (TieredStopAtLevel=1): on
# 2 CPUs the start takes 6-7 s instead of 8-11 s, and 35 MB less memory.
launch_pulsar() {  # launch_pulsar DIR
  local dir=$1 jars
  jars=$(pulsar_jars)
  launch "$dir" pulsar env -C "$dir" "$(java_cmd)" -Xms64m -Xmx512m -XX:MaxDirectMemorySize=256m \
    -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true \
    -Dio.netty.tryReflectionSetAccessible=true --add-opens java.base/java.io=ALL-UNNAMED \
    --add-opens java.base/java.util.zip=ALL-UNNAMED --add-opens java.base/java.nio=ALL-UNNAMED \
    --add-opens java.base/jdk.internal.misc=ALL-UNNAMED --add-opens java.base/sun.net=ALL-UNNAMED \
    --add-opens java.management/sun.management=ALL-UNNAMED \
    --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED \
    --add-opens java.base/jdk.internal.platform=ALL-UNNAMED \
    -Dlog4j2.configurationFile="$dir/log4j2.properties" -cp "$jars/*" org.apache.pulsar.PulsarStandaloneStarter \
    --config "$dir/standalone.conf" --no-functions-worker --no-stream-storage --metadata-dir "$dir/metadata" \
    --bookkeeper-dir "$dir/bookkeeper" --bookkeeper-port "$(pulsar_setting "$dir" bookiePort)"
}

# http_get PORT PATH [ADDRESS]: the body of a 200 answer from ADDRESS:PORT (default
# 127.0.0.1).
http_get() {
  local reply addr=${3:-127.0.0.1}
  reply=$(
    exec 3<>"/dev/tcp/$addr/$1" || exit 1
    printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$2" "$addr" >&3
    timeout 30 cat <&3
  ) || return 1
  [[ $reply == HTTP/1.?' 200 '* ]] || return 1
  echo "${reply#*$'\r\n\r\n'}"
}

pulsar_gone() {  # pulsar_gone DIR: DIR's JVM has ended (or was stopped)
  ! kill -0 "$(cat "$1/pulsar.pid" 2>/dev/null)" 2>/dev/null
}

# pulsar_settled DIR: the JVM has ended, or it serves: the namespace public/default
# exists (the standalone creates it last) and the broker's health check, a round trip
# through a topic, answers "ok".
pulsar_settled() {
  local port addr
  pulsar_gone "$1" && return 0
  port=$(pulsar_setting "$1" webServicePort) addr=$(pulsar_setting "$1" bindAddress)
  http_get "$port" /admin/v2/namespaces/public/default "$addr" >/dev/null &&
    [[ $(http_get "$port" /admin/v2/brokers/health "$addr") == ok ]]
}

wait_pulsar() {  # wait_pulsar DIR
  wait_for 120 pulsar pulsar_settled "$1" ||
    die "Pulsar did not pass its health check within 120 s (log: $1/pulsar.log)"
  ! pulsar_gone "$1" || die "Pulsar ended while starting (log: $1/pulsar.log)"
}

# A first start whose JVM ends before it serves is tried once more on new ports and
# an empty data folder (a port handed out by free_port can still be taken before the
# JVM binds it), after its log's errors are shown.
start_pulsar() {  # start_pulsar DIR [ADDRESS [TLSDIR]]
  local dir=$1 addr=${2:-127.0.0.1} tls=${3:-} web broker web_tls="" attempt
  pulsar_log4j >"$dir/log4j2.properties"
  for attempt in 1 2; do
    web=$(free_port) broker=$(free_port)
    [[ -z $tls ]] || web_tls=$(free_port)
    {
      pulsar_config "$web" "$broker" "$(free_port)" "$addr"
      [[ -z $tls ]] || pulsar_tls_config "$web_tls" "$tls"
    } >"$dir/standalone.conf"
    launch_pulsar "$dir"
    wait_for 120 pulsar pulsar_settled "$dir" || break
    pulsar_gone "$dir" || break
    ((attempt == 1)) || break
    say "Pulsar ended while starting; its errors:"
    grep -E 'ERROR|Exception|Error:' "$dir/pulsar.log" | tail -n 15 >&2 || true
    mv "$dir/pulsar.log" "$dir/pulsar.first.log"
    rm -rf "$dir/metadata" "$dir/bookkeeper" "$dir/data"
  done
  wait_pulsar "$dir"
  echo "PULSAR_WEB=http://$addr:$web"
  [[ -z $tls ]] || echo "PULSAR_WEB_TLS=https://$addr:$web_tls"
  echo "PULSAR_BROKER=pulsar://$addr:$broker"
  echo "PULSAR_VERSION=$PULSAR_VERSION"
}

# --- Debian's servers ------------------------------------------------------------------

start_redis() {
  local dir=$1 port
  port=$(free_port)
  launch "$dir" redis redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save '' --appendonly no
  wait_for 30 redis bash -c "[[ \$(redis-cli -p $port ping) == PONG ]]" || die "redis-server did not answer (log: $dir/redis.log)"
  echo "REDIS_URL=redis://127.0.0.1:$port"
}

start_nats() {
  local dir=$1 port
  port=$(free_port)
  launch "$dir" nats nats-server -js -a 127.0.0.1 -p "$port" -sd "$dir/jetstream"
  wait_for 30 nats bash -c "exec 3<>/dev/tcp/127.0.0.1/$port && timeout 2 head -c 4 <&3 | grep -q INFO" ||
    die "nats-server did not answer (log: $dir/nats.log)"
  echo "NATS_URL=nats://127.0.0.1:$port"
}

# amqp_ready PORT: the node answers the AMQP 0-9-1 protocol header with a frame.
amqp_ready() {
  local reply
  reply=$(
    exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf 'AMQP\x00\x00\x09\x01' >&3
    timeout 2 head -c 1 <&3 | od -An -tu1
  ) || return 1
  ((reply == 1))  # a method frame: connection.start
}

start_rabbitmq() {
  local dir=$1 port dist epmd
  port=$(free_port) dist=$(free_port) epmd=$(free_port)
  mkdir -p "$dir/home"
  echo '[].' >"$dir/enabled_plugins"
  # The node's own epmd on a private port: one the node started would outlive it.
  launch "$dir" epmd epmd -port "$epmd" -address 127.0.0.1
  launch "$dir" rabbitmq env HOME="$dir/home" RABBITMQ_NODENAME="idem-$port@localhost" \
    RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT="$port" RABBITMQ_DIST_PORT="$dist" \
    ERL_EPMD_PORT="$epmd" RABBITMQ_MNESIA_BASE="$dir/mnesia" RABBITMQ_LOG_BASE="$dir/log" \
    RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins" RABBITMQ_CONFIG_FILE="$dir/rabbitmq" \
    RABBITMQ_ALLOW_INPUT=1 RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-noinput /usr/lib/rabbitmq/bin/rabbitmq-server
  wait_for 120 rabbitmq amqp_ready "$port" || die "rabbitmq-server did not answer (logs in $dir)"
  echo "AMQP_URL=amqp://guest:guest@127.0.0.1:$port/%2F"
}

start_postgres() {
  local dir=$1 port bin=/usr/lib/postgresql/15/bin
  port=$(free_port)
  mkdir -p "$dir/pg"
  local -a as=()
  if [[ $(id -u) == 0 ]]; then
    chown postgres "$dir/pg"
    as=(runuser -u postgres --)
  fi
  "${as[@]}" "$bin/initdb" -D "$dir/pg/data" -U idem --auth=trust >"$dir/initdb.log" 2>&1 || die "initdb failed (log: $dir/initdb.log)"
  launch "$dir" postgres "${as[@]}" "$bin/postgres" -D "$dir/pg/data" -p "$port" -k "$dir/pg" -c listen_addresses=127.0.0.1
  wait_for 60 postgres "$bin/pg_isready" -h 127.0.0.1 -p "$port" || die "postgres did not answer (log: $dir/postgres.log)"
  echo "POSTGRES_URL=postgresql://idem@127.0.0.1:$port/postgres"
}

# --- commands ----------------------------------------------------------------------------

# Stops the broker of DIR when process OWNER ends.
watch_owner() {
  local dir=$1 owner=$2
  (
    trap '' HUP
    while kill -0 "$owner" 2>/dev/null && [[ -d $dir ]]; do sleep 1; done
    "$0" stop "$dir" >/dev/null 2>&1
  ) </dev/null >/dev/null 2>&1 &
  disown
}

cmd_start() {
  local kind=${1:-} dir="" nodes=1 owner="" also="" address="" tls=""
  [[ -n $kind ]] || die "usage: broker.sh start kafka|pulsar|redis|nats|rabbitmq|postgres [--dir DIR] [--nodes N] [--owner PID] [--also-listen ADDR] [--address ADDR] [--tls TLSDIR]"
  shift
  while (($#)); do
    case $1 in
      --dir) dir=${2:?--dir needs a folder}; shift 2 ;;
      --nodes) nodes=${2:?--nodes needs a number}; shift 2 ;;
      --owner) owner=${2:?--owner needs a PID}; shift 2 ;;
      --also-listen) also=${2:?--also-listen needs an IPv4 address}; shift 2 ;;
      --address) address=${2:?--address needs an IPv4 address}; shift 2 ;;
      --tls) tls=${2:?--tls needs a folder with ca.pem, server.pem and server.key}; shift 2 ;;
      *) die "unknown option $1" ;;
    esac
  done
  [[ $nodes =~ ^[1-9]$ ]] || die "--nodes takes 1..9"
  [[ $kind == kafka || $nodes == 1 ]] || die "--nodes is for kafka"
  [[ $kind == kafka || -z $also ]] || die "--also-listen is for kafka"
  [[ $kind == pulsar || -z $address ]] || die "--address is for pulsar"
  [[ $kind == kafka || $kind == pulsar || -z $tls ]] || die "--tls is for kafka and pulsar"
  if [[ -n $tls ]]; then
    tls=$(cd "$tls" && pwd) || die "--tls: no folder $tls"
    local f
    for f in ca.pem server.pem server.key; do [[ -r $tls/$f ]] || die "--tls: cannot read $tls/$f"; done
  fi
  local a
  for a in "$also" "$address"; do
    [[ -z $a || $a =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "an IPv4 address is needed, not $a"
  done
  if [[ -z $dir ]]; then
    dir=$(mktemp -d "${TMPDIR:-/tmp}/idem-$kind-XXXXXX")
    chmod 755 "$dir"  # the postgres user must reach its data folder
    touch "$dir/.temporary"
  fi
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  echo "$kind" >"$dir/kind"
  [[ -n $owner ]] && watch_owner "$dir" "$owner"
  echo "DIR=$dir"
  PORTS_FILE=$dir/ports
  # A start that fails stops what it started and keeps the folder with its logs.
  trap 'rm -f "$dir/.temporary"; cmd_stop "$dir"; echo "broker.sh: logs in $dir" >&2' EXIT
  case $kind in
    kafka) start_kafka "$dir" "$nodes" "$also" "$tls" ;;
    pulsar) start_pulsar "$dir" "$address" "$tls" ;;
    redis | nats | rabbitmq | postgres) "start_$kind" "$dir" ;;
    *) die "unknown broker $kind (kafka, pulsar, redis, nats, rabbitmq, postgres)" ;;
  esac
  trap - EXIT
}

cmd_stop() {
  local dir=${1:?usage: broker.sh stop DIR} f
  [[ -d $dir ]] || return 0
  # the broker first, epmd (RabbitMQ's name server) last
  for f in "$dir"/*.pid; do
    [[ -e $f && $f != */epmd.pid ]] && stop_pid_file "$f" TERM
  done
  [[ -e $dir/epmd.pid ]] && stop_pid_file "$dir/epmd.pid" TERM
  [[ -e $dir/.temporary ]] && rm -rf "$dir"
  return 0
}

cmd_kill_node() {
  local dir=${1:?usage: broker.sh kill-node DIR N} n=${2:?usage: broker.sh kill-node DIR N}
  [[ -f $dir/node$n.pid ]] || die "no running node $n in $dir"
  stop_pid_file "$dir/node$n.pid" KILL
}

cmd_start_node() {
  local dir=${1:?usage: broker.sh start-node DIR N} n=${2:?usage: broker.sh start-node DIR N}
  [[ -f $dir/node$n/server.properties ]] || die "no node $n in $dir"
  [[ -f $dir/node$n.pid ]] && kill -0 "$(cat "$dir/node$n.pid")" 2>/dev/null && die "node $n is running"
  start_kafka_node "$dir" "$n"
  wait_kafka "$dir" "$(cat "$dir/node$n/port")" "$(cat "$dir/nodes")"
}

# Stops the Pulsar standalone of DIR (SIGTERM, or SIGKILL with --kill) and starts it
# again on the same ports and data, waiting until it serves.
cmd_restart() {
  local dir=${1:?usage: broker.sh restart DIR [--kill]} sig=TERM
  [[ ${2:-} == --kill ]] && sig=KILL
  [[ $(cat "$dir/kind" 2>/dev/null) == pulsar ]] || die "restart is for a Pulsar standalone ($dir has none)"
  stop_pid_file "$dir/pulsar.pid" "$sig"
  launch_pulsar "$dir"
  wait_pulsar "$dir"
}

case ${1:-} in
  start) shift; cmd_start "$@" ;;
  restart) shift; cmd_restart "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  kill-node) shift; cmd_kill_node "$@" ;;
  start-node) shift; cmd_start_node "$@" ;;
  fetch) [[ ${2:-} == kafka || ${2:-} == pulsar ]] || die "usage: broker.sh fetch kafka|pulsar"; "${2}_jars" >/dev/null ;;
  *) die "usage: broker.sh start KIND [--dir DIR] [--nodes N] [--owner PID] | stop DIR | restart DIR [--kill] | kill-node DIR N | start-node DIR N | fetch kafka|pulsar" ;;
esac
