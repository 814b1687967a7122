#!/usr/bin/env bash
# install.sh — installs drover as a systemd service (server or agent), or
# removes it.
#
#   deploy/install.sh server [FLAGS…]     flags of `drover server`
#   deploy/install.sh agent  [FLAGS…]     flags of `drover agent`
#   deploy/install.sh uninstall [server|agent] [--purge]
#
# What `server`/`agent` do (as root):
#   - the binary      -> $PREFIX/bin/drover (0755)
#   - the unit        -> $SYSTEMD_DIR/drover-ROLE.service
#   - the flags       -> $CONF_DIR/ROLE.env (0600) as DROVER_FLAGS="…"
#   - a token         -> --token-file F / --token T are not kept on the
#                        command line: the token is copied to
#                        $CONF_DIR/server-token (server) or node-token
#                        (agent), 0600, and named by DROVER_TOKEN_FILE.
#   - the data dir    -> created 0700 (default /var/lib/drover/ROLE; the
#                        server's belongs to the system user `drover`). A
#                        data dir elsewhere gets a unit drop-in with
#                        ReadWritePaths=DIR.
#   - systemd         -> `systemctl daemon-reload` and `enable --now` (or
#                        `restart` when it already ran: an upgrade) when
#                        systemd runs; otherwise the commands are printed.
# With no FLAGS and an existing ROLE.env, the env file is kept (upgrade).
#
# `uninstall` stops and disables the units, removes the binary, the units,
# their drop-ins, the env files and the token copies. The data dirs stay
# unless --purge (which also removes the `drover` user). Stopping the agent
# keeps its containers running; with --purge the agent then leaves the
# cluster (`drover agent FLAGS --leave`: its Node is deleted and its pods
# stopped).
#
# Overrides (for packaging and tests):
#   DESTDIR=DIR   install under DIR (nothing is started, no user is made,
#                 no chown; what would run is printed)
#   PREFIX=/usr/local            binary in $PREFIX/bin
#   SYSTEMD_DIR=/etc/systemd/system
#   CONF_DIR=/etc/drover
#   DROVER_BIN=PATH              the binary to install [default: the static
#                 build, $CARGO_TARGET_DIR or <repo>/target, then
#                 …/x86_64-unknown-linux-gnu/release/drover, then a
#                 `drover` next to this script]
#   NO_SYSTEMD=1  do not call systemctl even if systemd runs
#
# Values in FLAGS must not contain whitespace, quotes, backslashes, `$` or
# backquotes: systemd splits DROVER_FLAGS at whitespace, with no quoting.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DESTDIR="${DESTDIR:-}"
PREFIX="${PREFIX:-/usr/local}"
SYSTEMD_DIR="${SYSTEMD_DIR:-/etc/systemd/system}"
CONF_DIR="${CONF_DIR:-/etc/drover}"
SERVICE_USER=drover

