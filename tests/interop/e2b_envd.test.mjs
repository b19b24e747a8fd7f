// envd's process.Process over Connect (issue 22, docs/agents.md): the
// published `e2b` SDK (pinned in package-lock.json) in debug mode drives
// `sandbox.commands` against `airlock serve --e2b-listen` on free ports
// (sandboxUrl: envd's calls go to the same server), so it never needs E2B's
// fixed ports. The project's own tests of each behaviour; attacks included.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import net from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { Sandbox, CommandExitError, TimeoutError } from "e2b";

const here = dirname(fileURLToPath(import.meta.url));
const binary = process.env.AIRLOCK_BINARY || join(here, "../../build/src/cli/airlock");
const profiles = join(here, "../../profiles");

let server;
let base;          // the E2B listener (both ports serve every route)
let sbx;           // the caller's sandbox
let hostListener;  // a TCP listener on the host the sandbox must not reach

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function startServer(args, env = process.env) {
  const proc = spawn(binary, ["serve", "--listen", "127.0.0.1:0", "--profiles", profiles, "--audit-log", "", ...args],
    { stdio: ["ignore", "pipe", "pipe"], env });
  const s = { proc, stderr: "" };
  proc.stderr.on("data", (d) => { s.stderr += d.toString(); });
  s.base = await new Promise((resolve, reject) => {
    let out = "";
    proc.stdout.on("data", (d) => {
      out += d.toString();
      const m = out.match(/listening on (http:\/\/\S+)/);
      if (m) resolve(m[1]);
    });
    proc.once("exit", (code) => reject(new Error(`airlock serve exited ${code}: ${s.stderr}`)));
  });
  const auth = env.AIRLOCK_TOKENS ? { "X-Access-Token": env.AIRLOCK_TOKENS.split(",")[0].split(":")[1] } : {};
  for (let i = 0; i < 1200; i++) {
    try {
      if ((await fetch(`${s.base}/readyz`, { headers: auth })).status === 200) return s;
    } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`server not ready: ${s.stderr}`);
}

// A raw Connect call (what the SDK sends), for the malformed requests it never sends.
function connectFrame(obj, flags = 0) {
  const json = Buffer.from(JSON.stringify(obj));
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(json.length, 1);
  return Buffer.concat([head, json]);
}

before(async () => {
  assert.ok(existsSync(binary), `airlock binary not found at ${binary} (set AIRLOCK_BINARY)`);
  const port = await freePort();
  const envdPort = await freePort();
  // --e2b's profile by default (general): commands run bash.
  server = await startServer(["--e2b-listen", `127.0.0.1:${port},${envdPort}`, "--pool-size", "1"]);
  base = `http://127.0.0.1:${port}`;
  hostListener = net.createServer((s) => s.end("secret from the host\n"));
  await new Promise((r) => hostListener.listen(0, "127.0.0.1", r));
  sbx = await Sandbox.create({ debug: true, sandboxUrl: base });
});

after(async () => {
  hostListener?.close();
  if (server) {
    // Stopped while a process it watches still runs, a stream attached (the last test
    // leaves one): the server ends cleanly (under the sanitizers, with no report).
    server.proc.kill("SIGTERM");
    await new Promise((r) => (server.proc.exitCode !== null ? r() : server.proc.once("exit", r)));
    assert.equal(server.proc.exitCode, 0, server.stderr.slice(-2000));
  }
});

test("commands.run gives stdout, stderr and the exit code; a failing command is CommandExitError", async () => {
  const ok = await sbx.commands.run("echo out; echo err >&2; printf 'no newline'");
  assert.equal(ok.exitCode, 0);
  assert.equal(ok.stdout, "out\nno newline");
  assert.equal(ok.stderr, "err\n");
  await assert.rejects(sbx.commands.run("echo before; exit 3"), (e) => {
    assert.ok(e instanceof CommandExitError, String(e));
    assert.equal(e.exitCode, 3);
    assert.equal(e.stdout, "before\n");
    return true;
  });
});

test("onStdout streams pieces while the command runs; envs and cwd apply to that command only", async () => {
  const pieces = [];
  const r = await sbx.commands.run("echo one; sleep 0.3; echo two", { onStdout: (d) => pieces.push(d) });
  assert.equal(r.stdout, "one\ntwo\n");
  assert.ok(pieces.length >= 2, `pieces: ${JSON.stringify(pieces)}`);
  assert.equal(pieces.join(""), "one\ntwo\n");
  const e = await sbx.commands.run("echo $GREETING; pwd", { envs: { GREETING: "hi" }, cwd: "/tmp" });
  assert.equal(e.stdout, "hi\n/tmp\n");
  const after = await sbx.commands.run("echo \"[$GREETING]\"; pwd");
  assert.equal(after.stdout, "[]\n/home/user\n");
});

test("commands and code share /home/user", async () => {
  await sbx.commands.run("echo from-bash > shared.txt");
  const py = await sbx.commands.run("python3 -c \"print(open('/home/user/shared.txt').read().strip())\"");
  assert.equal(py.stdout, "from-bash\n");
  assert.equal(await sbx.files.read("/home/user/shared.txt"), "from-bash\n");
});

