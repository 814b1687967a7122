#!/bin/sh
# drover-entrypoint — the entry point of local/drover images, run by
# busybox sh (see deploy/image.sh and deploy/compose.yaml).
#
#   drover-entrypoint bootstrap [FLAGS…]   first member: `drover server`,
#       then copies its server-token to $SERVER_JOIN_DIR and its node-token
#       (and ca.crt) to $NODE_JOIN_DIR, for the others to join with.
#   drover-entrypoint join ADDR [FLAGS…]   another member: waits for
#       $SERVER_JOIN_DIR/server-token, then `drover server --join ADDR`.
#   drover-entrypoint agent [FLAGS…]       waits for $NODE_JOIN_DIR/node-token
#       (unless the data dir already holds a node certificate), then
#       `drover agent`; without --name, the node is named after the
#       container's hostname at its first start (kept in DATA_DIR/node-name).
#   drover-entrypoint sim [FLAGS…]         same wait, then `drover sim`.
#   drover-entrypoint ANYTHING…            `drover ANYTHING…`
#
# Env: DATA_DIR (default /var/lib/drover), SERVER_JOIN_DIR (default
# /join/server), NODE_JOIN_DIR (default /join/node), WAIT_SECONDS (default
# 300: how long to wait for a token before giving up).
set -eu

DATA_DIR="${DATA_DIR:-/var/lib/drover}"
SERVER_JOIN_DIR="${SERVER_JOIN_DIR:-/join/server}"
NODE_JOIN_DIR="${NODE_JOIN_DIR:-/join/node}"
WAIT_SECONDS="${WAIT_SECONDS:-300}"
DROVER="${DROVER:-/usr/local/bin/drover}"

say() { echo "drover-entrypoint: $*" >&2; }

# Waits until file $1 exists and is not empty.
wait_for() {
  n=0
  while [ ! -s "$1" ]; do
    if [ "$n" -eq 0 ]; then say "waiting for $1"; fi
    n=$((n + 1))
    if [ "$n" -gt $((WAIT_SECONDS * 5)) ]; then
      say "gave up waiting for $1 after ${WAIT_SECONDS}s"
      exit 1
    fi
    sleep 0.2
  done
}

# Copies $1 to directory $2 atomically (a reader never sees half a file).
publish() {
  mkdir -p "$2"
  cp "$1" "$2/.$(basename "$1").tmp"
  mv -f "$2/.$(basename "$1").tmp" "$2/$(basename "$1")"
}

role="${1:-}"
[ $# -gt 0 ] && shift
case "$role" in
  bootstrap)
    "$DROVER" server --data-dir "$DATA_DIR" "$@" &
    pid=$!
    # Stop the server with the container (sh is PID 1 and would not pass
    # the signal on by itself).
    trap 'kill -TERM "$pid" 2>/dev/null' TERM INT
    while [ ! -s "$DATA_DIR/node-token" ] || [ ! -s "$DATA_DIR/server-token" ]; do
      if ! kill -0 "$pid" 2>/dev/null; then
        wait "$pid" || exit $?
        exit 1
      fi
      sleep 0.2
    done
    umask 077
    publish "$DATA_DIR/server-token" "$SERVER_JOIN_DIR"
    publish "$DATA_DIR/node-token" "$NODE_JOIN_DIR"
    publish "$DATA_DIR/ca.crt" "$NODE_JOIN_DIR"
    say "published server-token to $SERVER_JOIN_DIR, node-token and ca.crt to $NODE_JOIN_DIR"
    # `wait` returns early when the trap runs: wait again for the exit code.
    code=0
    wait "$pid" || code=$?
    if kill -0 "$pid" 2>/dev/null; then
      code=0
      wait "$pid" || code=$?
    fi
    exit "$code"
    ;;
  join)
    [ $# -ge 1 ] || { say "join ADDR [FLAGS…]: ADDR is a member's gRPC address"; exit 2; }
    addr="$1"
    shift
    if [ -s "$DATA_DIR/member.crt" ]; then
      # Already a member: a restart resumes from the data dir.
      exec "$DROVER" server --data-dir "$DATA_DIR" "$@"
    fi
    wait_for "$SERVER_JOIN_DIR/server-token"
    exec "$DROVER" server --data-dir "$DATA_DIR" --join "$addr" \
      --token-file "$SERVER_JOIN_DIR/server-token" "$@"
    ;;
  agent | sim)
    if [ "$role" = agent ]; then
      # The node's name: --name if given, else the name kept in the data
      # dir, else this container's hostname (kept for next time). A
      # recreated container (new id, new hostname) that keeps its data dir
      # keeps its name, which its certificate (DATA_DIR/node.crt) is for.
      named=""
      for a in "$@"; do
        case "$a" in --name | --name=*) named=1 ;; esac
      done
      if [ -z "$named" ]; then
        mkdir -p "$DATA_DIR"
        if [ ! -s "$DATA_DIR/node-name" ]; then
          hostname | tr '[:upper:]' '[:lower:]' >"$DATA_DIR/.node-name.tmp"
          mv -f "$DATA_DIR/.node-name.tmp" "$DATA_DIR/node-name"
        fi
        set -- --name "$(cat "$DATA_DIR/node-name")" "$@"
      fi
    fi
    if [ "$role" = sim ] || [ ! -s "$DATA_DIR/node.crt" ]; then
      wait_for "$NODE_JOIN_DIR/node-token"
      export DROVER_TOKEN_FILE="$NODE_JOIN_DIR/node-token"
    fi
    if [ "$role" = agent ]; then
      exec "$DROVER" agent --data-dir "$DATA_DIR" "$@"
    fi
    exec "$DROVER" sim "$@"
    ;;
  '')
    exec "$DROVER" --help
    ;;
  *)
    exec "$DROVER" "$role" "$@"
    ;;
esac
