#!/usr/bin/env bash
# Build a statically linked release binary of drover (glibc, +crt-static).
# Output: $CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/release/drover
# (default CARGO_TARGET_DIR: <repo>/target).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
RUSTFLAGS='-C target-feature=+crt-static' \
  cargo build --release --target x86_64-unknown-linux-gnu -p drover "$@"
bin="$CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/release/drover"
file "$bin" || true
ls -l "$bin"
