#!/bin/sh
# airlock's entrypoint in the OCI image and ExecStart of airlock.service
# (installed as /usr/lib/airlock/entrypoint): turns AIRLOCK_* environment
# variables into `airlock serve` flags, so a container runtime, a Kubernetes
# manifest or /etc/default/airlock configures the service without a command line.
#
#   entrypoint [FLAG...]          airlock serve <flags from the environment> FLAG...
#   entrypoint check [FLAG...]    airlock check (--allow-degraded from the environment)
#   entrypoint airlock ARGS...    airlock ARGS, unchanged (no flags from the environment)
#   entrypoint run|--help|...     airlock with these arguments, unchanged
# Every form first remounts the container's own cgroups read-write when it can (below).
#
# Variables (unset or empty: airlock's own default; docs/deploy.md lists them):
#   AIRLOCK_LISTEN            --listen, e.g. 0.0.0.0:8000
#   AIRLOCK_TOKENS_FILE       --tokens-file; passed only when the file exists
#   AIRLOCK_TOKENS            read by airlock itself (name:token,...)
#   AIRLOCK_ALLOWED_HOSTS     --allowed-host per entry (comma or space separated), when airlock knows it
#   AIRLOCK_ALLOWED_ORIGINS   --allowed-origin per entry, when airlock knows it
#   AIRLOCK_ALLOW_DEGRADED    --allow-degraded (serve and check), e.g. cgroup
#   AIRLOCK_UID_RANGE         --uid-range (serve and check), START:COUNT: host ids for runs
#   AIRLOCK_PROFILES          --profiles
#   AIRLOCK_DEFAULT_PROFILE   --default-profile
#   AIRLOCK_AUDIT_LOG         --audit-log (- for stdout, "none" for no audit log)
#   AIRLOCK_MAX_CONCURRENT, AIRLOCK_MAX_QUEUE, AIRLOCK_MAX_BODY, AIRLOCK_MAX_CODE,
#   AIRLOCK_DRAIN_GRACE, AIRLOCK_POOL_SIZE, AIRLOCK_POOL_RECYCLE: the flags of the same names
#   AIRLOCK_INSECURE=1        --insecure (only behind a proxy that authenticates)
set -eu
AIRLOCK=${AIRLOCK_BIN:-/usr/bin/airlock}

# Whether `airlock serve` knows a flag: flags being added by other work are
# passed only once the binary has them, instead of making it refuse to start.
serve_knows() {
  "$AIRLOCK" serve --help 2>/dev/null | grep -q -- "$1"
}

# Container runtimes mount the cgroup hierarchies read-only unless the container
# is privileged. When this process is root with CAP_SYS_ADMIN and sits at the root
# of its own cgroup namespace (every /proc/self/cgroup line ends in ":/", so each
# mount shows only the container's own subtree), remounting them read-write gives
# airlock that subtree for its runs' cgroups and nothing above it. Otherwise
# nothing is changed and airlock says that cgroup limits are missing.
# AIRLOCK_CGROUP_REMOUNT=0 turns this off.
remount_cgroups() {
  [ "${AIRLOCK_CGROUP_REMOUNT:-1}" = 1 ] || return 0
  [ "$(id -u)" = 0 ] || return 0
  [ -r /proc/self/cgroup ] && [ -r /proc/self/mounts ] || return 0
  if grep -qv ':/$' /proc/self/cgroup; then return 0; fi
  # "cgroup /sys/fs/cgroup/memory cgroup ro,..." and "cgroup2 /sys/fs/cgroup cgroup2 ro,..."
  awk '($3 == "cgroup" || $3 == "cgroup2") && $4 ~ /^ro(,|$)/ && $2 ~ /^\/sys\/fs\/cgroup/ { print $2 }' /proc/self/mounts |
  while read -r dir; do
    case "$dir" in */systemd|*/net_cls*|*/net_prio|*/perf_event|*/hugetlb|*/rdma|*/misc|*/devices|*/freezer|*/blkio|*/cpuset) continue ;; esac
    mount -o remount,bind,rw "$dir" 2>/dev/null ||
      echo "airlock entrypoint: $dir is read-only and could not be remounted (needs CAP_SYS_ADMIN): cgroup limits will be missing" >&2
  done
}

