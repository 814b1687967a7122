#!/usr/bin/env bash
# image.sh — builds the container image local/drover:dev without any
# registry: `docker import` of a root file system holding
#   /usr/local/bin/drover             the static binary (deploy/build-static.sh)
#   /usr/local/bin/drover-entrypoint  deploy/image/entrypoint.sh
#   /bin/busybox + applet links       Debian's busybox-static (a shell for the
#                                     entry point and for debugging)
#   /etc/passwd, /etc/group, /etc/nsswitch.conf, /tmp (1777),
#   /var/lib/drover (0700)            the default data dir
#
#   deploy/image.sh [IMAGE]            (default IMAGE: local/drover:dev)
#
# Env: DROVER_BIN   the binary [default: $CARGO_TARGET_DIR or <repo>/target,
#                   then x86_64-unknown-linux-gnu/release/drover]
#      BUSYBOX      a static busybox [default: /bin/busybox or /usr/bin/busybox
#                   when static, else busybox-static fetched with
#                   `apt-get download` into a temp dir (the system is not
#                   changed), else the busybox of the image local/busybox:1]
#      DOCKER       the docker client (default: docker)
# Exit: 0 ok (the image name on stdout), 2 no engine, 3 a missing or
# non-static input, 4 the image does not run.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
image="${1:-local/drover:dev}"
docker="${DOCKER:-docker}"
say() { echo "image.sh: $*" >&2; }

"$docker" version >/dev/null 2>&1 || { say "no Docker engine answers (DOCKER_HOST=${DOCKER_HOST:-unset})"; exit 2; }

is_static() {
  [ -x "$1" ] || return 1
  if command -v file >/dev/null 2>&1; then
    file -L "$1" | grep -Eq 'statically linked|static-pie linked'
  else
    # static-pie: "statically linked"; classic static: "not a dynamic executable"
    ldd "$1" 2>&1 | grep -Eq 'statically linked|not a dynamic executable'
  fi
}

bin="${DROVER_BIN:-${CARGO_TARGET_DIR:-$here/../target}/x86_64-unknown-linux-gnu/release/drover}"
is_static "$bin" || { say "$bin: missing or not a static executable; run deploy/build-static.sh (or set DROVER_BIN)"; exit 3; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

busybox=""
for c in ${BUSYBOX:-} /bin/busybox /usr/bin/busybox; do
  if is_static "$c"; then busybox="$c"; break; fi
done
if [ -z "$busybox" ] && command -v apt-get >/dev/null 2>&1; then
  say "fetching Debian's busybox-static (apt-get download)"
  if (cd "$work" && apt-get download -qq busybox-static >/dev/null 2>&1); then
    dpkg-deb -x "$work"/busybox-static_*.deb "$work/pkg"
    if is_static "$work/pkg/bin/busybox"; then busybox="$work/pkg/bin/busybox"; fi
  fi
fi
if [ -z "$busybox" ] && "$docker" image inspect local/busybox:1 >/dev/null 2>&1; then
  say "taking busybox from the image local/busybox:1"
  cid="$("$docker" create local/busybox:1 true)"
  "$docker" cp "$cid:/bin/busybox" "$work/busybox" >/dev/null
  "$docker" rm "$cid" >/dev/null
  if is_static "$work/busybox"; then busybox="$work/busybox"; fi
fi
[ -n "$busybox" ] || { say "no static busybox: set BUSYBOX=/path/to/static/busybox"; exit 3; }

say "building $image from $bin and $busybox"
root="$work/rootfs"
mkdir -p "$root"/{bin,etc,proc,sys,dev,root,tmp,usr/local/bin,var/lib/drover,join}
chmod 1777 "$root/tmp"
chmod 0700 "$root/var/lib/drover" "$root/root"
cp "$busybox" "$root/bin/busybox"
for applet in sh ash basename cat chmod chown cp date df du echo env false grep head hostname id \
              kill ln ls mkdir mv nc ping printf ps rm rmdir sed sleep stat tail tee test \
              timeout top touch tr true uname vi wc wget which '['; do
  ln -s busybox "$root/bin/$applet"
done
ln -s bin "$root/sbin"
ln -s ../bin "$root/usr/bin"
install -m 0755 "$bin" "$root/usr/local/bin/drover"
install -m 0755 "$here/image/entrypoint.sh" "$root/usr/local/bin/drover-entrypoint"
printf 'root:x:0:0:root:/root:/bin/sh\ndrover:x:10001:10001:drover:/var/lib/drover:/bin/false\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
printf 'root:x:0:\ndrover:x:10001:\nnogroup:x:65534:\n' >"$root/etc/group"
# The static glibc resolves names from /etc/hosts, then DNS (the engine's
# embedded resolver on a user-defined network).
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"

version="$("$bin" --version 2>/dev/null | head -n 1 || echo drover)"
old_id="$("$docker" image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)"
tar --numeric-owner --owner=0 --group=0 -C "$root" -c . |
  "$docker" import \
    -c 'ENV PATH=/usr/local/bin:/bin' \
    -c 'WORKDIR /var/lib/drover' \
    -c 'ENTRYPOINT ["/usr/local/bin/drover-entrypoint"]' \
    -c 'CMD ["--help"]' \
    -c 'EXPOSE 7600 7680' \
    -m "$version: static binary + busybox, made by deploy/image.sh" \
    - "$image" >/dev/null

out="$("$docker" run --rm --network none "$image" --version 2>&1 || true)"
case "$out" in
  drover*) ;;
  *) say "$image does not run: $out"; exit 4 ;;
esac
if [ "$("$docker" run --rm --network none --entrypoint /bin/sh "$image" -c 'echo ok')" != ok ]; then
  say "$image: busybox sh does not run"; exit 4
fi
# The previous build, now untagged, is dropped (unless a container uses it).
if [ -n "$old_id" ] && [ "$old_id" != "$("$docker" image inspect -f '{{.Id}}' "$image")" ]; then
  "$docker" rmi "$old_id" >/dev/null 2>&1 || true
fi
say "ok: $image ($out, $("$docker" image inspect -f '{{.Size}}' "$image") bytes)"
echo "$image"
