// The official E2B code-interpreter JS SDK (@e2b/code-interpreter), unmodified,
// in debug mode (issue 12): `airlock serve --e2b` answers where the SDK then
// calls, http://localhost:49999 (code interpreter) and :49983 (envd). The only
// change an E2B user makes is the debug flag (E2B_DEBUG=true or debug: true).
//
// A second server, on free ports, runs E2B contexts in the `general` profile
// (the analyzer only observes) so that escape attempts reach the kernel's
// layers; the SDK reaches it through its own `sandboxUrl` option.
//
//   AIRLOCK_BINARY=build/src/cli/airlock node --test tests/interop/e2b_sdk.test.mjs
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readlinkSync } from "node:fs";
import net from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

import { Sandbox } from "@e2b/code-interpreter";

const here = dirname(fileURLToPath(import.meta.url));
const binary = process.env.AIRLOCK_BINARY || join(here, "../../build/src/cli/airlock");
const profiles = join(here, "../../profiles");

const servers = [];

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

// Starts `airlock serve` with `args`; resolves once GET /readyz is 200 and
// the warm pool of `profile` (E2B contexts are sessions: warm runs) is full.
async function startServer(profile, args, env = process.env) {
  const proc = spawn(binary, ["serve", "--listen", "127.0.0.1:0", "--profiles", profiles, "--audit-log", "",
    ...args], { stdio: ["ignore", "pipe", "pipe"], env });
  const server = { proc, stderr: "", base: null };
  servers.push(server);
  proc.stderr.on("data", (d) => { server.stderr += d.toString(); });
  server.base = await new Promise((resolve, reject) => {
    let out = "";
    proc.stdout.on("data", (d) => {
      out += d.toString();
      const m = out.match(/listening on (http:\/\/\S+)/);
      if (m) resolve(m[1]);
    });
    proc.once("exit", (code) => reject(new Error(`airlock serve exited ${code}: ${server.stderr}`)));
  });
  for (let i = 0; i < 1200; i++) {
    try {
      const r = await fetch(`${server.base}/readyz`);
      const pool = r.status === 200 ? (await r.json()).pools?.[profile] : null;
      if (pool && pool.ready >= pool.target) return server;
    } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`server not ready: ${server.stderr}`);
}

let sbx;          // debug mode, the default ports, profile visualization
let k;            // the same SDK on the `general` server (sandboxUrl)
let kernelBase;   // the `general` server's E2B URL
let kernelEnvd;   // and its envd URL (/files)
let hostListener; // a TCP listener on the host the sandbox must not reach

before(async () => {
  assert.ok(existsSync(binary), `airlock binary not found at ${binary} (set AIRLOCK_BINARY)`);
  await startServer("visualization", ["--e2b", "--default-profile", "visualization", "--pool-size", "2"]);
  const port = await freePort();
  const envdPort = await freePort();
  await startServer("general", ["--e2b-listen", `127.0.0.1:${port},${envdPort}`, "--e2b-profile", "general", "--pool-size", "1"]);
  kernelBase = `http://127.0.0.1:${port}`;
  kernelEnvd = `http://127.0.0.1:${envdPort}`;
  hostListener = net.createServer((s) => s.end("secret from the host\n"));
  await new Promise((r) => hostListener.listen(0, "127.0.0.1", r));
  sbx = await Sandbox.create({ debug: true });
  k = await Sandbox.create({ debug: true, sandboxUrl: kernelBase });
});

after(async () => {
  hostListener?.close();
  for (const s of servers) {
    s.proc.kill("SIGTERM");
    await new Promise((r) => (s.proc.exitCode !== null ? r() : s.proc.once("exit", r)));
  }
});

test("debug mode skips E2B's cloud: the sandbox is the debug one", () => {
  assert.equal(sbx.sandboxId, "debug_sandbox_id");
});

test("runCode twice keeps state, counts executions and returns the last expression as text", async () => {
  const a = await sbx.runCode("x = 21\nprint('set')");
  assert.equal(a.error, undefined, JSON.stringify(a.error));
  assert.deepEqual(a.logs.stdout, ["set\n"]);
  const b = await sbx.runCode("x * 2");
  assert.equal(b.error, undefined, JSON.stringify(b.error));
  assert.equal(b.text, "42");
  assert.equal(b.results.length, 1);
  assert.equal(b.results[0].isMainResult, true);
  assert.ok(b.executionCount > a.executionCount, `${a.executionCount} then ${b.executionCount}`);
});

// `general` allows time and sys (visualization's analyzer refuses them).
test("onStdout and onStderr stream lines while the code runs", async () => {
  const seen = [];
  const t0 = Date.now();
  const exec = await k.runCode(
    "import time, sys\nprint('first', flush=True)\ntime.sleep(1.5)\nprint('oops', file=sys.stderr)\nprint('second')",
    {
      onStdout: (m) => seen.push({ line: m.line, at: Date.now() - t0, error: m.error }),
      onStderr: (m) => seen.push({ line: m.line, at: Date.now() - t0, error: m.error }),
    },
  );
  assert.equal(exec.error, undefined, JSON.stringify(exec.error));
  // In order within a stream (stdout and stderr are two pipes: no order between them).
  assert.match(seen.filter((s) => !s.error).map((s) => s.line).join(""), /^first\n[\s\S]*second\n$/);
  assert.equal(seen.filter((s) => s.error).map((s) => s.line).join(""), "oops\n");
  const first = seen.find((s) => s.line.includes("first"));
  const second = seen.find((s) => s.line.includes("second"));
  // Streamed: the first line arrived before the sleep ended, well before the last.
  assert.ok(second.at - first.at >= 1000, `first at ${first.at} ms, second at ${second.at} ms`);
  assert.equal(seen.find((s) => s.line.includes("oops")).error, true);
});

