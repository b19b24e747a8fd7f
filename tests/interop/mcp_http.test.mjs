// The official MCP TypeScript SDK, unmodified, as a client of `airlock serve`'s
// /mcp endpoint over Streamable HTTP (issue 12), as remote agent hosts connect
// (OpenAI Responses "mcp" tools, Anthropic's MCP connector, LangChain adapters).
// And the same door attacked with raw HTTP: no token, malformed JSON-RPC,
// oversized messages, unknown MCP sessions, an escape attempt.
//
//   AIRLOCK_BINARY=build/src/cli/airlock node --test tests/interop/mcp_http.test.mjs
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const here = dirname(fileURLToPath(import.meta.url));
const binary = process.env.AIRLOCK_BINARY || join(here, "../../build/src/cli/airlock");
// The shipped profiles and `gated` (every request waits for a person).
const profiles = mkdtempSync(join(tmpdir(), "airlock-interop-profiles-"));
for (const f of readdirSync(join(here, "../../profiles"))) {
  if (f.endsWith(".yaml")) copyFileSync(join(here, "../../profiles", f), join(profiles, f));
}
writeFileSync(join(profiles, "gated.yaml"), "name: gated\nextends: minimal\napproval:\n  policy: always\n");
const TOKEN = "interop-" + Math.random().toString(36).slice(2);
const APPROVER = "approver-" + Math.random().toString(36).slice(2);
const MAX_BODY = 256 * 1024;

let server;
let base;
let client;
let stderr = "";
const audit = [];  // the server's audit records (--audit-log -: stdout after the first line)

async function waitReady(deadlineMs) {
  const end = Date.now() + deadlineMs;
  while (Date.now() < end) {
    try {
      const r = await fetch(`${base}/readyz`);
      if (r.status === 200) {
        const body = await r.json();
        if (Object.values(body.pools || {}).every((p) => p.ready > 0 || p.zygote === "down")) return;
      }
    } catch {}
    await new Promise((res) => setTimeout(res, 200));
  }
  throw new Error("airlock serve did not become ready:\n" + stderr);
}

before(async () => {
  assert.ok(existsSync(binary), `airlock binary not found at ${binary} (set AIRLOCK_BINARY)`);
  server = spawn(binary, ["serve", "--listen", "127.0.0.1:0", "--profiles", profiles, "--pool-size", "1",
                          "--max-body", String(MAX_BODY)],
                 { env: { ...process.env, AIRLOCK_TOKENS: `interop:${TOKEN},alice:${APPROVER}:approve` },
                   stdio: ["ignore", "pipe", "pipe"] });
  server.stderr.on("data", (d) => { stderr += d.toString(); });
  const first = await new Promise((resolve, reject) => {
    const rl = createInterface({ input: server.stdout });
    rl.once("line", (line) => {
      rl.on("line", (l) => { try { audit.push(JSON.parse(l)); } catch {} });
      resolve(line);
    });
    server.once("exit", (code) => reject(new Error(`airlock serve exited (${code}):\n${stderr}`)));
  });
  assert.match(first, /^airlock: listening on http:\/\//);
  base = first.replace("airlock: listening on ", "").trim();
  await waitReady(90_000);
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } },
  });
  client = new Client({ name: "airlock-interop-http", version: "1.0.0" });
  await client.connect(transport);
});

after(async () => {
  await client?.close();
  server?.kill("SIGTERM");
  rmSync(profiles, { recursive: true, force: true });
});

const text = (result) => result.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");
const call = (name, args) => client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 });

