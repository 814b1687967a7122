#!/usr/bin/env bash
# systemd-test.sh — runs deploy/install.sh and the units under a real
# systemd (this machine's own systemd, as PID 1 of a throwaway container):
#
#   - the container's root is a tiny tar (docker import, no registry) with
#     /usr bind-mounted read-only from this machine (Debian 12, merged /usr),
#     so its systemd, bash and useradd are the host's; it needs
#     --cap-add SYS_ADMIN, seccomp unconfined and /sys/fs/cgroup (no
#     --privileged). /usr being read-only, the binary goes to PREFIX=/opt/drover.
#   - install.sh server: the unit runs as `drover`, no capabilities,
#     NoNewPrivs, seccomp on, / read-only and the data dir writable;
#   - install.sh agent --runtime sim with the server's node token: Ready;
#     `systemctl restart drover-agent` keeps the node (SIGKILL: no leave);
#     `systemctl stop` ends inactive, not failed;
#   - `systemctl restart drover-server` is clean;
#   - uninstall agent --purge makes the node leave (deleted);
#   - then (unless NO_DOCKER_AGENT=1; needs local/busybox:1) the agent with
#     --runtime docker on this machine's engine (its socket mounted): a
#     DaemonSet pod Running, `systemctl stop drover-agent` keeps its
#     containers, the restarted agent adopts the same containers, uninstall
#     --purge (leave) stops them;
#   - uninstall --purge removes everything and the user.
#
#   deploy/test/systemd-test.sh      (DROVER_BIN: the binary, as install.sh)
# Exit 0 when every check passed; 77 when systemd cannot run here.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
deploy="$(dirname "$here")"
bin="${DROVER_BIN:-${CARGO_TARGET_DIR:-$deploy/../target}/x86_64-unknown-linux-gnu/release/drover}"
image=local/drover-systemdtest:dev
cname="drover-systemdtest-$$"
say() { echo "systemd-test: $*" >&2; }
fail() { say "FAIL: $*"; exit 1; }
[ -x "$bin" ] || fail "no binary at $bin (deploy/build-static.sh)"
if [ ! -x /usr/lib/systemd/systemd ] || [ ! -L /bin ]; then say "needs a merged-/usr host with systemd installed"; exit 77; fi

work="$(mktemp -d)"
dnode="systemdtest-$$"
cleanup() {
  docker rm -f "$cname" >/dev/null 2>&1 || true
  # Containers a failed docker-runtime part may have left.
  docker ps -aq --filter "label=io.drover.node=$dnode" | xargs -r docker rm -f >/dev/null 2>&1 || true
  docker rmi "$image" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

r="$work/r"
mkdir -p "$r"/{etc/systemd/system,run,tmp,var/lib,var/log,root,proc,sys,dev,home,src,usr,opt}
chmod 1777 "$r/tmp"
for l in bin lib lib64 sbin; do ln -s "usr/$l" "$r/$l"; done
ln -s ../run "$r/var/run"
cp /etc/passwd /etc/group /etc/shadow /etc/gshadow /etc/nsswitch.conf /etc/login.defs "$r/etc/" 2>/dev/null || true
ln -s ../usr/lib/os-release "$r/etc/os-release"
: >"$r/etc/machine-id"
tar --numeric-owner -C "$r" -c . | docker import -c 'ENV container=docker' - "$image" >/dev/null

docker run -d --name "$cname" --network none --cap-add SYS_ADMIN --security-opt seccomp=unconfined \
  -v /usr:/usr:ro --tmpfs /run --tmpfs /run/lock -v /sys/fs/cgroup:/sys/fs/cgroup:rw \
  -v "$deploy:/src/deploy:ro" -v "$bin:/src/drover:ro" \
  -v /var/run/docker.sock:/run/docker.sock \
  "$image" /usr/lib/systemd/systemd >/dev/null || { say "cannot start a systemd container here"; exit 77; }
S() { docker exec -e DROVER_BIN=/src/drover -e PREFIX=/opt/drover "$cname" "$@"; }
K() { S /opt/drover/bin/drover --config /var/lib/drover/server/client.yaml "$@"; }
for _ in $(seq 1 50); do
  st="$(S systemctl is-system-running 2>/dev/null || true)"
  case "$st" in running | degraded) break ;; esac
  sleep 0.2
done
case "$st" in running | degraded) ;; *) say "systemd did not come up ($st)"; exit 77 ;; esac
say "systemd $(S systemctl --version | head -n 1 | cut -d' ' -f2) is $st in $cname"

say "install.sh server"
S /src/deploy/install.sh server --listen 127.0.0.1:7600 --http 127.0.0.1:7680 >&2 2>&1 || fail "install.sh server"
for _ in $(seq 1 50); do S test -s /var/lib/drover/server/client.yaml && break; sleep 0.2; done
S systemctl is-active --quiet drover-server || { S journalctl -u drover-server --no-pager | tail; fail "server not active"; }
pid="$(S systemctl show -p MainPID --value drover-server)"
st="$(S cat "/proc/$pid/status")"
grep -q '^NoNewPrivs:[[:space:]]*1' <<<"$st" || fail "NoNewPrivs not set"
grep -q '^Seccomp:[[:space:]]*2' <<<"$st" || fail "no seccomp filter"
grep -q '^CapBnd:[[:space:]]*0000000000000000' <<<"$st" || fail "capabilities left"
[ "$(S stat -c %U "/proc/$pid")" = drover ] || fail "server not running as drover"
mi="$(S cat "/proc/$pid/mountinfo")"
grep -q ' / / ro,' <<<"$mi" || fail "/ not read-only for the server"
grep -q ' /var/lib/drover/server rw,' <<<"$mi" || fail "data dir not writable for the server"
say "server: active, user drover, NoNewPrivs, seccomp, no capabilities, / ro, data dir rw"