test("a matplotlib chart arrives as result.png", async () => {
  const exec = await sbx.runCode(
    "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('squares')\nplt.show()",
  );
  assert.equal(exec.error, undefined, JSON.stringify(exec.error));
  const png = exec.results.find((r) => r.png);
  assert.ok(png, `no png result: ${JSON.stringify(exec.results.map((r) => r.formats()))}`);
  const bytes = Buffer.from(png.png, "base64");
  assert.deepEqual([...bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  assert.equal(png.isMainResult, false);
});

// Cells run as Jupyter runs them (issue 22): what the SDK's Result fields hold for each.
test("a notebook-indented cell runs, its last expression is the main result", async () => {
  const exec = await sbx.runCode("\n      total = 0\n      for i in range(4):\n          total += i\n\n      total * 7\n      ");
  assert.equal(exec.error, undefined, JSON.stringify(exec.error));
  assert.equal(exec.text, "42");
  const bad = await sbx.runCode("\n    a = 1\n    a / 0\n");
  assert.equal(bad.error?.name, "ZeroDivisionError");
  assert.match(bad.error.traceback, /line 3/);
});

test("display() and rich reprs arrive in order through onResult, the main result last", async () => {
  const seen = [];
  const exec = await k.runCode(
    "class Note:\n    def __repr__(self): return 'Note'\n    def _repr_html_(self): return '<i>n</i>'\n" +
    "    def _repr_markdown_(self): return '*n*'\n    def _repr_json_(self): return {'n': 1}\n" +
    "display('first')\ndisplay(Note())\n'last'",
    { onResult: (r) => seen.push(r) });
  assert.equal(exec.error, undefined, JSON.stringify(exec.error));
  assert.deepEqual(seen.map((r) => [r.text, r.isMainResult]), [["first", false], ["Note", false], ["last", true]]);
  assert.equal(seen[1].html, "<i>n</i>");
  assert.equal(seen[1].markdown, "*n*");
  assert.deepEqual(seen[1].json, { n: 1 });
  assert.deepEqual(seen[1].extra, {});
});

test("a DataFrame's data, html and text", async () => {
  const exec = await sbx.runCode("import pandas as pd\npd.DataFrame({'x': [1, 2], 'y': ['a', None]})");
  assert.equal(exec.error, undefined, JSON.stringify(exec.error));
  const r = exec.results[0];
  assert.deepEqual(r.data, { x: [1, 2], y: ["a", null] });
  assert.match(r.html, /<table/);
  assert.match(r.text, /x\s+y/);
});

test("PIL images: show(), the last expression and save() give PNGs", async () => {
  const exec = await k.runCode(
    "from PIL import Image\nimport os\nimg = Image.new('RGBA', (6, 3), (0, 128, 255, 255))\nimg.show()\n" +
    "img.save('blue.png')\nprint(os.path.getsize('blue.png') > 0)\nimg");
  assert.equal(exec.error, undefined, JSON.stringify(exec.error));
  assert.deepEqual(exec.logs.stdout, ["True\n"]);
  assert.deepEqual(exec.results.map((r) => r.isMainResult), [false, false, true]);
  for (const r of exec.results) {
    const png = Buffer.from(r.png, "base64");
    assert.equal(png.subarray(1, 4).toString(), "PNG");
    assert.equal(png.readUInt32BE(16), 6);  // IHDR width
  }
});

test("matplotlib figures carry E2B's chart: line, bar, pie, box, superchart", async () => {
  const exec = await sbx.runCode(
    "import matplotlib.pyplot as plt\n" +
    "plt.plot([1, 2, 3], [2, 4, 8], label='growth')\nplt.xlabel('day [d]')\nplt.title('Up')\nplt.show()\n" +
    "plt.bar(['x', 'y'], [5, 7])\nplt.show()\n" +
    "plt.pie([1, 3], labels=['one', 'three'])\nplt.show()\n" +
    "plt.boxplot([[1, 2, 3, 4, 5]], patch_artist=True)\nplt.show()\n" +
    "fig, axs = plt.subplots(1, 2)\nfig.suptitle('Both')\naxs[0].plot([1, 2])\naxs[1].scatter([1], [1])\nplt.show()");
  assert.equal(exec.error, undefined, JSON.stringify(exec.error));
  const charts = exec.results.map((r) => r.chart);
  assert.deepEqual(charts.map((c) => c.type), ["line", "bar", "pie", "box_and_whisker", "superchart"]);
  const [line, bar, pie, box, both] = charts;
  assert.equal(line.title, "Up");
  assert.equal(line.x_unit, "d");
  assert.deepEqual(line.elements, [{ label: "growth", points: [[1, 2], [2, 4], [3, 8]] }]);
  assert.deepEqual(bar.elements.map((e) => [e.label, e.value]), [["x", 5], ["y", 7]]);
  assert.deepEqual(pie.elements.map((e) => [e.label, e.angle]), [["one", 90], ["three", 270]]);
  assert.deepEqual([box.elements[0].min, box.elements[0].median, box.elements[0].max], [1, 3, 5]);
  assert.equal(both.title, "Both");
  assert.deepEqual(both.elements.map((c) => c.type), ["line", "scatter"]);
  for (const r of exec.results) assert.deepEqual(r.extra, {});
});

test("envs hold for one runCode; the sandbox's own variables cannot be set", async () => {
  const exec = await k.runCode("import os\nos.environ['GREETING'] + ' ' + os.environ['WHO']",
    { envs: { GREETING: "hello", WHO: "e2b" } });
  assert.equal(exec.error, undefined, JSON.stringify(exec.error));
  assert.equal(exec.text, "hello e2b");
  const next = await k.runCode("os.getenv('GREETING', 'unset')");
  assert.equal(next.text, "unset");
  await assert.rejects(k.runCode("1", { envs: { PATH: "/tmp" } }), /422|PATH/);
});

test("an exception is execution.error with name, value and traceback", async () => {
  const exec = await sbx.runCode("def f():\n    return 1 / 0\nf()");
  assert.ok(exec.error, "no error");
  assert.equal(exec.error.name, "ZeroDivisionError");
  assert.equal(exec.error.value, "division by zero");
  assert.match(exec.error.traceback, /line 2/);
  let called = null;
  await sbx.runCode("raise ValueError('bad input')", { onError: (e) => { called = e; } });
  assert.equal(called?.name, "ValueError");
});

test("createCodeContext + runCode({context}) keeps its own state apart", async () => {
  const ctx = await sbx.createCodeContext();
  assert.match(ctx.id, /\S/);
  assert.equal(ctx.language, "python");
  assert.equal(ctx.cwd, "/home/user");
  await sbx.runCode("y = 'in the context'", { context: ctx });
  const inCtx = await sbx.runCode("y", { context: ctx });
  assert.equal(inCtx.text, "in the context");  // a string's repr without its quotes, as E2B gives it
  const outside = await sbx.runCode("y");
  assert.equal(outside.error?.name, "NameError");
  const listed = await sbx.listCodeContexts();
  assert.ok(listed.some((c) => c.id === ctx.id), JSON.stringify(listed));
  await sbx.restartCodeContext(ctx);
  const fresh = await sbx.runCode("y", { context: ctx });
  assert.equal(fresh.error?.name, "NameError");
  await sbx.removeCodeContext(ctx);
  await assert.rejects(sbx.runCode("1", { context: ctx }), /not found/i);
});

// `general` (the second server): a context made with createCodeContext is a
// new interpreter in the caller's sandbox, so it shares /home/user.
test("a created context shares the sandbox's files; a second one of a language may work in /tmp", async () => {
  const ctx = await k.createCodeContext();
  await k.runCode("y = 1\nopen('from_ctx.txt', 'w').write('shared')", { context: ctx });
  assert.equal((await k.runCode("open('from_ctx.txt').read()")).text, "shared");
  assert.equal(await k.files.read("/home/user/from_ctx.txt"), "shared");
  assert.equal((await k.runCode("y")).error?.name, "NameError");
  const tmp = await k.createCodeContext({ language: "python", cwd: "/tmp" });
  assert.notEqual(tmp.id, ctx.id);
  assert.equal(tmp.cwd, "/tmp");
  assert.equal((await k.runCode("import os; os.getcwd()", { context: tmp })).text, "/tmp");
  const js = await k.createCodeContext({ language: "js" });
  assert.equal(js.language, "javascript");
  assert.equal((await k.runCode("require('fs').readFileSync('/home/user/from_ctx.txt', 'utf8')", { context: js })).text,
    "shared");
  // A directory the sandbox does not have (the host's /root) is refused, not made.
  await assert.rejects(k.createCodeContext({ cwd: "/root" }), /400/);
  for (const c of [ctx, tmp, js]) await k.removeCodeContext(c);
  const listed = (await k.listCodeContexts()).map((c) => c.id);
  assert.ok(![ctx.id, tmp.id, js.id].some((id) => listed.includes(id)), JSON.stringify(listed));
});

// `general` (the second server): /files reaches the sandbox's /tmp too, as E2B's does.
test("files.write and files.read reach /tmp; a link planted there is never followed", async () => {
  const info = await k.files.write("/tmp/from-sdk/t.txt", "in tmp");
  assert.equal(info.path, "/tmp/from-sdk/t.txt");
  assert.equal((await k.runCode("open('/tmp/from-sdk/t.txt').read()")).text, "in tmp");
  await k.runCode("open('/tmp/by-code.txt', 'w').write('code wrote')");
  assert.equal(await k.files.read("/tmp/by-code.txt"), "code wrote");
  // One multipart body, parts in both directories.
  const many = await k.files.write([{ path: "/tmp/m1.txt", data: "one" }, { path: "/home/user/m2.txt", data: "two" }]);
  assert.deepEqual(many.map((w) => w.path), ["/tmp/m1.txt", "/home/user/m2.txt"]);
  assert.equal((await k.runCode("open('/tmp/m1.txt').read() + open('m2.txt').read()")).text, "onetwo");
  // A symlink the code plants in /tmp (to a file outside, to the host's /etc) is refused both ways.
  await k.runCode("import os\nos.symlink('/etc/passwd', '/tmp/pw')\nos.symlink('/etc', '/tmp/etcdir')");
  await assert.rejects(k.files.read("/tmp/pw"), /symlink|not a regular file|409|400/i);
  await assert.rejects(k.files.write("/tmp/pw", "x"), /symlink|not a regular file|409|400/i);
  await assert.rejects(k.files.write("/tmp/etcdir/x", "x"), /symlink|not a directory|409|400|404/i);
  await assert.rejects(k.files.read("/tmp/../etc/passwd"), /\.\.|path/i);
  // The link is still a link (nothing was written through or over it).
  assert.equal((await k.runCode("import os; os.readlink('/tmp/pw')")).text, "/etc/passwd");
});

test("removing a context while it runs a call is refused; the context stays and answers", async () => {
  const ctx = await k.createCodeContext();
  let begun;
  const started = new Promise((r) => { begun = r; });
  const running = k.runCode("print('started', flush=True)\nimport time\ntime.sleep(2)\n'done'",
    { context: ctx, onStdout: () => begun() });
  await started;
  await assert.rejects(k.removeCodeContext(ctx), /409|busy|Conflict/i);
  assert.ok((await k.listCodeContexts()).some((c) => c.id === ctx.id), "a refused remove forgot the context");
  assert.equal((await running).text, "done");
  await k.removeCodeContext(ctx);
  assert.ok(!(await k.listCodeContexts()).some((c) => c.id === ctx.id));
});

test("files.write then the code reads the file", async () => {
  const info = await sbx.files.write("/home/user/data/input.csv", "a,b\n1,2\n3,4\n");
  assert.equal(info.path, "/home/user/data/input.csv");
  assert.equal(info.name, "input.csv");
  const exec = await sbx.runCode("import pandas as pd\ndf = pd.read_csv('data/input.csv')\nint(df.b.sum())");
  assert.equal(exec.error, undefined, JSON.stringify(exec.error));
  assert.equal(exec.text, "6");
  const many = await sbx.files.write([{ path: "one.txt", data: "1" }, { path: "/home/user/two.txt", data: "2" }]);
  assert.deepEqual(many.map((f) => f.path).sort(), ["/home/user/one.txt", "/home/user/two.txt"]);
});

test("code writes a file, then files.read returns it (text and bytes)", async () => {
  const exec = await sbx.runCode("import pandas as pd\npd.DataFrame({'total': [42]}).to_csv('report.csv', index=False)");
  assert.equal(exec.error, undefined, JSON.stringify(exec.error));
  assert.equal(await sbx.files.read("/home/user/report.csv"), "total\n42\n");
  const bytes = await sbx.files.read("report.csv", { format: "bytes" });
  assert.equal(Buffer.from(bytes).toString(), "total\n42\n");
  await assert.rejects(sbx.files.read("/home/user/missing.txt"), /not found|no such/i);
});

test("files outside /home/user are refused, never read from the host", async () => {
  await assert.rejects(sbx.files.read("/etc/passwd"), /home\/user/);
  await assert.rejects(sbx.files.read("/home/user/../../etc/passwd"), /\.\.|path/i);
  await assert.rejects(sbx.files.write("/etc/airlock-e2b-test", "x"), /home\/user/);
  assert.equal(existsSync("/etc/airlock-e2b-test"), false);
});

// --- envd's filesystem calls (Connect: filesystem.Filesystem/*) ---------------

// The inotify instances a server holds (each watch is one), read from /proc.
function inotifyFds(server) {
  let n = 0;
  for (const fd of readdirSync(`/proc/${server.proc.pid}/fd`)) {
    try { if (readlinkSync(`/proc/${server.proc.pid}/fd/${fd}`) === "anon_inode:inotify") n++; } catch { /* closed */ }
  }
  return n;
}

// Waits (bounded) until `check()` holds; the verdict is the last check.
async function eventually(check, tries = 100) {
  for (let i = 0; i < tries && !check(); i++) await new Promise((r) => setTimeout(r, 50));
  return check();
}

// A Connect unary call to an E2B server's envd port, as the SDK makes it.
async function envd(base, method, body, raw = false) {
  const r = await fetch(`${base}/filesystem.Filesystem/${method}`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: raw ? body : JSON.stringify(body),
  });
  return { status: r.status, headers: r.headers, json: await r.json() };
}

// (On the `general` server: its code may use os freely.)
test("files.makeDir, getInfo, exists, list with depth, rename and remove", async () => {
  assert.equal(await k.files.makeDir("tree/a/b"), true);
  assert.equal(await k.files.makeDir("/home/user/tree/a/b"), false, "already there: false, as E2B's");
  await k.files.write("tree/a/one.txt", "12345");
  const info = await k.files.getInfo("tree/a/one.txt");
  assert.equal(info.type, "file");
  assert.equal(info.path, "/home/user/tree/a/one.txt");
  assert.equal(info.size, 5);
  assert.equal(info.permissions, "-rw-r--r--");
  assert.equal(info.owner, "user");
  assert.ok(info.modifiedTime instanceof Date && info.modifiedTime.getTime() > Date.now() - 3600e3);
  assert.equal((await k.files.getInfo("/home/user/tree")).type, "dir");
  assert.equal(await k.files.exists("tree/a/none.txt"), false);
  const one = await k.files.list("tree");
  assert.deepEqual(one.map((e) => e.name), ["a"]);
  const all = await k.files.list("/home/user/tree", { depth: 3 });
  assert.deepEqual(all.map((e) => e.path), ["/home/user/tree/a", "/home/user/tree/a/b", "/home/user/tree/a/one.txt"]);
  // The code sees what the calls did, and the calls see what the code did.
  const moved = await k.files.rename("tree/a/one.txt", "tree/moved/two.txt");
  assert.equal(moved.path, "/home/user/tree/moved/two.txt");
  const seen = await k.runCode("import os\nopen('tree/made.txt','w').write('x')\nsorted(os.listdir('tree/moved'))");
  assert.equal(seen.text, "['two.txt']", JSON.stringify(seen.error));
  assert.equal(await k.files.exists("tree/made.txt"), true);
  await k.files.remove("tree");
  assert.equal(await k.files.exists("tree"), false);
  // The sandbox's /tmp, its other writable directory, is reached the same way.
  assert.equal(await k.files.makeDir("/tmp/envd-t/x"), true);
  const tmp = await k.runCode("open('/tmp/envd-t/c.txt','w').write('abc')");
  assert.equal(tmp.error, undefined, JSON.stringify(tmp.error));
  assert.deepEqual((await k.files.list("/tmp/envd-t")).map((e) => e.path), ["/tmp/envd-t/c.txt", "/tmp/envd-t/x"]);
  const c = await k.files.getInfo("/tmp/envd-t/c.txt");
  assert.equal(c.size, 3);
  assert.equal(c.owner, "user");
  await assert.rejects(k.files.rename("/tmp/envd-t/c.txt", "c.txt"), /between \/home\/user and \/tmp/);
  await k.files.remove("/tmp/envd-t");
  assert.equal(await k.files.exists("/tmp/envd-t"), false);
  await k.files.remove("tree");  // nothing there: done, as envd's
  await assert.rejects(k.files.rename("none.txt", "other.txt"), /not.found|does not exist/i);
});

test("watchDir streams the writes in a directory, recursively, until stopped", async () => {
  await k.files.makeDir("watched/sub");
  const held = inotifyFds(servers[1]);
  const events = [];
  const handle = await k.files.watchDir("watched", (e) => events.push(e), { recursive: true });
  await k.files.write("watched/sub/new.txt", "hello");
  await k.runCode("import os\nos.mkdir('watched/made')");
  // (Written once the new directory's CREATE is out: its watch is in place.)
  assert.ok(await eventually(() => events.some((e) => e.name === "made" && e.type === "create")));
  await k.runCode("open('watched/made/by_code.txt','w').write('x')");
  await eventually(() => events.some((e) => e.name === "made/by_code.txt" && e.type === "write"));
  await handle.stop();
  assert.ok(await eventually(() => inotifyFds(servers[1]) === held), "the watch is gone with its client");
  const seen = events.map((e) => `${e.type} ${e.name}`);
  assert.ok(seen.includes("write sub/new.txt"), seen.join(", "));
  assert.ok(seen.includes("create made"), seen.join(", "));
  assert.ok(seen.includes("write made/by_code.txt"), "a directory made after the start is watched too: " + seen.join(", "));
  assert.ok(!seen.some((e) => e.includes("airlock-upload")), "an upload's temporary file is not reported");
  await assert.rejects(k.files.watchDir("no/such/dir", () => {}), /not.found|does not exist/i);
});

test("a symlink planted by code is refused by every filesystem call", async () => {
  const plant = await k.runCode(
    "import os\nos.makedirs('trap', exist_ok=True)\nos.symlink('/etc', 'trap/etc')\nos.symlink('/etc/passwd', 'trap/pw')\n" +
    "os.symlink('../..', 'trap/up')\n'planted'");
  assert.equal(plant.text, "planted", JSON.stringify(plant.error));
  const link = await k.files.getInfo("trap/etc");
  assert.equal(link.type, "symlink", "reported as itself, never followed");
  assert.equal(link.symlinkTarget, "/etc");
  assert.equal((await k.files.getInfo("trap/up")).symlinkTarget, "/home");
  const listed = await k.files.list("trap", { depth: 5 });
  assert.deepEqual(listed.map((e) => `${e.type} ${e.name}`), ["symlink etc", "symlink pw", "symlink up"], "never entered");
  await assert.rejects(k.files.list("trap/etc"), /symbolic link|not a directory/i);
  await assert.rejects(k.files.getInfo("trap/etc/passwd"), /symbolic link/i);
  await assert.rejects(k.files.rename("trap/etc/passwd", "stolen"), /symbolic link/i);
  await k.files.write("real.txt", "mine");
  await assert.rejects(k.files.rename("real.txt", "trap/etc/x"), /symbolic link/i);
  await assert.rejects(k.files.makeDir("trap/etc/airlock-made"), /symbolic link/i);
  await assert.rejects(k.files.remove("trap/up/user"), /symbolic link/i);
  await assert.rejects(k.files.watchDir("trap/etc", () => {}), /symbolic link/i);
  await assert.rejects(k.files.read("trap/pw"), /symbolic link|symlink/i);
  assert.equal(existsSync("/etc/airlock-made"), false);
  // Removing the tree removes the links themselves, never what they name.
  await k.files.remove("trap");
  assert.equal(existsSync("/etc/passwd"), true);
  assert.equal(await k.files.exists("trap"), false);
});

test("bad envd requests get Connect's errors: paths, depth, JSON, envelopes", async () => {
  let r = await envd(kernelBase, "ListDir", { path: "/home/user", depth: 10000 });
  assert.equal(r.status, 400);
  assert.equal(r.json.code, "invalid_argument");
  assert.match(r.json.message, /depth 10000/);
  for (const path of ["/etc", "/home/user/../../etc", "a/../../b", "a\u0000b", "/proc/self/root", "/tmp/../etc", "/tmpx"]) {
    r = await envd(kernelBase, "Stat", { path });
    assert.equal(r.status, 400, path);
    assert.equal(r.json.code, "invalid_argument", path);
  }
  r = await envd(kernelBase, "Stat", '{"path": ', true);
  assert.equal(r.json.code, "invalid_argument");
  r = await envd(kernelBase, "Stat", { path: 7 });
  assert.equal(r.json.code, "invalid_argument");
  r = await envd(kernelBase, "Move", { source: "/home/user", destination: "x" });
  assert.equal(r.json.code, "invalid_argument");
  r = await envd(kernelBase, "GetWatcherEvents", { watcherId: "nope" });
  assert.equal(r.status, 404);
  assert.equal(r.json.code, "not_found");
  // A stream's request must be one uncompressed envelope: its refusal is the stream's end.
  const bad = await fetch(`${kernelBase}/filesystem.Filesystem/WatchDir`, {
    method: "POST", headers: { "Content-Type": "application/connect+json" }, body: '{"path":"x"}',
  });
  assert.equal(bad.status, 200);
  const end = Buffer.from(await bad.arrayBuffer());
  assert.equal(end[0], 2, "the end-of-stream flag");
  assert.equal(JSON.parse(end.subarray(5).toString()).error.code, "invalid_argument");
});

test("a watcher on a directory filled fast stays bounded and says what it dropped", async () => {
  await k.files.makeDir("flood");
  const created = await envd(kernelBase, "CreateWatcher", { path: "/home/user/flood" });
  assert.equal(created.status, 200, JSON.stringify(created.json));
  const id = created.json.watcherId;
  const fill = await k.runCode("for i in range(6000):\n    open(f'flood/f{i}', 'w').close()\n'filled'");
  assert.equal(fill.text, "filled");
  let total = 0;
  let dropped = 0;
  for (let i = 0; i < 20; i++) {
    const r = await envd(kernelBase, "GetWatcherEvents", { watcherId: id });
    assert.equal(r.status, 200);
    assert.ok(r.json.events.length <= 4096, `one answer holds at most the queue: ${r.json.events.length}`);
    total += r.json.events.length;
    dropped += Number(r.headers.get("x-airlock-dropped-events") || 0);
    if (total + dropped >= 6000) break;
    await new Promise((res) => setTimeout(res, 100));
  }
  assert.ok(dropped > 0 || total >= 6000, `every event kept or the drops said: ${total} + ${dropped}`);
  // A caller's watches are bounded (each is an inotify instance of the host's).
  const more = [];
  let refused = null;
  for (let i = 0; i < 20 && !refused; i++) {
    const r = await envd(kernelBase, "CreateWatcher", { path: "flood" });
    if (r.status === 200) more.push(r.json.watcherId);
    else refused = r;
  }
  assert.ok(refused, "the 21st watch was made");
  assert.equal(refused.json.code, "resource_exhausted");
  assert.match(refused.json.message, /watches/);
  for (const w of more) assert.equal((await envd(kernelBase, "RemoveWatcher", { watcherId: w })).status, 200);
  const gone = await envd(kernelBase, "RemoveWatcher", { watcherId: id });
  assert.equal(gone.status, 200);
  assert.equal((await envd(kernelBase, "GetWatcherEvents", { watcherId: id })).json.code, "not_found");
  await k.files.remove("flood");
  assert.equal(await k.files.exists("flood"), false);
  // A watcher whose watch ended (its directory removed) but that nobody read still counts:
  // a client cannot pile ended watchers up (each keeps its queue).
  const baseline = inotifyFds(servers[1]);
  const ended = [];
  let capped = null;
  for (let i = 0; i < 20 && !capped; i++) {
    await k.files.makeDir(`gone${i}`);
    const r = await envd(kernelBase, "CreateWatcher", { path: `gone${i}` });
    if (r.status !== 200) {
      capped = r;
      break;
    }
    ended.push(r.json.watcherId);
    await k.files.remove(`gone${i}`);
    assert.ok(await eventually(() => inotifyFds(servers[1]) === baseline), "the watch ended with its directory");
  }
  assert.ok(capped, "ended, unread watchers piled up past the cap");
  assert.equal(capped.json.code, "resource_exhausted");
  for (const w of ended) await envd(kernelBase, "RemoveWatcher", { watcherId: w });
  // A watcher ends with its sandbox, and holds nothing after.
  const last = await envd(kernelBase, "CreateWatcher", { path: "/home/user" });
  assert.equal(last.status, 200);
  assert.ok(inotifyFds(servers[1]) >= 1);
  const contexts = await (await fetch(`${kernelBase}/contexts`)).json();
  const python = contexts.find((c) => c.language === "python");
  assert.equal((await fetch(`${kernelBase}/contexts/${python.id}`, { method: "DELETE" })).status, 204);
  assert.ok(await eventually(() => inotifyFds(servers[1]) === 0), "the watch ended with the sandbox");
  const after = await envd(kernelBase, "GetWatcherEvents", { watcherId: last.json.watcherId });
  assert.equal(after.json.code, "not_found");
  assert.match(after.json.message, /sandbox ended/);
});

test("files.write with gzip and metadata: inflated, the metadata kept as user.e2b.* attributes", async () => {
  const content = "gzipped by the SDK\n".repeat(4000);
  const info = await k.files.write("/home/user/gz/notes.txt", content, { gzip: true, metadata: { author: "airlock" } });
  assert.equal(info.path, "/home/user/gz/notes.txt");
  assert.deepEqual(info.metadata, { author: "airlock" });
  assert.equal(await k.files.read("gz/notes.txt", { gzip: true }), content);
  const seen = await k.runCode("import os\nsorted((n, os.getxattr('gz/notes.txt', n)) for n in os.listxattr('gz/notes.txt'))");
  assert.equal(seen.error, undefined, JSON.stringify(seen.error));
  assert.equal(seen.text, "[('user.e2b.author', b'airlock')]");
  // Several files, multipart and octet-stream: the same metadata on each; none when overwritten without.
  for (const useOctetStream of [false, true]) {
    const many = await k.files.write([{ path: "gz/a.txt", data: "A" }, { path: "gz/b.txt", data: "B" }],
      { metadata: { source: "sdk" }, useOctetStream });
    assert.deepEqual(many.map((f) => f.metadata), [{ source: "sdk" }, { source: "sdk" }]);
  }
  const plain = await k.files.write("gz/a.txt", "A2");
  assert.equal(plain.metadata, undefined);
  const after = await k.runCode("import os\n(os.listxattr('gz/a.txt'), os.listxattr('gz/b.txt'))");
  assert.equal(after.text, "([], ['user.e2b.source'])");
});

test("an empty file reads as empty in every format (Content-Length: 0), gzip asked or not", async () => {
  const made = await k.runCode("open('empty.txt', 'w').close()");
  assert.equal(made.error, undefined, JSON.stringify(made.error));
  for (const gzip of [false, true]) {
    assert.equal(await k.files.read("empty.txt", { format: "text", gzip }), "");
    const bytes = await k.files.read("empty.txt", { format: "bytes", gzip });
    assert.ok(bytes instanceof Uint8Array && bytes.length === 0);
    const blob = await k.files.read("empty.txt", { format: "blob", gzip });
    assert.ok(blob instanceof Blob && blob.size === 0);
    const stream = await k.files.read("empty.txt", { format: "stream", gzip });
    assert.ok(stream instanceof ReadableStream);
    let n = 0;
    for await (const chunk of stream) n += chunk.length;
    assert.equal(n, 0);
  }
});

test("gzip uploads are bounded: a bomb is 413 at --max-file, corrupt gzip 400, another encoding 415", async () => {
  const post = (path, body, headers) => fetch(`${kernelEnvd}/files?path=${path}`, {
    method: "POST", headers: { "Content-Type": "application/octet-stream", ...headers }, body,
  });
  const bomb = gzipSync(Buffer.alloc(64 << 20), { level: 9 });  // 64 MiB of zeros, over the default 32 MiB cap
  let r = await post("bomb.bin", bomb, { "Content-Encoding": "gzip" });
  assert.equal(r.status, 413);
  assert.match((await r.json()).message, /--max-file/);
  await assert.rejects(k.files.read("bomb.bin"), /not found|does not exist/i);
  const good = gzipSync(Buffer.from("x".repeat(10000)));
  r = await post("cut.bin", good.subarray(0, good.length - 12), { "Content-Encoding": "gzip" });
  assert.equal(r.status, 400);
  assert.match((await r.json()).message, /gzip/);
  r = await post("br.bin", "x", { "Content-Encoding": "br" });
  assert.equal(r.status, 415);
  assert.match((await r.json()).message, /gzip/);
  // Metadata the SDK would refuse, sent by hand: refused by the server too, nothing written.
  r = await post("meta.bin", "x", { "X-Metadata-big": "v".repeat(5000) });
  assert.equal(r.status, 400);
  r = await post("meta.bin", "x", { "X-Metadata-k": "caf\u00e9" });
  assert.equal(r.status, 400);
  await assert.rejects(k.files.read("meta.bin"), /not found|does not exist/i);
  const ok = await k.runCode("'still alive'");
  assert.equal(ok.text, "still alive");
});

// --- security through the E2B door ------------------------------------------

test("a rejected import comes back as execution.error naming the violation", async () => {
  const exec = await sbx.runCode("import socket\nsocket.socket()");
  assert.ok(exec.error, "the import ran");
  assert.equal(exec.error.name, "PolicyViolation");
  assert.match(exec.error.value + exec.error.traceback, /socket/);
  assert.match(exec.error.traceback, /line 1/);
  assert.equal(exec.logs.stdout.length, 0);
});

test("escapes fail in the kernel's layers: /etc/shadow and a host listener", async () => {
  const shadow = await k.runCode("open('/etc/shadow').read()");
  assert.ok(shadow.error, `read /etc/shadow: ${JSON.stringify(shadow.results)}`);
  assert.match(shadow.error.name, /FileNotFoundError|PermissionError/);
  const port = hostListener.address().port;
  const conn = await k.runCode(
    `import socket\ns = socket.create_connection(('127.0.0.1', ${port}), timeout=3)\ns.recv(100)`,
  );
  assert.ok(conn.error, `connected to the host: ${JSON.stringify(conn.results)}`);
  assert.match(conn.error.name, /ConnectionRefusedError|OSError|TimeoutError|PermissionError/);
  // The same code in the sandbox's own loopback only: nothing of the host's.
  assert.ok(!JSON.stringify(conn).includes("secret from the host"));
});

// --- contexts in other languages (the `general` server: it allows all six) --------

test("the default contexts are python and javascript, in one sandbox with one /home/user", async () => {
  const listed = await k.listCodeContexts();
  const languages = listed.map((c) => c.language);
  assert.ok(languages.includes("python") && languages.includes("javascript"), JSON.stringify(listed));
  // Python writes, JavaScript, TypeScript and bash read: one workspace.
  const w = await k.runCode("open('shared.txt', 'w').write('from python')");
  assert.equal(w.error, undefined, JSON.stringify(w.error));
  const js = await k.runCode("require('fs').readFileSync('/home/user/shared.txt', 'utf8')", { language: "js" });
  assert.equal(js.error, undefined, JSON.stringify(js.error));
  assert.equal(js.text, "from python");
  const ts = await k.runCode("const n: number = 6 * 7; console.log(n)", { language: "ts" });
  assert.equal(ts.error, undefined, JSON.stringify(ts.error));
  assert.deepEqual(ts.logs.stdout, ["42\n"]);
  const sh = await k.runCode("cat shared.txt; echo; pwd", { language: "bash" });
  assert.equal(sh.error, undefined, JSON.stringify(sh.error));
  assert.equal(sh.logs.stdout.join(""), "from python\n/home/user\n");
});

test("JavaScript cells: top-level await, ESM imports, state kept, envs for one run", async () => {
  const awaited = await k.runCode("await Promise.resolve('resolved')", { language: "javascript" });
  assert.equal(awaited.text, "resolved");
  const esm = await k.runCode("import { readFileSync } from 'fs'\nconsole.log(typeof readFileSync)", { language: "js" });
  assert.deepEqual(esm.logs.stdout, ["function\n"]);
  const ctx = await k.createCodeContext({ language: "javascript" });
  assert.equal(ctx.language, "javascript");
  await k.runCode("let kept = 41", { context: ctx });
  assert.equal((await k.runCode("kept + 1", { context: ctx })).text, "42");
  const env = await k.runCode("process.env.E2B_TEST_ENV", { language: "js", envs: { E2B_TEST_ENV: "set" } });
  assert.equal(env.text, "set");
  const gone = await k.runCode("process.env.E2B_TEST_ENV || 'unset'", { language: "js" });
  assert.equal(gone.text, "unset");
});

test("an unknown language is a clear 400; another language's escapes fail in the kernel's layers", async () => {
  await assert.rejects(k.runCode("1", { language: "cobol" }), /400/);
  const raw = await fetch(`${kernelBase}/execute`, { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ code: "1", language: "cobol" }) });
  assert.equal(raw.status, 400);
  assert.match((await raw.json()).message, /cobol.*python, javascript/);
  const shadow = await k.runCode("require('fs').readFileSync('/etc/shadow', 'utf8')", { language: "js" });
  assert.ok(shadow.error, `read /etc/shadow: ${JSON.stringify(shadow.results)}`);
  const port = hostListener.address().port;
  const conn = await k.runCode(
    `await new Promise((ok, fail) => { const s = require('net').connect(${port}, '127.0.0.1');
       s.on('data', (d) => ok(String(d))); s.on('error', fail); setTimeout(() => fail(new Error('timed out')), 3000); })`,
    { language: "js" });
  assert.ok(conn.error, `connected to the host: ${JSON.stringify(conn.results)}`);
  assert.ok(!JSON.stringify(conn).includes("secret from the host"));
  const sh = await k.runCode(`cat /etc/shadow; (exec 3<>/dev/tcp/127.0.0.1/${port} && cat <&3) 2>&1; echo done`,
    { language: "bash" });
  assert.ok(!sh.logs.stdout.join("").includes("secret from the host"), JSON.stringify(sh.logs));
  assert.ok(!sh.logs.stdout.join("").includes("root:"), JSON.stringify(sh.logs));
});

