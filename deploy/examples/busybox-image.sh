#!/usr/bin/env bash
# busybox-image.sh — makes the example image `local/busybox:1` without any
# registry: a statically linked busybox (Debian's busybox-static) and its
# applet links, imported with `docker import`.
#
#   deploy/examples/busybox-image.sh [--if-engine] [IMAGE]   (IMAGE: local/busybox:1)
#
# Idempotent: an IMAGE that already exists is kept (FORCE=1 rebuilds it).
# Concurrent runs are serialised (flock), so parallel tests build it once.
#
# Where busybox comes from, in order: $BUSYBOX (a static binary); a static
# /bin/busybox or /usr/bin/busybox; the busybox-static package downloaded
# with `apt-get download` and unpacked in a temp dir (no root needed, the
# system is not changed).
#
# --if-engine: when no Docker engine answers, say so and exit 0 (what
#   README's first command uses: `drover up` then runs simulated containers).
#
# Exit: 0 ok (the image name on stdout), 2 no engine answers, 3 no static
# busybox, 4 the image does not run.
set -euo pipefail

if_engine=""
if [ "${1:-}" = "--if-engine" ]; then
  if_engine=1
  shift
fi
image="${1:-local/busybox:1}"
docker="${DOCKER:-docker}"

say() { echo "busybox-image: $*" >&2; }

if ! command -v "$docker" >/dev/null 2>&1; then
  if [ -n "$if_engine" ]; then
    say "no docker client ($docker); $image not built"
    exit 0
  fi
  say "no docker client ($docker): install Docker (Debian: apt-get install docker.io)"
  exit 2
fi
if ! "$docker" version >/dev/null 2>&1; then
  if [ -n "$if_engine" ]; then
    say "no Docker engine answers (DOCKER_HOST=${DOCKER_HOST:-unset}); $image not built"
    exit 0
  fi
  say "no Docker engine answers (DOCKER_HOST=${DOCKER_HOST:-unset}): start dockerd, or point DOCKER_HOST at it"
  exit 2
fi

have_image() { "$docker" image inspect "$image" >/dev/null 2>&1; }

if [ -z "${FORCE:-}" ] && have_image; then
  echo "$image"
  exit 0
fi

# One build at a time on this machine; the loser of the race finds the image.
lock="${TMPDIR:-/tmp}/drover-busybox-image.lock"
if command -v flock >/dev/null 2>&1 && { : >>"$lock"; } 2>/dev/null; then
  exec 9>>"$lock"
  flock 9
  if [ -z "${FORCE:-}" ] && have_image; then
    echo "$image"
    exit 0
  fi
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# A binary is static when it has no program interpreter.
is_static() {
  [ -x "$1" ] || return 1
  if command -v file >/dev/null 2>&1; then
    file -L "$1" | grep -q 'statically linked'
  else
    ! ldd "$1" >/dev/null 2>&1
  fi
}

busybox=""
for candidate in ${BUSYBOX:-} /bin/busybox /usr/bin/busybox; do
  if is_static "$candidate"; then
    busybox="$candidate"
    break
  fi
done
if [ -z "$busybox" ] && command -v apt-get >/dev/null 2>&1; then
  say "no static busybox here: downloading Debian's busybox-static"
  if (cd "$work" && apt-get download -qq busybox-static >/dev/null 2>&1) ||
     { [ "$(id -u)" -eq 0 ] && apt-get update -qq >&2 && (cd "$work" && apt-get download -qq busybox-static >&2); }; then
    dpkg-deb -x "$work"/busybox-static_*.deb "$work/pkg"
    if is_static "$work/pkg/bin/busybox"; then busybox="$work/pkg/bin/busybox"; fi
  fi
fi
if [ -z "$busybox" ]; then
  say "no static busybox: install it (sudo apt-get install busybox-static) or set BUSYBOX=/path/to/static/busybox"
  exit 3
fi

say "building $image from $busybox"
root="$work/rootfs"
mkdir -p "$root"/{bin,etc,proc,sys,dev,root,tmp,var/www}
chmod 1777 "$root/tmp"
cp "$busybox" "$root/bin/busybox"
for applet in sh ash cat cp date df du echo env false free grep head hostname httpd id ip kill \
              ln ls mkdir mount mv nc nohup nslookup ping printf ps rm sed seq sleep stat tail \
              tee test timeout top touch true umount uname vi wc wget which chmod chown tar stty tty '['; do
  ln -s busybox "$root/bin/$applet"
done
ln -s bin "$root/sbin"
mkdir -p "$root/usr"
ln -s ../bin "$root/usr/bin"
ln -s ../bin "$root/usr/sbin"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
echo 'hello from busybox httpd' >"$root/var/www/index.html"

tar --numeric-owner --owner=0 --group=0 -C "$root" -c . |
  "$docker" import -c 'ENV PATH=/bin' -c 'CMD ["/bin/sh"]' -m 'drover example image: static busybox' - "$image" >/dev/null

if [ "$("$docker" run --rm --network none "$image" echo ok 2>&1)" != "ok" ]; then
  "$docker" rmi "$image" >/dev/null 2>&1 || true
  say "$image does not run: is $busybox a static binary for this machine's architecture?"
  exit 4
fi
say "ok: $image"
echo "$image"