// A raw JSON-RPC POST to /mcp.
async function post(body, headers = {}) {
  return fetch(`${base}/mcp`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream",
               Authorization: `Bearer ${TOKEN}`, ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

async function rawSession(protocolVersion = "2025-11-25") {
  const r = await post({ jsonrpc: "2.0", id: 1, method: "initialize",
                         params: { protocolVersion, capabilities: {}, clientInfo: { name: "raw", version: "0" } } });
  assert.equal(r.status, 200);
  const id = r.headers.get("mcp-session-id");
  assert.match(id, /^[\x21-\x7e]{16,}$/);
  return { id, body: await r.json() };
}

test("initialize over HTTP negotiates 2025-11-25 and issues an Mcp-Session-Id", async () => {
  assert.equal(client.getServerVersion().name, "airlock");
  assert.ok(client.getServerCapabilities().tools);
  assert.ok(client.transport.sessionId, "the SDK holds the Mcp-Session-Id");
  const { body } = await rawSession("2025-03-26");
  assert.equal(body.result.protocolVersion, "2025-03-26", "negotiated down to what the client speaks");
});

test("tools/list offers the session tools with honest annotations", async () => {
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name),
                   ["execute_python", "create_session", "close_session", "upload_file", "run_command", "download_file",
                    "list_profiles"]);
  for (const t of tools) {
    assert.equal(t.annotations.openWorldHint, false, t.name);
    // run_command can remove the session's files: as honest as close_session about it.
    assert.equal(t.annotations.destructiveHint, t.name === "close_session" || t.name === "run_command", t.name);
  }
});

test("execute_python one-shot returns stdout and the result", async () => {
  const r = await call("execute_python", { code: "print('hi over http')\n6 * 7" });
  assert.equal(r.isError, false, text(r));
  assert.equal(r.structuredContent.stdout, "hi over http\n");
  assert.equal(r.structuredContent.result, "42");
});

test("a session keeps state between calls, takes and gives files, and closes", async () => {
  const made = await call("create_session", { profile: "general" });
  assert.equal(made.isError, false, text(made));
  const sid = made.structuredContent.session_id;
  assert.match(sid, /^s1-/);
  assert.ok(made.structuredContent.expires_at);
  let r = await call("execute_python", { session_id: sid, code: "x = 41" });
  assert.equal(r.isError, false, text(r));
  r = await call("execute_python", { session_id: sid, code: "x + 1" });
  assert.equal(r.structuredContent.result, "42", "state kept between calls");
  assert.equal(r.structuredContent.session.id, sid);
  assert.equal(r.structuredContent.session.alive, true);

  const up = await call("upload_file", { session_id: sid, path: "data/in.csv", content: "a,b\n1,2\n3,4\n" });
  assert.equal(up.isError, false, text(up));
  // A shell command beside the interpreter, over the same files; a file it writes is seen by the next call.
  const cmd = await call("run_command", { session_id: sid, command: "wc -l < data/in.csv; echo shell > from_sh.txt; exit 3" });
  assert.equal(cmd.isError, false, text(cmd));
  assert.equal(cmd.structuredContent.exit_code, 3, text(cmd));
  assert.equal(cmd.structuredContent.stdout, "3\n", text(cmd));
  r = await call("execute_python", { session_id: sid, code: "open('from_sh.txt').read().strip()" });
  assert.equal(r.structuredContent.result, "'shell'", text(r));
  const slow = await call("run_command", { session_id: sid, command: "sleep 60", timeout_seconds: 1 });
  assert.equal(slow.structuredContent.kill_reason, "timeout", text(slow));
  r = await call("execute_python", { session_id: sid,
    code: "import pandas as pd\ndf = pd.read_csv('data/in.csv')\nopen('out.txt', 'w').write(str(df['b'].sum()))\nint(df['a'].sum())" });
  assert.equal(r.structuredContent.result, "4", text(r));
  const down = await call("download_file", { session_id: sid, path: "out.txt" });
  assert.equal(down.isError, false, text(down));
  assert.equal(text(down), "6");
  assert.equal(down.structuredContent.encoding, "utf-8");

  // A timeout in a session interrupts the cell; the session lives on.
  r = await call("execute_python", { session_id: sid, code: "import time\nwhile True:\n    time.sleep(0.05)", timeout_seconds: 1 });
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent.session.interrupted, true, JSON.stringify(r.structuredContent));
  r = await call("execute_python", { session_id: sid, code: "x" });
  assert.equal(r.structuredContent.result, "41", "state survives the interrupt");

  const closed = await call("close_session", { session_id: sid });
  assert.equal(closed.isError, false, text(closed));
  r = await call("execute_python", { session_id: sid, code: "x" });
  assert.equal(r.isError, true);
  assert.match(text(r), /session/i);
});

