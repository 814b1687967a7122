#!/usr/bin/env bash
# install-test.sh — tests deploy/install.sh as root in a throwaway container
# without systemd, with the real static binary:
#
#   1. DESTDIR run on the host (no root needed for the files, nothing started)
#   2. in a container (busybox + Debian's bash-static, imported with
#      `docker import`, no registry): install.sh server, start it by hand as
#      the `drover` user, install.sh agent with the server's node token
#      (--runtime sim), start it, `drover get nodes` shows the node Ready;
#      an upgrade (install.sh server with no flags) keeps the env file;
#      uninstall agent keeps its data; uninstall --purge removes everything
#      and the user.
#
#   deploy/test/install-test.sh          (DROVER_BIN: the binary, as install.sh)
# Exit 0 when every check passed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
deploy="$(dirname "$here")"
bin="${DROVER_BIN:-${CARGO_TARGET_DIR:-$deploy/../target}/x86_64-unknown-linux-gnu/release/drover}"
image=local/drover-installtest:dev
say() { echo "install-test: $*" >&2; }
fail() { say "FAIL: $*"; exit 1; }
[ -x "$bin" ] || fail "no binary at $bin (deploy/build-static.sh)"

work="$(mktemp -d)"
cname="drover-installtest-$$"
cleanup() {
  docker rm -f "$cname" >/dev/null 2>&1 || true
  docker rmi "$image" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# --- 1. DESTDIR on the host -------------------------------------------------
say "1. DESTDIR install into $work/root"
echo "drover-node-0000-test" >"$work/node-token"
DESTDIR="$work/root" DROVER_BIN="$bin" "$deploy/install.sh" agent \
  --server 10.0.0.1:7600 --token-file "$work/node-token" --runtime sim --name box1 2>"$work/log" ||
  { cat "$work/log"; fail "DESTDIR install"; }
grep -q 'would run\|systemd is not running' "$work/log" || fail "DESTDIR install did not say what it would do"
[ "$(stat -c %a "$work/root/etc/drover/agent.env")" = 600 ] || fail "agent.env not 0600"
[ "$(stat -c %a "$work/root/etc/drover/node-token")" = 600 ] || fail "node-token not 0600"
[ "$(stat -c %a "$work/root/var/lib/drover/agent")" = 700 ] || fail "data dir not 0700"
grep -qx 'DROVER_FLAGS="--data-dir /var/lib/drover/agent --server 10.0.0.1:7600 --runtime sim --name box1"' \
  "$work/root/etc/drover/agent.env" || { cat "$work/root/etc/drover/agent.env"; fail "agent.env flags"; }
grep -q 'token' <(grep DROVER_FLAGS "$work/root/etc/drover/agent.env") && fail "the token is in DROVER_FLAGS"
cmp -s "$bin" "$work/root/usr/local/bin/drover" || fail "binary not installed"
DESTDIR="$work/root" "$deploy/install.sh" uninstall --purge 2>/dev/null
left="$(find "$work/root" -type f | wc -l)"
[ "$left" -eq 0 ] || { find "$work/root" -type f; fail "uninstall --purge left $left files"; }
say "1. ok"

# --- 2. a throwaway container ---------------------------------------------
say "2. building $image (busybox-static + bash-static, docker import)"
(cd "$work" && apt-get download -qq busybox-static bash-static >/dev/null 2>&1) ||
  fail "apt-get download busybox-static bash-static"
for d in "$work"/*.deb; do dpkg-deb -x "$d" "$work/pkg"; done
r="$work/rootfs"
mkdir -p "$r"/{bin,sbin,usr/bin,usr/sbin,etc,tmp,root,proc,sys,dev,run,var/lib,src}
chmod 1777 "$r/tmp"
cp "$work/pkg/bin/busybox" "$r/bin/busybox"
cp "$work/pkg/bin/bash-static" "$r/bin/bash"
for a in $("$r/bin/busybox" --list-full); do
  case "$a" in usr/sbin/useradd | usr/sbin/userdel) continue ;; esac
  [ -e "$r/$a" ] || ln -s /bin/busybox "$r/$a"
done
# Debian's busybox-static has no adduser: tiny useradd/userdel stand-ins
# (a real Debian has shadow's).
cat >"$r/usr/sbin/useradd" <<'SH'
#!/bin/sh
# useradd stand-in for the test: the last argument is the name; system uid 999.
for n; do :; done
grep -q "^$n:" /etc/passwd && exit 9
echo "$n:x:999:999::/var/lib/drover:/usr/sbin/nologin" >>/etc/passwd
echo "$n:x:999:" >>/etc/group
SH
cat >"$r/usr/sbin/userdel" <<'SH'
#!/bin/sh
sed -i "/^$1:/d" /etc/passwd /etc/group
SH
chmod 0755 "$r/usr/sbin/useradd" "$r/usr/sbin/userdel"
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$r/etc/passwd"
printf 'root:x:0:\n' >"$r/etc/group"
: >"$r/etc/shadow"
tar --numeric-owner --owner=0 --group=0 -C "$r" -c . |
  docker import -c 'ENV PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin' - "$image" >/dev/null

docker run -d --name "$cname" --network none \
  -v "$deploy:/src/deploy:ro" -v "$bin:/src/drover:ro" \
  "$image" sleep 600 >/dev/null
inside() { docker exec -e DROVER_BIN=/src/drover "$cname" "$@"; }

say "2a. install.sh server"
inside /src/deploy/install.sh server --listen 127.0.0.1:7600 --http 127.0.0.1:7680 2>"$work/log" ||
  { cat "$work/log"; fail "install.sh server"; }
cat "$work/log" >&2
inside id drover >/dev/null || fail "no drover user"
[ "$(inside stat -c '%a %U' /var/lib/drover/server)" = "700 drover" ] || fail "server data dir not 0700 drover"
[ "$(inside stat -c '%a %U' /etc/drover/server.env)" = "600 root" ] || fail "server.env not 0600 root"
inside test -x /usr/local/bin/drover || fail "no /usr/local/bin/drover"
inside test -f /etc/systemd/system/drover-server.service || fail "no unit"

say "2b. starting the server by hand as drover (what install.sh prints, with busybox su for runuser)"
inside sh -c 'set -a; . /etc/drover/server.env; set +a; su -s /bin/sh drover -c "exec /usr/local/bin/drover server $DROVER_FLAGS" >/tmp/server.log 2>&1 &'
for _ in $(seq 1 100); do inside test -s /var/lib/drover/server/client.yaml && break; sleep 0.2; done
inside test -s /var/lib/drover/server/node-token || { inside cat /tmp/server.log; fail "server did not bootstrap"; }
[ "$(inside stat -c '%a %U' /var/lib/drover/server/node-token)" = "600 drover" ] || fail "node-token not 0600 drover"

say "2c. install.sh agent with the node token (root reads the server's files)"
inside /src/deploy/install.sh agent --server 127.0.0.1:7600 --token-file /var/lib/drover/server/node-token \
  --runtime sim --name box1 2>"$work/log" || { cat "$work/log"; fail "install.sh agent"; }
inside sh -c 'set -a; . /etc/drover/agent.env; set +a; exec /usr/local/bin/drover agent $DROVER_FLAGS >/tmp/agent.log 2>&1 &'
ok=""
for _ in $(seq 1 50); do
  if inside drover --config /var/lib/drover/server/client.yaml get nodes 2>/dev/null | grep -q '^box1 *Ready'; then ok=1; break; fi
  sleep 0.2
done
inside drover --config /var/lib/drover/server/client.yaml get nodes >&2 || true
[ -n "$ok" ] || { inside cat /tmp/agent.log; fail "box1 not Ready"; }
inside test -s /var/lib/drover/agent/node.crt || fail "agent kept no certificate"

say "2d. upgrade: install.sh server with no flags keeps server.env"
before="$(inside cat /etc/drover/server.env)"
inside /src/deploy/install.sh server 2>/dev/null
[ "$(inside cat /etc/drover/server.env)" = "$before" ] || fail "server.env changed"

say "2e. stop by hand, uninstall agent (data kept), uninstall --purge"
inside sh -c 'for p in $(pidof drover); do kill -KILL $p; done' || true
inside /src/deploy/install.sh uninstall agent 2>/dev/null
inside test -f /usr/local/bin/drover || fail "binary removed while the server unit is installed"
inside test -f /var/lib/drover/agent/node.crt || fail "agent data removed without --purge"
inside test ! -e /etc/drover/agent.env || fail "agent.env kept"
inside test ! -e /etc/drover/node-token || fail "node-token copy kept"
inside /src/deploy/install.sh uninstall --purge 2>/dev/null
for p in /usr/local/bin/drover /etc/drover /etc/systemd/system/drover-server.service \
         /etc/systemd/system/drover-agent.service /var/lib/drover; do
  inside test ! -e "$p" || fail "$p left after uninstall --purge"
done
inside id drover >/dev/null 2>&1 && fail "user drover left after --purge"
docker rm -f "$cname" >/dev/null
docker rmi "$image" >/dev/null
say "2. ok"
say "PASS"
