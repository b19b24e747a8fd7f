#!/usr/bin/env bash
# Runs inside a fresh Debian 12 container (scripts/deb.sh --test): installs the
# package with apt as a user would, then starts the service the way
# airlock.service does (/usr/lib/airlock/entrypoint serve with the unit's
# environment) and calls it with the token the postinst generated.
set -euo pipefail
deb=$1
export DEBIAN_FRONTEND=noninteractive
# apt without its _apt sandbox user: fewer capabilities to ask of the container.
apt_=(apt-get -o APT::Sandbox::User=root)
"${apt_[@]}" update -qq
"${apt_[@]}" install -y -qq --no-install-recommends "$deb" >/dev/null
test -x /usr/bin/airlock
test -f /usr/share/airlock/profiles/minimal.yaml
test -f /lib/systemd/system/airlock.service
# The postinst's tokens file: private, one name:token line.
test "$(stat -c %a /etc/airlock/tokens)" = 600
token=$(cut -d: -f2- /etc/airlock/tokens)
# airlock.service's environment (loopback, the tokens file) and /etc/default/airlock.
eval "$(sed -n 's/^Environment=//p' /lib/systemd/system/airlock.service | sed 's/^/export /')"
set -a; . /etc/default/airlock; set +a
/usr/lib/airlock/entrypoint serve --listen 127.0.0.1:18000 --audit-log '' > /tmp/airlock.out 2> /tmp/airlock.err &
pid=$!
trap 'echo "--- airlock stderr:"; cat /tmp/airlock.err' ERR
python3 - "$token" <<'PY'
import json, sys, time, urllib.request, urllib.error
token = sys.argv[1]
base = "http://127.0.0.1:18000"
deadline = time.monotonic() + 180  # the self-test and four zygotes, on a loaded machine
while True:
    try:
        if urllib.request.urlopen(base + "/readyz", timeout=5).status == 200:
            break
    except OSError:
        pass
    if time.monotonic() > deadline:
        sys.exit("the installed service was not ready within 180 s")
    time.sleep(0.5)
def post(path, payload, auth=True):
    req = urllib.request.Request(base + path, data=json.dumps(payload).encode(),
                                 headers={"Content-Type": "application/json",
                                          **({"Authorization": "Bearer " + token} if auth else {})})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)
status, _ = post("/execute", {"code": "print(1)"}, auth=False)
assert status == 401, f"no token: expected 401, got {status}"
status, body = post("/execute", {"code": "x = 6*7\nprint('hi')\nx"})
assert status == 200 and body["stdout"] == "hi\n" and body["result"] == "42", body
status, body = post("/v1/execute", {"code": "import numpy as np\nprint(np.arange(10).sum())", "profile": "data-science"})
assert status == 200 and body["stdout"] == "45\n", body
missing = [k for k, v in body["isolation"].items() if isinstance(v, dict) and v.get("enforced") is False]
assert not missing, f"layers not in force: {missing}: {body['isolation']}"
print("deb_install_test: installed package serves; isolation:", sorted(k for k, v in body["isolation"].items() if isinstance(v, dict)))
PY
kill -TERM "$pid"
wait "$pid"
echo "deb_install_test: drained and exited 0"