test("a matplotlib figure comes back as image content", async () => {
  const code = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()";
  const r = await call("execute_python", { code, profile: "visualization", timeout_seconds: 30 });
  assert.equal(r.isError, false, text(r));
  const images = r.content.filter((c) => c.type === "image");
  assert.equal(images.length, 1);
  assert.equal(images[0].mimeType, "image/png");
  assert.equal(Buffer.from(images[0].data, "base64").subarray(1, 4).toString(), "PNG");
});

// Cells run as Jupyter runs them through MCP too: a notebook-indented cell, display() and a PIL
// image in order, env vars for one call and for a session's life (issue 22).
test("an indented cell with display(), an image and env vars, one-shot and in a session", async () => {
  const code = "\n    import os\n    from PIL import Image\n    display(os.environ['STAGE'])\n" +
    "    Image.new('RGB', (3, 2)).show()\n    display({'n': 1})\n    os.getenv('STAGE') + '!'\n    ";
  let r = await call("execute_python", { code, profile: "general", env: { STAGE: "one-shot" } });
  assert.equal(r.isError, false, text(r));
  assert.equal(r.structuredContent.result, "'one-shot!'");
  const kinds = r.content.map((c) => (c.type === "image" ? "image" : c.text.split(":")[0]));
  assert.deepEqual(kinds.filter((k) => k !== "result"), ["display", "image", "display"], JSON.stringify(kinds));
  assert.equal(r.content.find((c) => c.type === "text" && c.text.startsWith("display")).text, "display: 'one-shot'");
  r = await call("execute_python", { code: "1", env: { LD_PRELOAD: "/tmp/x.so" } });
  assert.equal(r.isError, true);
  assert.match(text(r), /LD_PRELOAD/);

  const made = await call("create_session", { profile: "general", env: { STAGE: "session" } });
  assert.equal(made.isError, false, text(made));
  const sid = made.structuredContent.session_id;
  try {
    r = await call("execute_python", { session_id: sid, code: "import os\nos.environ['STAGE']", env: { STAGE: "call" } });
    assert.equal(r.structuredContent.result, "'call'", text(r));
    r = await call("execute_python", { session_id: sid, code: "os.environ['STAGE']" });
    assert.equal(r.structuredContent.result, "'session'", "a call's env lasts for that call only");
  } finally {
    await call("close_session", { session_id: sid });
  }
});

test("a rejected import is isError with the violation", async () => {
  const r = await call("execute_python", { code: "import subprocess\nsubprocess.run(['id'])", profile: "minimal" });
  assert.equal(r.isError, true);
  assert.match(text(r), /line 1, column 8: import of 'subprocess' is not allowed/);
  assert.match(text(r), /in profile 'minimal'; allowed in: general/);
  assert.equal(r.structuredContent.violations[0].rule, "import-not-allowed");
});

test("a call that names no profile runs under general, /mcp's default (--mcp-profile)", async () => {
  const r = await call("execute_python", { code: "import sys, numpy\nopen('/etc/hostname').read().strip()" });
  assert.equal(r.isError, false, text(r));
  assert.equal(r.structuredContent.result, "'sandbox'");
});