say() { printf 'install.sh: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
usage() {
  sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

if [ -n "$DESTDIR" ]; then
  case "$DESTDIR" in /*) ;; *) die "DESTDIR must be an absolute path: $DESTDIR" ;; esac
  DESTDIR="${DESTDIR%/}"
fi
for v in PREFIX SYSTEMD_DIR CONF_DIR; do
  case "${!v}" in
    *[[:space:]\|\&\\\"\'\$]*) die "$v: no whitespace or |&\\\"'\$ please: ${!v}" ;;
    /*) ;;
    *) die "$v must be an absolute path: ${!v}" ;;
  esac
done

# Whether systemd manages this machine (and we may call it).
systemd_runs() {
  [ -z "$DESTDIR" ] && [ -z "${NO_SYSTEMD:-}" ] && [ -d /run/systemd/system ] &&
    command -v systemctl >/dev/null 2>&1
}

# Runs a command, or prints it when we install under DESTDIR.
run_or_print() {
  if [ -n "$DESTDIR" ]; then
    say "would run: $*"
  else
    "$@"
  fi
}

# A flag value systemd's word splitting keeps intact.
check_word() {
  case "$1" in
    *[[:space:]]* | *\"* | *\'* | *\\* | *\$* | *\`*)
      die "flag value $(printf '%q' "$1"): no whitespace, quotes, backslashes, \$ or backquotes (systemd splits DROVER_FLAGS at whitespace)" ;;
    '') die "empty flag value" ;;
  esac
}

find_binary() {
  if [ -n "${DROVER_BIN:-}" ]; then
    [ -x "$DROVER_BIN" ] || die "DROVER_BIN=$DROVER_BIN is not an executable file"
    printf '%s\n' "$DROVER_BIN"
    return
  fi
  local target="${CARGO_TARGET_DIR:-$here/../target}"
  local c
  for c in "$target/x86_64-unknown-linux-gnu/release/drover" "$here/drover"; do
    if [ -x "$c" ]; then
      printf '%s\n' "$c"
      return
    fi
  done
  die "no drover binary: run deploy/build-static.sh, or set DROVER_BIN=/path/to/drover"
}

# The data dirs named by the installed env files (for uninstall --purge).
data_dir_of_env() {
  local env="$1" line flags
  [ -f "$env" ] || return 0
  line="$(grep -E '^DROVER_FLAGS=' "$env" | tail -n 1 || true)"
  flags="${line#DROVER_FLAGS=}"
  flags="${flags#\"}"
  flags="${flags%\"}"
  local -a words
  read -r -a words <<<"$flags"
  local i
  for ((i = 0; i < ${#words[@]}; i++)); do
    case "${words[$i]}" in
      --data-dir) printf '%s\n' "${words[$((i + 1))]:-}" ;;
      --data-dir=*) printf '%s\n' "${words[$i]#--data-dir=}" ;;
    esac
  done
}

ensure_user() {
  if id -u "$SERVICE_USER" >/dev/null 2>&1; then
    return
  fi
  if [ -n "$DESTDIR" ]; then
    say "would create the system user $SERVICE_USER"
    return
  fi
  if command -v useradd >/dev/null 2>&1; then
    useradd --system --user-group --no-create-home --home-dir /var/lib/drover \
      --shell /usr/sbin/nologin "$SERVICE_USER"
  elif command -v adduser >/dev/null 2>&1; then
    # busybox / Alpine
    adduser -S -D -H -h /var/lib/drover -s /sbin/nologin "$SERVICE_USER"
  else
    die "cannot create the user $SERVICE_USER: no useradd or adduser"
  fi
  say "created the system user $SERVICE_USER"
}

install_role() {
  local role="$1"
  shift
  local unit="drover-$role.service"
  local default_dir="/var/lib/drover/$role"
  local token_name
  if [ "$role" = server ]; then token_name=server-token; else token_name=node-token; fi

  [ -n "$DESTDIR" ] || [ "$(id -u)" -eq 0 ] || die "run as root (or set DESTDIR=/some/dir to install into a directory)"

  # Parse the flags: keep them as words, take the token out, find the data dir.
  local -a flags=()
  local token="" token_file="" data_dir="" data_dir_given="" have_join="" have_server=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --token | --token-file | --data-dir)
        [ $# -ge 2 ] || die "$1 needs a value"
        local name="$1" value="$2"
        shift 2
        ;;
      --token=* | --token-file=* | --data-dir=*)
        local name="${1%%=*}" value="${1#*=}"
        shift
        ;;
      *)
        check_word "$1"
        case "$1" in
          --join | --join=*) have_join=1 ;;
          --server | --server=*) have_server=1 ;;
        esac
        flags+=("$1")
        shift
        continue
        ;;
    esac
    case "$name" in
      --token) token="$value" ;;
      --token-file)
        [ -r "$value" ] || die "--token-file $value: cannot read it"
        token_file="$value"
        ;;
      --data-dir)
        check_word "$value"
        case "$value" in /*) ;; *) die "--data-dir must be an absolute path: $value" ;; esac
        data_dir="${value%/}"
        data_dir_given=1
        ;;
    esac
  done
  if [ -n "$token" ] && [ -n "$token_file" ]; then
    die "give --token or --token-file, not both"
  fi
  local given_flags="${#flags[@]}"
  [ -n "$data_dir" ] || data_dir="$default_dir"
  if [ "$data_dir" = "" ] || [ "$data_dir" = "/" ]; then die "--data-dir / is not a data dir"; fi

  local env="$DESTDIR$CONF_DIR/$role.env"
  local keep_env=""
  if [ "$given_flags" -eq 0 ] && [ -z "$token$token_file" ] && [ -z "$data_dir_given" ] && [ -f "$env" ]; then
    keep_env=1
    data_dir="$(data_dir_of_env "$env" | tail -n 1)"
    [ -n "$data_dir" ] || data_dir="$default_dir"
  fi
  if [ -z "$keep_env" ]; then
    if [ "$role" = server ] && [ -n "$have_join" ] && [ -z "$token$token_file" ]; then
      die "--join needs --token-file (the server-token file of a member)"
    fi
    if [ "$role" = agent ] && [ -z "$have_server" ]; then
      die "agent needs --server ADDR[,ADDR…] (the members' gRPC addresses)"
    fi
  fi

  local bin
  bin="$(find_binary)"
  local bindir="$DESTDIR$PREFIX/bin"
  say "binary: $bin -> $bindir/drover"
  mkdir -p "$bindir"
  # A copy then a rename: replaces a running binary safely (no "text file busy").
  cp -- "$bin" "$bindir/.drover.tmp"
  chmod 0755 "$bindir/.drover.tmp"
  mv -f "$bindir/.drover.tmp" "$bindir/drover"

  if [ "$role" = server ]; then ensure_user; fi

  # The unit, with the binary's path when PREFIX is not /usr/local.
  local unitdir="$DESTDIR$SYSTEMD_DIR"
  mkdir -p "$unitdir"
  sed -e "s|/usr/local/bin/drover|$PREFIX/bin/drover|g" \
      -e "s|/etc/drover/|$CONF_DIR/|g" \
      "$here/systemd/$unit" >"$unitdir/$unit.tmp"
  chmod 0644 "$unitdir/$unit.tmp"
  mv -f "$unitdir/$unit.tmp" "$unitdir/$unit"
  say "unit: $unitdir/$unit"

  # A data dir outside the unit's StateDirectory: a drop-in makes it writable.
  local dropdir="$unitdir/$unit.d"
  if [ "$data_dir" != "$default_dir" ]; then
    mkdir -p "$dropdir"
    printf '# Written by deploy/install.sh: the data dir named in %s.\n[Service]\nReadWritePaths=%s\n' \
      "$CONF_DIR/$role.env" "$data_dir" >"$dropdir/data-dir.conf"
    chmod 0644 "$dropdir/data-dir.conf"
    say "drop-in: $dropdir/data-dir.conf (ReadWritePaths=$data_dir)"
  elif [ -f "$dropdir/data-dir.conf" ]; then
    rm -f "$dropdir/data-dir.conf"
    rmdir "$dropdir" 2>/dev/null || true
  fi

  # Config dir, token copy, env file: root's, 0700/0600 (the server's token
  # copy belongs to the service user, who must read it).
  local confdir="$DESTDIR$CONF_DIR"
  mkdir -p "$confdir"
  chmod 0755 "$confdir"
  local tokpath="$CONF_DIR/$token_name"
  if [ -n "$token$token_file" ]; then
    local tmp
    tmp="$(mktemp "$confdir/.token.XXXXXX")"
    chmod 0600 "$tmp"
    if [ -n "$token" ]; then
      printf '%s\n' "$token" >"$tmp"
    else
      cat -- "$token_file" >"$tmp"
    fi
    if [ "$role" = server ] && [ -z "$DESTDIR" ]; then
      chown "$SERVICE_USER:$SERVICE_USER" "$tmp"
    fi
    mv -f "$tmp" "$DESTDIR$tokpath"
    say "token: $DESTDIR$tokpath (0600)"
  fi

  if [ -n "$keep_env" ]; then
    say "env: keeping $env (no flags given)"
  else
    local tmp
    tmp="$(mktemp "$confdir/.env.XXXXXX")"
    chmod 0600 "$tmp"
    {
      printf '# Written by deploy/install.sh %s on %s; see %s.env.example.\n' "$role" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$role"
      printf '# DROVER_FLAGS is split at whitespace by systemd (no quoting).\n'
      printf 'DROVER_FLAGS="%s"\n' "--data-dir $data_dir${flags[*]:+ ${flags[*]}}"
      if [ -n "$token$token_file" ]; then
        printf 'DROVER_TOKEN_FILE=%s\n' "$tokpath"
      elif [ -f "$DESTDIR$tokpath" ]; then
        printf 'DROVER_TOKEN_FILE=%s\n' "$tokpath"
      fi
    } >"$tmp"
    mv -f "$tmp" "$env"
    say "env: $env"
  fi

  # The data dir: 0700, the service user's.
  local dd="$DESTDIR$data_dir"
  mkdir -p "$dd"
  chmod 0700 "$dd"
  if [ "$role" = server ] && [ -z "$DESTDIR" ]; then
    chown "$SERVICE_USER:$SERVICE_USER" "$dd"
  fi
  say "data dir: $dd (0700)"

  if systemd_runs; then
    systemctl daemon-reload
    if systemctl is-active --quiet "$unit"; then
      systemctl restart "$unit"
      say "restarted $unit"
    else
      systemctl enable --now "$unit"
      say "enabled and started $unit"
    fi
    systemctl --no-pager --lines=5 status "$unit" || true
  else
    say "systemd is not running here (or DESTDIR/NO_SYSTEMD is set); to start the service:"
    say "  systemctl daemon-reload && systemctl enable --now $unit"
    say "or by hand, as root (the env file is root's):"
    if [ "$role" = server ]; then
      say "  set -a; . $CONF_DIR/$role.env; set +a; runuser -u $SERVICE_USER -- $PREFIX/bin/drover $role \$DROVER_FLAGS"
    else
      say "  set -a; . $CONF_DIR/$role.env; set +a; $PREFIX/bin/drover $role \$DROVER_FLAGS"
    fi
  fi
  if [ "$role" = server ]; then
    say "client config (on a bootstrapped member): $data_dir/client.yaml; e.g."
    say "  $PREFIX/bin/drover --config $data_dir/client.yaml cluster status"
  fi
}

uninstall() {
  local purge="" roles=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --purge) purge=1 ;;
      server | agent) roles+=("$1") ;;
      *) die "uninstall: unknown argument $1 (uninstall [server|agent] [--purge])" ;;
    esac
    shift
  done
  [ ${#roles[@]} -gt 0 ] || roles=(server agent)
  [ -n "$DESTDIR" ] || [ "$(id -u)" -eq 0 ] || die "run as root (or set DESTDIR)"

  local role unit dirs=()
  for role in "${roles[@]}"; do
    unit="drover-$role.service"
    local d
    while IFS= read -r d; do
      [ -n "$d" ] && dirs+=("$d")
    done < <(data_dir_of_env "$DESTDIR$CONF_DIR/$role.env")
    dirs+=("/var/lib/drover/$role")
    if [ ! -f "$DESTDIR$SYSTEMD_DIR/$unit" ] && [ ! -f "$DESTDIR$CONF_DIR/$role.env" ]; then
      say "$unit is not installed"
      continue
    fi
    if systemd_runs; then
      systemctl disable --now "$unit" 2>/dev/null || true
      if [ "$role" = agent ] && [ -n "$purge" ] && [ -f "$DESTDIR$CONF_DIR/$role.env" ]; then
        # Stopping keeps the containers; leaving is explicit: `drover agent
        # FLAGS --leave` deletes the Node and stops its pods.
        say "the agent leaves the cluster (its pods stop)"
        (
          set -a
          # shellcheck disable=SC1090
          . "$DESTDIR$CONF_DIR/$role.env"
          set +a
          # shellcheck disable=SC2086
          "$DESTDIR$PREFIX/bin/drover" agent $DROVER_FLAGS --leave
        ) || say "  leaving failed: delete the node with drover delete node NAME"
      fi
    else
      say "systemd is not running: stop drover $role yourself if it runs"
      if [ "$role" = agent ] && [ -n "$purge" ]; then
        say "  (then \`drover agent FLAGS --leave\` makes the node leave the cluster and stop its pods)"
      fi
    fi
    rm -f "$DESTDIR$SYSTEMD_DIR/$unit"
    rm -rf "$DESTDIR$SYSTEMD_DIR/$unit.d"
    rm -f "$DESTDIR$CONF_DIR/$role.env"
    say "removed $unit and $CONF_DIR/$role.env"
  done
  # Each data dir once.
  local -a uniq=()
  local d u seen
  for d in "${dirs[@]}"; do
    seen=""
    for u in "${uniq[@]+"${uniq[@]}"}"; do [ "$u" = "$d" ] && seen=1; done
    [ -n "$seen" ] || uniq+=("$d")
  done
  dirs=("${uniq[@]}")
  for role in "${roles[@]}"; do
    if [ "$role" = server ]; then rm -f "$DESTDIR$CONF_DIR/server-token"; fi
    if [ "$role" = agent ]; then rm -f "$DESTDIR$CONF_DIR/node-token"; fi
  done
  rmdir "$DESTDIR$CONF_DIR" 2>/dev/null || true
  if systemd_runs; then
    systemctl daemon-reload
  fi

  # The binary goes when neither role is left installed.
  if [ ! -f "$DESTDIR$SYSTEMD_DIR/drover-server.service" ] && [ ! -f "$DESTDIR$SYSTEMD_DIR/drover-agent.service" ]; then
    rm -f "$DESTDIR$PREFIX/bin/drover"
    say "removed $PREFIX/bin/drover"
  else
    say "kept $PREFIX/bin/drover (another drover unit is still installed)"
  fi

  if [ -n "$purge" ]; then
    for d in "${dirs[@]}"; do
      case "$d" in
        / | /etc | /usr | /var | /var/lib | /home | /root | /tmp | '') say "not removing $d" ; continue ;;
        /*) ;;
        *) say "not removing $d (not absolute)"; continue ;;
      esac
      if [ -e "$DESTDIR$d" ]; then
        rm -rf -- "$DESTDIR$d"
        say "purged $DESTDIR$d"
      fi
    done
    rmdir "$DESTDIR/var/lib/drover" 2>/dev/null || true
    if [[ " ${roles[*]} " == *" server "* ]] && [ -z "$DESTDIR" ] && id -u "$SERVICE_USER" >/dev/null 2>&1; then
      if command -v userdel >/dev/null 2>&1; then
        userdel "$SERVICE_USER" || say "could not remove the user $SERVICE_USER"
      elif command -v deluser >/dev/null 2>&1; then
        deluser "$SERVICE_USER" || say "could not remove the user $SERVICE_USER"
      fi
    fi
  else
    say "data dirs kept (uninstall --purge removes them): ${dirs[*]}"
  fi
}

[ $# -ge 1 ] || usage
cmd="$1"
shift
case "$cmd" in
  server | agent) install_role "$cmd" "$@" ;;
  uninstall) uninstall "$@" ;;
  -h | --help | help) usage ;;
  *) say "unknown command: $cmd"; usage ;;
esac
