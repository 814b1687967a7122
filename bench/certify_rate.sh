#!/bin/bash
# N simulated nodes joining one server with nothing polling it (a report, not
# a test): once a second, how many node certificates the server has issued
# (its "issued a node certificate" log lines) and the CPU time the server and
# the sim used; then the CPU both use over IDLE more seconds once all are
# certified. Every process it starts is killed on exit; bounded by LIMIT s.
#
# Usage: BIN=target/release/drover N=10000 IDLE=20 LIMIT=240 bench/certify_rate.sh
set -u
BIN=${BIN:-target/release/drover}; N=${N:-10000}; IDLE=${IDLE:-20}; LIMIT=${LIMIT:-240}
D=$(mktemp -d /tmp/drover-certify.XXXXXX)
SP=""; MP=""
cleanup() { [ -n "$MP" ] && kill "$MP" 2>/dev/null; [ -n "$SP" ] && kill "$SP" 2>/dev/null; wait 2>/dev/null; rm -rf "$D"; }
trap cleanup EXIT
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
cpu() { awk -v hz="$(getconf CLK_TCK)" '{print ($14+$15)/hz}' "/proc/$1/stat"; }
G=$(port); H=$(port)
"$BIN" server --data-dir "$D/server" --listen "127.0.0.1:$G" --http "127.0.0.1:$H" --node-timeout 5s \
  2>"$D/server.log" >/dev/null & SP=$!
for _ in $(seq 100); do [ -f "$D/server/node-token" ] && [ -f "$D/server/client.yaml" ] && break; sleep 0.1; done
S0=$(cpu "$SP"); T0=$(date +%s.%N)
"$BIN" sim --server "127.0.0.1:$G" --token-file "$D/server/node-token" --nodes "$N" 2>"$D/sim.log" >/dev/null & MP=$!
while :; do
  sleep 1
  n=$(grep -c "issued a node certificate" "$D/server.log")
  t=$(echo "$(date +%s.%N) - $T0" | bc)
  echo "t=${t}s certified=$n server_cpu=$(echo "$(cpu "$SP") - $S0" | bc)s sim_cpu=$(cpu "$MP")s load=$(cut -d' ' -f1 /proc/loadavg)"
  [ "$n" -ge "$N" ] && break
  [ "${t%.*}" -ge "$LIMIT" ] && { echo "not all certified within ${LIMIT}s"; exit 1; }
done
S1=$(cpu "$SP"); M1=$(cpu "$MP"); sleep "$IDLE"
echo "after all certified, $IDLE s more: server_cpu +$(echo "$(cpu "$SP") - $S1" | bc)s sim_cpu +$(echo "$(cpu "$MP") - $M1" | bc)s"