test("code its profile holds for a person: a pending result with the approval id, run once approved", async () => {
  const code = "print('approved through mcp', 6 * 7)";
  const r = await call("execute_python", { code, profile: "gated" });
  assert.equal(r.isError, false, text(r));
  const approval = r.structuredContent.approval;
  assert.match(approval.approval_id, /^apr_/);
  assert.equal(approval.status, "pending");
  assert.match(text(r), /Not run yet: profile gated holds this code for a person's approval/);
  assert.match(text(r), new RegExp(approval.approval_id));
  // A person with the approve role decides; the held code then runs, exactly as sent.
  const auth = { Authorization: `Bearer ${APPROVER}`, "Content-Type": "application/json" };
  const decided = await fetch(`${base}/v1/approvals/${approval.approval_id}`, {
    method: "POST", headers: auth, body: JSON.stringify({ decision: "approve", code_sha256: approval.code_sha256 }),
  });
  assert.equal(decided.status, 200, await decided.text());
  let got;
  for (let i = 0; i < 300; i++) {
    got = await (await fetch(`${base}/v1/approvals/${approval.approval_id}`, { headers: auth })).json();
    if (got.status === "ran" || got.status === "failed") break;
    await new Promise((res) => setTimeout(res, 100));
  }
  assert.equal(got.status, "ran", JSON.stringify(got));
  assert.equal(got.result.stdout, "approved through mcp 42\n");
  assert.equal(got.requested_by, "interop");
  const held = audit.filter((a) => a.approval_id === approval.approval_id && a.verdict === "pending_approval");
  assert.equal(held.length, 1);
  assert.equal(held[0].route, "/mcp");
});

test("every execute_python through /mcp is in the audit log, with its token and verdict", async () => {
  await call("execute_python", { code: "print('audited')" });
  await call("execute_python", { code: "import ctypes", profile: "minimal" });
  await new Promise((res) => setTimeout(res, 300));
  const mine = audit.filter((a) => a.route === "/mcp");
  assert.ok(mine.some((a) => a.verdict === "ran" && a.client.token === "interop" && a.code_sha256 && a.exit_code === 0),
            JSON.stringify(mine.slice(-3)));
  assert.ok(mine.some((a) => a.verdict === "rejected" && a.violations.length >= 1), JSON.stringify(mine.slice(-3)));
  assert.ok(mine.some((a) => a.verdict === "ran" && a.request_id.startsWith("mcp_")));
});

test("a one-shot timeout kills the run and says so", async () => {
  const r = await call("execute_python", { code: "while True:\n    pass", timeout_seconds: 1 });
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent.kill_reason, "timeout");
});

test("an escape attempt through MCP fails: no host listener, no /etc/shadow", async () => {
  const listener = createServer((s) => s.end("HOST LISTENER\n"));
  await new Promise((res) => listener.listen(0, "127.0.0.1", res));
  const port = listener.address().port;
  const code = [
    "import os, socket",
    "try:",
    `    s = socket.create_connection(('127.0.0.1', ${port}), timeout=2)`,
    "    print('CONNECTED', s.recv(64))",
    "except OSError as e:",
    "    print('DENIED', e.errno)",
    "try:",
    "    print(open('/etc/shadow').read())",
    "except OSError as e:",
    "    print('NO SHADOW', e.errno)",
  ].join("\n");
  try {
    // The general profile does not enforce the import policy: only the sandbox stands in the way.
    const r = await call("execute_python", { code, profile: "general" });
    assert.doesNotMatch(text(r), /CONNECTED|HOST LISTENER|root:/);
    assert.match(text(r), /DENIED/);
    assert.match(text(r), /NO SHADOW/);
    // And from inside a session, plus a file read outside its directory.
    const made = await call("create_session", { profile: "general" });
    const sid = made.structuredContent.session_id;
    const s = await call("execute_python", { session_id: sid, code });
    assert.doesNotMatch(text(s), /CONNECTED|HOST LISTENER|root:/);
    assert.match(text(s), /DENIED/);
    const shadow = await call("download_file", { session_id: sid, path: "../../etc/shadow" });
    assert.equal(shadow.isError, true);
    await call("close_session", { session_id: sid });
  } finally {
    listener.close();
  }
});

test("no token: 401, and nothing is handled", async () => {
  const r = await fetch(`${base}/mcp`, {
    method: "POST", headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-11-25" } }),
  });
  assert.equal(r.status, 401);
  assert.equal(r.headers.get("mcp-session-id"), null);
  const wrong = await post({ jsonrpc: "2.0", id: 1, method: "ping" }, { Authorization: "Bearer nope" });
  assert.equal(wrong.status, 401);
});