test("malformed and oversized requests get clear errors, and the server lives on", async () => {
  const post = (path, body, headers = { "Content-Type": "application/json" }) =>
    fetch(`http://localhost:49999${path}`, { method: "POST", headers, body });
  let r = await post("/execute", "{\"code\": ");
  assert.equal(r.status, 422);
  assert.match((await r.json()).message, /not valid JSON/);
  r = await post("/execute", "{\"code\": \"1\"}\n{\"code\": \"2\"}\n");
  assert.equal(r.status, 422, "NDJSON lines are not one request");
  r = await post("/execute", JSON.stringify({ code: 1 }));
  assert.equal(r.status, 422);
  assert.match((await r.json()).message, /code/);
  r = await post("/execute", JSON.stringify({ code: "1", context_id: "x", language: "python" }));
  assert.equal(r.status, 400);
  assert.match((await r.json()).message, /Only one of context_id or language/);
  // A language this server's E2B profile (visualization: Python only) does not allow.
  r = await post("/execute", JSON.stringify({ code: "1", language: "r" }));
  assert.equal(r.status, 422);
  assert.match((await r.json()).message, /\br\b/);
  r = await post("/execute", JSON.stringify({ code: "1", env_vars: { LD_PRELOAD: "/tmp/x.so" } }));
  assert.equal(r.status, 422, "the sandbox's own variables cannot be set");
  assert.match((await r.json()).message, /LD_PRELOAD/);
  r = await post("/execute", JSON.stringify({ code: "1", env_vars: { "A=B": "x" } }));
  assert.equal(r.status, 422);
  assert.match((await r.json()).message, /env_vars/);
  r = await post("/execute", JSON.stringify({ code: "x".repeat(3 << 20) }));
  assert.equal(r.status, 413);
  r = await post("/execute", JSON.stringify({ code: "#".repeat((1 << 20) + 10) }));
  assert.equal(r.status, 413);
  r = await fetch("http://localhost:49983/files?path=a.txt", {
    method: "POST", headers: { "Content-Type": "multipart/form-data; boundary=xyz" }, body: "--xyz\r\nbroken",
  });
  assert.equal(r.status, 400);
  assert.match((await r.json()).message, /multipart/);
  // The browser rules of the API hold on the E2B ports (a page cannot drive them).
  r = await fetch("http://localhost:49983/files?path=x.txt", {
    method: "POST", headers: { "Content-Type": "multipart/form-data; boundary=xyz", Origin: "http://evil.example" },
    body: "--xyz\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nx\r\n--xyz--\r\n",
  });
  assert.equal(r.status, 403);
  r = await post("/execute", JSON.stringify({ code: "1" }), { "Content-Type": "application/json", Origin: "http://evil.example" });
  assert.equal(r.status, 403);
  r = await post("/execute", JSON.stringify({ code: "1" }), { "Content-Type": "text/plain" });
  assert.equal(r.status, 415);
  r = await new Promise((resolve, reject) => {
    const s = net.connect(49999, "127.0.0.1", () => {
      s.end("GET /health HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n");
    });
    let data = "";
    s.on("data", (d) => { data += d; });
    s.on("end", () => resolve({ status: Number(data.split(" ")[1]) }));
    s.on("error", reject);
  });
  assert.equal(r.status, 421);
  r = await fetch("http://localhost:49983/health");
  assert.equal(r.status, 204);
  r = await fetch("http://localhost:49999/health");
  assert.equal(await r.json(), "OK");
  const ok = await sbx.runCode("'still alive'");
  assert.equal(ok.text, "still alive");
});