test("background: list, stdin, closeStdin, connect from a second handle, kill", async () => {
  const cat = await sbx.commands.run("cat", { background: true, stdin: true });
  const listed = await sbx.commands.list();
  const mine = listed.find((p) => p.pid === cat.pid);
  assert.ok(mine, `pid ${cat.pid} not in ${JSON.stringify(listed)}`);
  assert.equal(mine.cmd, "/bin/bash");
  assert.deepEqual(mine.args, ["-l", "-c", "cat"]);
  // A second stream on the same process gets what it writes from now on.
  const second = await sbx.commands.connect(cat.pid);
  assert.equal(second.pid, cat.pid);
  await sbx.commands.sendStdin(cat.pid, "line one\n");
  await cat.sendStdin(new TextEncoder().encode("line two\n"));
  await cat.closeStdin();
  const end = await cat.wait();
  assert.equal(end.exitCode, 0);
  assert.equal(end.stdout, "line one\nline two\n");
  const end2 = await second.wait();
  assert.equal(end2.stdout, "line one\nline two\n");
  // Ended: gone from the list; input, a signal and a connect are not_found.
  assert.ok(!(await sbx.commands.list()).some((p) => p.pid === cat.pid));
  assert.equal(await sbx.commands.kill(cat.pid), false);
  await assert.rejects(sbx.commands.sendStdin(cat.pid, "late"), /not found/);
  await assert.rejects(sbx.commands.connect(cat.pid), /not found/);

  const sleeper = await sbx.commands.run("sleep 30", { background: true });
  assert.equal(await sbx.commands.kill(sleeper.pid), true);
  await assert.rejects(sleeper.wait(), (e) => e instanceof CommandExitError && e.exitCode === -1);
  await assert.rejects(sbx.commands.run(`kill -0 ${sleeper.pid}`), CommandExitError);
});

test("a command without stdin refuses input clearly; a PTY is unimplemented", async () => {
  const s = await sbx.commands.run("sleep 5", { background: true });
  await assert.rejects(sbx.commands.sendStdin(s.pid, "x"), /stdin/);
  await sbx.commands.kill(s.pid);
  await assert.rejects(sbx.pty.create({ cols: 80, rows: 24 }), /PTY/);
});

test("the call's deadline kills the command it started (TimeoutError), the sandbox lives on", async () => {
  const h = await sbx.commands.run("echo started; sleep 30", { background: true, timeoutMs: 1500 });
  await assert.rejects(h.wait(), (e) => e instanceof TimeoutError || /deadline/.test(String(e)));
  const gone = await sbx.commands.run(`kill -0 ${h.pid} 2>/dev/null && echo alive || echo gone`);
  assert.equal(gone.stdout, "gone\n");
  assert.equal((await sbx.commands.run("echo still here")).stdout, "still here\n");
});