test("malformed JSON-RPC gets the right error codes", async () => {
  const { id } = await rawSession();
  const cases = [
    ["{not json", -32700],
    ["[1, 2]", -32600],
    [JSON.stringify({ jsonrpc: "1.0", id: 2, method: "ping" }), -32600],
    [JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { arguments: {} } }), -32602],
  ];
  for (const [body, code] of cases) {
    const r = await post(body, { "Mcp-Session-Id": id });
    assert.equal(r.status, 400, body);
    assert.equal((await r.json()).error.code, code, body);
  }
  const unknownMethod = await post({ jsonrpc: "2.0", id: 3, method: "sampling/createMessage" }, { "Mcp-Session-Id": id });
  assert.equal((await unknownMethod.json()).error.code, -32601);
  const unknownTool = await post({ jsonrpc: "2.0", id: 4, method: "tools/call", params: { name: "rm_rf", arguments: {} } },
                                 { "Mcp-Session-Id": id });
  assert.equal((await unknownTool.json()).error.code, -32602);
});

test("an oversized message is refused (413) before it is parsed", async () => {
  const { id } = await rawSession();
  const code = "x = '" + "a".repeat(MAX_BODY) + "'";
  const r = await post({ jsonrpc: "2.0", id: 5, method: "tools/call", params: { name: "execute_python", arguments: { code } } },
                       { "Mcp-Session-Id": id });
  assert.equal(r.status, 413);
});

test("Mcp-Session-Id: required after initialize, unknown is 404, DELETE ends it", async () => {
  const missing = await post({ jsonrpc: "2.0", id: 1, method: "tools/list" });
  assert.equal(missing.status, 400);
  const unknown = await post({ jsonrpc: "2.0", id: 1, method: "tools/list" }, { "Mcp-Session-Id": "mcp-0000" });
  assert.equal(unknown.status, 404);
  assert.equal((await unknown.json()).error.code, -32001);
  const { id } = await rawSession();
  const note = await post({ jsonrpc: "2.0", method: "notifications/initialized" }, { "Mcp-Session-Id": id });
  assert.equal(note.status, 202);
  const ok = await post({ jsonrpc: "2.0", id: 2, method: "tools/list" },
                        { "Mcp-Session-Id": id, "MCP-Protocol-Version": "2025-11-25" });
  assert.equal(ok.status, 200);
  const badVersion = await post({ jsonrpc: "2.0", id: 2, method: "tools/list" },
                                { "Mcp-Session-Id": id, "MCP-Protocol-Version": "1999-01-01" });
  assert.equal(badVersion.status, 400);
  const get = await fetch(`${base}/mcp`, { headers: { Authorization: `Bearer ${TOKEN}`, Accept: "text/event-stream" } });
  assert.equal(get.status, 405);
  const del = await fetch(`${base}/mcp`, { method: "DELETE", headers: { Authorization: `Bearer ${TOKEN}`, "Mcp-Session-Id": id } });
  assert.equal(del.status, 200);
  const after = await post({ jsonrpc: "2.0", id: 3, method: "tools/list" }, { "Mcp-Session-Id": id });
  assert.equal(after.status, 404);
});

test("a foreign Origin is refused, as on every route", async () => {
  const r = await post({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-11-25" } },
                       { Origin: "https://evil.example" });
  assert.equal(r.status, 403);
});

test("GET /v1/tools serves each vendor's format", async () => {
  for (const format of ["openai", "openai-responses", "anthropic", "mcp"]) {
    const r = await fetch(`${base}/v1/tools?format=${format}`, { headers: { Authorization: `Bearer ${TOKEN}` } });
    assert.equal(r.status, 200, format);
    const body = await r.json();
    assert.equal(body.tools.length, 7, format);
  }
  const bad = await fetch(`${base}/v1/tools?format=gemini`, { headers: { Authorization: `Bearer ${TOKEN}` } });
  assert.equal(bad.status, 400);
});