test("the docs/agents.md snippet runs as written", async () => {
  await sbx.files.write('/home/user/sales.csv', 'month,total\n1,10\n2,30\n');
  const out = [];
  const exec = await sbx.runCode(
    "import pandas as pd, matplotlib.pyplot as plt\n" +
    "df = pd.read_csv('sales.csv'); df.plot(x='month', y='total'); plt.show()\n" +
    "df.total.sum()",
    { onStdout: (m) => out.push(m.line) },
  );
  assert.equal(exec.error, undefined, JSON.stringify(exec.error));
  assert.equal(exec.text, "40");
  assert.ok(exec.results[0].png, JSON.stringify(exec.results.map((r) => r.formats())));
});

test("an SDK timeout disconnects; the call is interrupted and the context lives on", async () => {
  await k.runCode("kept = 'yes'");
  await assert.rejects(k.runCode("while True:\n    pass", { timeoutMs: 1500 }), /timed out|timeout|abort/i);
  // `general` gives a call 10 s by default: sooner than that, the disconnect interrupted it.
  const t0 = Date.now();
  let after;
  for (let i = 0; i < 50; i++) {
    try {
      after = await k.runCode("kept");
      break;
    } catch (e) {
      if (!/409/.test(String(e))) throw e;  // still stopping the interrupted call
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  assert.equal(after?.text, "yes");
  assert.ok(Date.now() - t0 < 6000, `the next call ran ${Date.now() - t0} ms after the disconnect`);
});

test("with tokens, the E2B ports need one too (X-Access-Token, as E2B's clients send it)", async () => {
  const token = "e2b-interop-token-0123456789abcdef";
  const port = await freePort();
  const envdPort = await freePort();
  await startServer("minimal", ["--e2b-listen", `127.0.0.1:${port},${envdPort}`, "--pool-size", "1"],
    { ...process.env, AIRLOCK_TOKENS: `tester:${token}` });
  const body = JSON.stringify({ code: "6 * 7" });
  let r = await fetch(`http://127.0.0.1:${port}/execute`, { method: "POST", headers: { "Content-Type": "application/json" }, body });
  assert.equal(r.status, 401);
  r = await fetch(`http://127.0.0.1:${envdPort}/files?path=a.txt`);
  assert.equal(r.status, 401);
  r = await fetch(`http://127.0.0.1:${port}/execute`, {
    method: "POST", headers: { "Content-Type": "application/json", "X-Access-Token": "wrong-token-0123456789abcdef" }, body,
  });
  assert.equal(r.status, 401);
  r = await fetch(`http://127.0.0.1:${port}/execute`, {
    method: "POST", headers: { "Content-Type": "application/json", "X-Access-Token": token }, body,
  });
  assert.equal(r.status, 200);
  assert.match(await r.text(), /"text":"42"/);
});