test("attacks: host files, host listeners, host pids and the pids limit hold for commands", async () => {
  const shadow = await sbx.commands.run("cat /etc/shadow 2>&1; echo rc=$?").catch((e) => e);
  assert.match(shadow.stdout, /rc=1/);
  assert.ok(!/root:/.test(shadow.stdout), shadow.stdout);
  const port = hostListener.address().port;
  const conn = await sbx.commands.run(
    `exec 3<>/dev/tcp/127.0.0.1/${port} && cat <&3; echo rc=$?`).catch((e) => e);
  assert.ok(!conn.stdout.includes("secret from the host"), conn.stdout);
  const kill = await sbx.commands.run("kill -9 1 2>&1; echo rc=$?").catch((e) => e);
  assert.ok(!/rc=0/.test(kill.stdout), kill.stdout);
  // A pid of the host (this test's own) names nothing in the sandbox.
  assert.equal(await sbx.commands.kill(process.pid), false);
  // A fork bomb stops at the sandbox's pids limit; the sandbox answers after it.
  // Its deadline kills its process group (every copy: none runs in the background of another group).
  const bomb = await sbx.commands.run("bomb() { bomb | bomb & }; bomb; sleep 30", { timeoutMs: 4000 }).catch((e) => e);
  assert.ok(bomb instanceof TimeoutError || /deadline/.test(String(bomb)), String(bomb));
  let alive;
  for (let i = 0; i < 50 && alive === undefined; i++) {
    alive = await sbx.commands.run("echo alive").then((r) => r.stdout, () => undefined);
    if (alive === undefined) await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal(alive, "alive\n");
});

test("malformed Connect calls get Connect's errors, and the server lives on", async () => {
  const post = (method, body, type) => fetch(`${base}/process.Process/${method}`, {
    method: "POST", headers: { "Content-Type": type, "Connect-Protocol-Version": "1" }, body,
  });
  // A unary call with a body that is not JSON.
  let r = await post("List", "{", "application/json");
  assert.equal(r.status, 400);
  assert.equal((await r.json()).code, "invalid_argument");
  // SendInput with bad base64, and to no such pid.
  r = await post("SendInput", JSON.stringify({ process: { pid: 1 }, input: { stdin: "***" } }), "application/json");
  assert.equal((await r.json()).code, "invalid_argument");
  r = await post("SendSignal", JSON.stringify({ process: { pid: 999999 }, signal: "SIGNAL_SIGKILL" }), "application/json");
  assert.equal(r.status, 404);
  assert.equal((await r.json()).code, "not_found");
  r = await post("SendSignal", JSON.stringify({ process: { pid: 1 }, signal: "SIGNAL_SIGSTOP" }), "application/json");
  assert.equal((await r.json()).code, "invalid_argument");
  // A stream's body that is not one envelope: its end says why (status 200, as Connect streams do).
  for (const body of [Buffer.from("{}"), connectFrame({ process: { cmd: "true" } }, 1),
    Buffer.concat([connectFrame({ process: { cmd: "true" } }), Buffer.from("x")])]) {
    r = await post("Start", body, "application/connect+json");
    assert.equal(r.status, 200);
    const bytes = Buffer.from(await r.arrayBuffer());
    assert.equal(bytes[0], 2, "an end-of-stream envelope");
    const end = JSON.parse(bytes.subarray(5).toString());
    assert.equal(end.error.code, "invalid_argument", JSON.stringify(end));
  }
  // A stream sent as plain JSON: 415.
  r = await post("Start", JSON.stringify({ process: { cmd: "true" } }), "application/json");
  assert.equal(r.status, 415);
  // A program that does not exist: a clear error at start.
  r = await post("Start", connectFrame({ process: { cmd: "/no/such/program" } }), "application/connect+json");
  const end = JSON.parse(Buffer.from(await r.arrayBuffer()).subarray(5).toString());
  assert.equal(end.error.code, "invalid_argument", JSON.stringify(end));
  assert.equal((await sbx.commands.run("echo fine")).stdout, "fine\n");
});

test("two callers' sandboxes: neither reaches the other's processes, by pid or by tag", async () => {
  const alice = "alice-envd-token-0123456789abcdef";
  const bob = "bob-envd-token-0123456789abcdef0";
  const port = await freePort();
  const envdPort = await freePort();
  const s = await startServer(["--e2b-listen", `127.0.0.1:${port},${envdPort}`, "--pool-size", "1"],
    { ...process.env, AIRLOCK_TOKENS: `alice:${alice},bob:${bob}` });
  try {
    const url = `http://127.0.0.1:${envdPort}`;
    const call = (token, method, msg) => fetch(`${url}/process.Process/${method}`, {
      method: "POST", headers: { "Content-Type": "application/json", "X-Access-Token": token },
      body: JSON.stringify(msg),
    });
    const start = async (token, cmd, tag) => {
      const r = await fetch(`${url}/process.Process/Start`, {
        method: "POST",
        headers: { "Content-Type": "application/connect+json", "X-Access-Token": token, "Connect-Timeout-Ms": "60000" },
        body: connectFrame({ process: { cmd: "/bin/bash", args: ["-c", cmd] }, tag }),
      });
      // The first envelope is the start event: its pid.
      const reader = r.body.getReader();
      let buf = Buffer.alloc(0);
      while (buf.length < 5 || buf.length < 5 + buf.readUInt32BE(1)) {
        const { value, done } = await reader.read();
        assert.ok(!done, "the stream ended before its start event");
        buf = Buffer.concat([buf, Buffer.from(value)]);
      }
      const first = JSON.parse(buf.subarray(5, 5 + buf.readUInt32BE(1)).toString());
      assert.ok(first.event?.start, JSON.stringify(first));
      return { pid: first.event.start.pid, reader };
    };
    // Without a token: 401 (Connect's unauthenticated).
    let r = await call("", "List", {});
    assert.equal(r.status, 401);
    const b = await start(bob, "sleep 60", "bobs");
    const listed = await (await call(alice, "List", {})).json();
    assert.ok(!(listed.processes || []).some((p) => p.tag === "bobs"), JSON.stringify(listed));
    // Alice names bob's tag: not found in her sandbox.
    r = await call(alice, "SendSignal", { process: { tag: "bobs" }, signal: "SIGNAL_SIGKILL" });
    assert.equal((await r.json()).code, "not_found");
    // Alice names bob's pid: at most a process of her own by that number, never his.
    r = await call(alice, "SendSignal", { process: { pid: b.pid }, signal: "SIGNAL_SIGKILL" });
    assert.ok([200, 404].includes(r.status), `${r.status}`);
    const bobs = await (await call(bob, "List", {})).json();
    assert.ok(bobs.processes.some((p) => p.pid === b.pid && p.tag === "bobs"), JSON.stringify(bobs));
    await call(bob, "SendSignal", { process: { pid: b.pid }, signal: "SIGNAL_SIGKILL" });
    await b.reader.cancel();
  } finally {
    s.proc.kill("SIGTERM");
    await new Promise((r) => (s.proc.exitCode !== null ? r() : s.proc.once("exit", r)));
  }
});

test("a process still running when the server stops is ended with it", async () => {
  const h = await sbx.commands.run("sleep 600", { background: true, timeoutMs: 0 });
  assert.ok((await sbx.commands.list()).some((p) => p.pid === h.pid));
  // after() stops the server now, this stream still attached.
});
