#!/usr/bin/env bash
# Starts and stops the peer sandbox (fips-agents/code-sandbox) on loopback, so
# bench/loadgen.py can measure it side by side with airlock. See bench/README.md.
#
#   bench/peer.sh start CHECKOUT [PROFILE] [PORT]   # PROFILE minimal (default) | data-science; PORT 8100
#   bench/peer.sh stop [PORT]
#   bench/peer.sh status [PORT]
#
# CHECKOUT is an exported copy of https://github.com/fips-agents/code-sandbox
# (research was done at commit 5a93e249):
#   git clone https://github.com/fips-agents/code-sandbox /tmp/code-sandbox.git
#   mkdir -p /tmp/fips-sandbox && git -C /tmp/code-sandbox.git archive HEAD | tar -x -C /tmp/fips-sandbox
# Keep it under /tmp: the peer applies Landlock to itself at start (read-only /usr /lib /etc,
# read-write /tmp), and a checkout elsewhere may become unreadable to it.
#
# Its dependencies, from Debian (no PyPI):
#   apt-get install -y python3-fastapi python3-uvicorn python3-pydantic python3-yaml \
#     python3-uvloop python3-httptools python3-numpy python3-pandas python3-scipy
#
# The peer serves one profile per process (environment variable SANDBOX_PROFILE; the request's
# "profile" field is ignored), so data-science workloads need a second instance on another port.
# It is started as in research/perf-baseline.md §1: one uvicorn worker, a clean environment,
# PATH=/usr/bin:/bin so its children are Debian's python3 (the one with numpy).
# Logs and the pid file go to /tmp/airlock-peer-run/PORT/.
set -euo pipefail

usage() {
  sed -n '5,7p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

cmd="${1:-}"
[[ -n "$cmd" ]] || usage
shift

run_dir() { echo "/tmp/airlock-peer-run/$1"; }

wait_healthy() {
  local port="$1" pid="$2"
  for _ in $(seq 1 100); do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "peer.sh: the peer exited during start; log: $(run_dir "$port")/uvicorn.log" >&2
      tail -20 "$(run_dir "$port")/uvicorn.log" >&2 || true
      return 1
    fi
    if /usr/bin/python3 - "$port" <<'EOF' 2>/dev/null; then
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=1)
c.request("GET", "/healthz")
sys.exit(0 if c.getresponse().status == 200 else 1)
EOF
      return 0
    fi
    sleep 0.1
  done
  echo "peer.sh: the peer did not answer /healthz on port $port within 10 s" >&2
  return 1
}

case "$cmd" in
  start)
    checkout="${1:-}"
    profile="${2:-minimal}"
    port="${3:-8100}"
    [[ -n "$checkout" ]] || usage
    if [[ ! -f "$checkout/sandbox/app.py" ]]; then
      echo "peer.sh: $checkout/sandbox/app.py not found; CHECKOUT must be an export of fips-agents/code-sandbox" >&2
      exit 2
    fi
    checkout="$(cd "$checkout" && pwd)"
    dir="$(run_dir "$port")"
    mkdir -p "$dir"
    if [[ -f "$dir/uvicorn.pid" ]] && kill -0 "$(cat "$dir/uvicorn.pid")" 2>/dev/null; then
      echo "peer.sh: already running on port $port (pid $(cat "$dir/uvicorn.pid")); stop it first" >&2
      exit 1
    fi
    cd "$checkout"
    env -i HOME="${HOME:-/root}" PATH=/usr/bin:/bin LANG=C.UTF-8 SANDBOX_PROFILE="$profile" \
      /usr/bin/python3 -m uvicorn sandbox.app:app --host 127.0.0.1 --port "$port" \
      >"$dir/uvicorn.log" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$dir/uvicorn.pid"
    echo "$profile" >"$dir/profile"
    wait_healthy "$port" "$pid"
    echo "peer ($profile) listening on http://127.0.0.1:$port, pid $pid, log $dir/uvicorn.log"
    ;;
  stop)
    port="${1:-8100}"
    dir="$(run_dir "$port")"
    if [[ ! -f "$dir/uvicorn.pid" ]]; then
      echo "peer.sh: no pid file $dir/uvicorn.pid; nothing to stop" >&2
      exit 1
    fi
    pid="$(cat "$dir/uvicorn.pid")"
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid"
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; fi
      echo "stopped peer on port $port (pid $pid)"
    else
      echo "peer on port $port (pid $pid) was not running"
    fi
    rm -f "$dir/uvicorn.pid"
    ;;
  status)
    port="${1:-8100}"
    dir="$(run_dir "$port")"
    if [[ -f "$dir/uvicorn.pid" ]] && kill -0 "$(cat "$dir/uvicorn.pid")" 2>/dev/null; then
      echo "running: port $port, pid $(cat "$dir/uvicorn.pid"), profile $(cat "$dir/profile" 2>/dev/null)"
    else
      echo "not running on port $port"
      exit 1
    fi
    ;;
  *)
    usage
    ;;
esac
