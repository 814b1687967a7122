#!/usr/bin/env bash
# drover vs etcd, the same workload against both: builds the release drover
# binary and the benchmark, installs etcd 3.4 if it is missing (Debian's
# etcd-server, as root), then runs crates/drover-bench. Extra arguments go
# to drover-bench (see `--help`), e.g. bench/run.sh --seconds 5.
# drover always speaks TLS 1.3; etcd runs with client and peer TLS too
# (certificates made by drover-bench), or plain with --etcd-plain.
#
# Figures: one `system.name: value unit` line each on stdout, then a
# markdown table of drover/etcd ratios. Diagnostics on stderr ('#').
# BENCH_PROFILE=dev runs the debug build instead (.ci/bench-smoke: the
# figures are then only a smoke test's). `--systems drover` needs no etcd.
set -euo pipefail
cd "$(dirname "$0")/.."

want_etcd=1
prev=""
for a in "$@"; do
  case $a in
    --systems=*) [[ ${a#--systems=} == *etcd* ]] || want_etcd=0 ;;
    *) [[ $prev == --systems && $a != *etcd* ]] && want_etcd=0 ;;
  esac
  prev=$a
done

if [[ $want_etcd == 1 ]] && ! command -v etcd >/dev/null; then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    echo "# installing etcd-server (Debian)" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server etcd-client >&2
  else
    echo "etcd not found: apt-get install -y etcd-server etcd-client" >&2
    exit 2
  fi
fi

TARGET=${CARGO_TARGET_DIR:-target}
PROFILE=${BENCH_PROFILE:-release}
DIR=$PROFILE
[[ $PROFILE == dev ]] && DIR=debug
cargo build --profile "$PROFILE" -p drover -p drover-bench >&2
exec "$TARGET/$DIR/drover-bench" --drover-bin "$TARGET/$DIR/drover" "$@"