say "install.sh agent --runtime sim"
S /src/deploy/install.sh agent --server 127.0.0.1:7600 --token-file /var/lib/drover/server/node-token \
  --runtime sim --name box1 >&2 2>&1 || fail "install.sh agent"
ready() {
  for _ in $(seq 1 50); do
    K get nodes 2>/dev/null | grep -q '^box1 *Ready' && return 0
    sleep 0.2
  done
  return 1
}
ready || { S journalctl -u drover-agent --no-pager | tail; fail "box1 not Ready"; }
uid1="$(K get node box1 -o jsonpath='{.metadata.uid}' 2>/dev/null || K get node box1 -o yaml | grep -m1 'uid:')"

say "systemctl restart drover-agent keeps the node"
S systemctl restart drover-agent
ready || fail "box1 not Ready after a restart"
uid2="$(K get node box1 -o jsonpath='{.metadata.uid}' 2>/dev/null || K get node box1 -o yaml | grep -m1 'uid:')"
[ -n "$uid1" ] || fail "cannot read the node's uid"
say "node uid before/after: ${uid1##* } / ${uid2##* }"
[ "$uid1" = "$uid2" ] || fail "the node was recreated by a restart ($uid1 -> $uid2)"
S systemctl stop drover-agent
[ "$(S systemctl is-active drover-agent || true)" = inactive ] || fail "agent not inactive after stop"
S systemctl is-failed --quiet drover-agent && fail "agent marked failed by a stop"
S systemctl start drover-agent
ready || fail "box1 not Ready after stop/start"

say "systemctl restart drover-server"
S systemctl restart drover-server
sleep 1
S systemctl is-active --quiet drover-server || fail "server not active after restart"
S systemctl is-failed --quiet drover-server && fail "server failed"
ready || fail "box1 not Ready after the server restarted"

say "uninstall agent --purge: the node leaves"
S /src/deploy/install.sh uninstall agent --purge >&2 2>&1
K get nodes 2>/dev/null | grep -q '^box1 ' && fail "box1 still there after uninstall --purge"

# --- the agent with --runtime docker (this machine's engine) under the unit
if [ -z "${NO_DOCKER_AGENT:-}" ] && docker image inspect local/busybox:1 >/dev/null 2>&1; then
  say "install.sh agent --runtime docker --name $dnode (the host's engine through its socket)"
  S /src/deploy/install.sh agent --server 127.0.0.1:7600 --token-file /var/lib/drover/server/node-token \
    --runtime docker --name "$dnode" >&2 2>&1 || fail "install.sh agent (docker)"
  docker exec -i "$cname" /opt/drover/bin/drover --config /var/lib/drover/server/client.yaml apply -f - >&2 <<YAML
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: systemdtest}
spec:
  selector: {matchLabels: {app: systemdtest}}
  template:
    metadata: {labels: {app: systemdtest}}
    spec:
      nodeSelector: {kubernetes.io/hostname: $dnode}
      containers:
      - name: c
        image: local/busybox:1
        imagePullPolicy: Never
        command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait \$!; done"]
YAML
  ids() { docker ps -q --no-trunc --filter "label=io.drover.node=$dnode" | sort | tr '\n' ' '; }
  running=""
  for _ in $(seq 1 150); do
    if K get pods -o wide 2>/dev/null | grep "$dnode" | grep -q Running; then running=1; break; fi
    sleep 0.2
  done
  K get pods -o wide >&2 || true
  [ -n "$running" ] || { S journalctl -u drover-agent --no-pager | tail -20; fail "the docker pod is not Running"; }
  before="$(ids)"
  [ -n "$before" ] || fail "no container labelled io.drover.node=$dnode on the engine"
  say "containers: $(wc -w <<<"$before") ($before)"
  say "systemctl stop drover-agent: the containers keep running"
  S systemctl stop drover-agent
  sleep 2
  [ "$(ids)" = "$before" ] || fail "containers changed after an agent stop: $(ids)"
  S systemctl start drover-agent
  sleep 5
  K get pods -o wide 2>/dev/null | grep "$dnode" | grep -q Running || fail "pod not Running after the agent came back"
  [ "$(ids)" = "$before" ] || fail "containers replaced after the agent came back (not adopted): $(ids)"
  say "the restarted agent adopted the same containers"
  say "uninstall agent --purge: the node leaves and its containers stop"
  S /src/deploy/install.sh uninstall agent --purge >&2 2>&1
  [ -z "$(ids)" ] || fail "containers left after the node left: $(ids)"
  K delete ds systemdtest >&2 || true
else
  say "skipping the docker-runtime agent (NO_DOCKER_AGENT set or no local/busybox:1: deploy/examples/busybox-image.sh)"
fi
say "uninstall --purge"
S /src/deploy/install.sh uninstall --purge >&2 2>&1
for p in /opt/drover/bin/drover /etc/drover /var/lib/drover /etc/systemd/system/drover-server.service \
         /etc/systemd/system/drover-agent.service; do
  S test ! -e "$p" || fail "$p left"
done
S id drover >/dev/null 2>&1 && fail "user drover left"
say "PASS"