degraded_flag() {
  if [ -n "${AIRLOCK_ALLOW_DEGRADED:-}" ]; then
    printf '%s\n' "--allow-degraded=$AIRLOCK_ALLOW_DEGRADED"
  fi
}
uid_range_flag() {
  if [ -n "${AIRLOCK_UID_RANGE:-}" ]; then
    printf '%s\n' "--uid-range=$AIRLOCK_UID_RANGE"
  fi
}

case "${1:-}" in
  check)
    shift
    remount_cgroups
    d=$(degraded_flag)
    u=$(uid_range_flag)
    if [ -n "$d" ]; then set -- "$d" "$@"; fi
    if [ -n "$u" ]; then set -- "$u" "$@"; fi
    exec "$AIRLOCK" check "$@"
    ;;
  serve)
    shift
    ;;
  -*|"")
    ;;
  airlock)
    shift
    remount_cgroups
    exec "$AIRLOCK" "$@"
    ;;
  *)
    remount_cgroups
    exec "$AIRLOCK" "$@"
    ;;
esac

# Flags from the environment go first, each as two arguments (an empty value such
# as --audit-log '' must stay an argument); a flag also given as an argument is
# left to the argument (airlock refuses a flag given twice).
explicit="
"
for a in "$@"; do
  case "$a" in --*) explicit="$explicit${a%%=*}
" ;; esac
done
given() {
  case "$explicit" in *"
$1
"*) return 0 ;; esac
  return 1
}
args=""
push() {
  # Quote each argument for the final `eval set --`.
  q=$(printf '%s' "$1" | sed "s/'/'\\\\''/g")
  args="$args '$q'"
}
opt() {  # opt FLAG VALUE: pushes FLAG VALUE when VALUE is not empty and FLAG is not an argument
  if [ -n "$2" ] && ! given "$1"; then push "$1"; push "$2"; fi
}

opt --listen "${AIRLOCK_LISTEN:-}"
if [ -n "${AIRLOCK_TOKENS_FILE:-}" ] && ! given --tokens-file; then
  if [ -e "$AIRLOCK_TOKENS_FILE" ]; then
    push --tokens-file; push "$AIRLOCK_TOKENS_FILE"
  else
    echo "airlock entrypoint: AIRLOCK_TOKENS_FILE=$AIRLOCK_TOKENS_FILE does not exist; no tokens file given" >&2
  fi
fi
opt --profiles "${AIRLOCK_PROFILES:-}"
opt --default-profile "${AIRLOCK_DEFAULT_PROFILE:-}"
if ! given --audit-log; then
  case "${AIRLOCK_AUDIT_LOG-}" in
    "") ;;
    none) push --audit-log; push "" ;;
    *) push --audit-log; push "$AIRLOCK_AUDIT_LOG" ;;
  esac
fi
opt --max-concurrent "${AIRLOCK_MAX_CONCURRENT:-}"
opt --max-queue "${AIRLOCK_MAX_QUEUE:-}"
opt --max-body "${AIRLOCK_MAX_BODY:-}"
opt --max-code "${AIRLOCK_MAX_CODE:-}"
opt --drain-grace "${AIRLOCK_DRAIN_GRACE:-}"
opt --pool-size "${AIRLOCK_POOL_SIZE:-}"
opt --pool-recycle "${AIRLOCK_POOL_RECYCLE:-}"
opt --allow-degraded "${AIRLOCK_ALLOW_DEGRADED:-}"
opt --uid-range "${AIRLOCK_UID_RANGE:-}"
case "${AIRLOCK_INSECURE:-}" in
  1|true|yes) given --insecure || push --insecure ;;
esac
for pair in "AIRLOCK_ALLOWED_HOSTS --allowed-host" "AIRLOCK_ALLOWED_ORIGINS --allowed-origin"; do
  var=${pair% *}
  flag=${pair#* }
  eval "list=\${$var:-}"
  [ -n "$list" ] || continue
  given "$flag" && continue
  if ! serve_knows "$flag"; then
    echo "airlock entrypoint: $var is set but this airlock has no $flag flag; ignored" >&2
    continue
  fi
  for item in $(printf '%s' "$list" | tr ',' ' '); do
    push "$flag"; push "$item"
  done
done

for a in "$@"; do push "$a"; done
eval "set -- $args"
remount_cgroups
exec "$AIRLOCK" serve "$@"
