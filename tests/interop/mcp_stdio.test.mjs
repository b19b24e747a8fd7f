// The official MCP TypeScript SDK, unmodified, as a client of `airlock mcp`
// over stdio (issue 12): the client starts airlock as a subprocess, as Claude
// Desktop, the OpenAI Agents SDK or Cursor do.
//
//   AIRLOCK_BINARY=build/src/cli/airlock node --test tests/interop/
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const here = dirname(fileURLToPath(import.meta.url));
const binary = process.env.AIRLOCK_BINARY || join(here, "../../build/src/cli/airlock");
const profiles = join(here, "../../profiles");

let client;
let stderr = "";

before(async () => {
  assert.ok(existsSync(binary), `airlock binary not found at ${binary} (set AIRLOCK_BINARY)`);
  const transport = new StdioClientTransport({
    command: binary,
    args: ["mcp", "--profiles", profiles, "--pool-size", "1", "--wait-ready", "45"],
    stderr: "pipe",
  });
  transport.stderr?.on("data", (d) => { stderr += d.toString(); });
  client = new Client({ name: "airlock-interop", version: "1.0.0" });
  await client.connect(transport);
});

after(async () => {
  await client?.close();
});

const text = (result) => result.content.filter((c) => c.type === "text").map((c) => c.text).join("\n");

test("initialize negotiates a protocol version the SDK speaks and names the server", () => {
  const info = client.getServerVersion();
  assert.equal(info.name, "airlock");
  assert.ok(client.getServerCapabilities().tools, "tools capability");
});

test("tools/list offers execute_python, the session tools and list_profiles with schemas and honest annotations", async () => {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  assert.deepEqual(names, ["close_session", "create_session", "download_file", "execute_python", "list_profiles",
                           "run_command", "upload_file"]);
  assert.equal(tools.find((t) => t.name === "close_session").annotations.destructiveHint, true);
  const exec = tools.find((t) => t.name === "execute_python");
  assert.deepEqual(exec.inputSchema.required, ["code"]);
  assert.equal(exec.inputSchema.additionalProperties, false);
  assert.equal(exec.annotations.openWorldHint, false);
  assert.equal(exec.annotations.destructiveHint, false);
  assert.equal(exec.outputSchema.type, "object");
});

test("execute_python returns stdout, the last expression and structured content", async () => {
  const r = await client.callTool({ name: "execute_python", arguments: { code: "print('hello')\n6 * 7" } });
  assert.equal(r.isError, false, text(r));
  assert.match(text(r), /hello/);
  assert.match(text(r), /result: 42/);
  assert.equal(r.structuredContent.stdout, "hello\n");
  assert.equal(r.structuredContent.result, "42");
  assert.equal(r.structuredContent.exit_code, 0);
});

test("an exception is isError with the traceback of the user's own lines", async () => {
  const r = await client.callTool({ name: "execute_python", arguments: { code: "x = 1\nx / 0" } });
  assert.equal(r.isError, true);
  assert.match(text(r), /ZeroDivisionError: division by zero/);
  assert.match(text(r), /line 2/);
  assert.equal(r.structuredContent.error.name, "ZeroDivisionError");
});

test("a matplotlib figure comes back as image content (image/png)", async () => {
  const code = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()\nprint('plotted')";
  const r = await client.callTool({ name: "execute_python", arguments: { code, profile: "visualization", timeout_seconds: 30 } });
  assert.equal(r.isError, false, text(r));
  const images = r.content.filter((c) => c.type === "image");
  assert.equal(images.length, 1, JSON.stringify(r.content.map((c) => c.type)));
  assert.equal(images[0].mimeType, "image/png");
  assert.equal(Buffer.from(images[0].data, "base64").subarray(1, 4).toString(), "PNG");
});

test("a rejected import is isError and names the violation with its line and column", async () => {
  const r = await client.callTool({ name: "execute_python",
                                    arguments: { code: "import os\nos.system('id')", profile: "minimal" } });
  assert.equal(r.isError, true);
  assert.match(text(r), /line 1, column 8: import of 'os' is not allowed/);
  // And where it would run (issue 25).
  assert.match(text(r), /in profile 'minimal'; allowed in: general/);
  assert.deepEqual(r.structuredContent.violations[0].allowed_in, ["general"]);
  assert.ok(r.structuredContent.violations.length >= 1);
});

test("a call that names no profile runs under general, MCP's default: open(), import sys", async () => {
  const code = "import sys\nwith open('note.txt', 'w') as f:\n    f.write('caf\u00e9')\nopen('note.txt').read()";
  const r = await client.callTool({ name: "execute_python", arguments: { code } });
  assert.equal(r.isError, false, text(r));
  assert.equal(r.structuredContent.result, "'caf\u00e9'");
});

test("a timeout kills the run and says so", async () => {
  const r = await client.callTool({ name: "execute_python", arguments: { code: "while True:\n    pass", timeout_seconds: 1 } });
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent.kill_reason, "timeout");
  assert.equal(r.structuredContent.timed_out, true);
  assert.match(text(r), /killed \(timeout\)/);
});

test("an escape attempt is stopped by the kernel, not only the analyzer", async () => {
  // The general profile does not enforce the import policy: only the sandbox stands in the way.
  const code = [
    "import os, socket",
    "try:",
    "    socket.create_connection(('127.0.0.1', 22), timeout=2)",
    "    print('CONNECTED')",
    "except OSError as e:",
    "    print('DENIED', e.errno)",
    "print(open('/etc/shadow').read() if os.path.exists('/etc/shadow') else 'NO SHADOW')",
  ].join("\n");
  const r = await client.callTool({ name: "execute_python", arguments: { code, profile: "general" } });
  assert.doesNotMatch(text(r), /CONNECTED/);
  assert.match(text(r), /DENIED/);
  assert.match(text(r), /NO SHADOW/);
});

test("bad arguments and unknown tools are answered as the spec says", async () => {
  const bad = await client.callTool({ name: "execute_python", arguments: { code: 5 } });
  assert.equal(bad.isError, true);
  assert.match(text(bad), /code: must be a string/);
  const unknownProfile = await client.callTool({ name: "execute_python", arguments: { code: "1", profile: "nope" } });
  assert.equal(unknownProfile.isError, true);
  assert.match(text(unknownProfile), /not a profile/);
  await assert.rejects(client.callTool({ name: "no_such_tool", arguments: {} }), /Unknown tool/);
});

test("a session over stdio keeps state, moves files, and closes", async () => {
  const made = await client.callTool({ name: "create_session", arguments: { profile: "general" } });
  assert.equal(made.isError, false, text(made));
  const sid = made.structuredContent.session_id;
  let r = await client.callTool({ name: "execute_python", arguments: { session_id: sid, code: "import math\nr = math.sqrt(16)" } });
  assert.equal(r.isError, false, text(r));
  r = await client.callTool({ name: "execute_python", arguments: { session_id: sid, code: "r * 10" } });
  assert.equal(r.structuredContent.result, "40.0", text(r));
  assert.equal(r.structuredContent.session.execution_count, 2);
  const up = await client.callTool({ name: "upload_file",
                                     arguments: { session_id: sid, path: "in.bin", content: Buffer.from([0, 1, 2, 255]).toString("base64"), encoding: "base64" } });
  assert.equal(up.isError, false, text(up));
  r = await client.callTool({ name: "execute_python", arguments: { session_id: sid, code: "list(open('in.bin', 'rb').read())" } });
  assert.equal(r.structuredContent.result, "[0, 1, 2, 255]", text(r));
  // run_command over stdio (a blocking run): the same files, its exit code and output.
  const cmd = await client.callTool({ name: "run_command", arguments: { session_id: sid, command: "wc -c < in.bin; echo e >&2; exit 2" } });
  assert.equal(cmd.isError, false, text(cmd));
  assert.deepEqual([cmd.structuredContent.exit_code, cmd.structuredContent.stdout, cmd.structuredContent.stderr], [2, "4\n", "e\n"]);
  const down = await client.callTool({ name: "download_file", arguments: { session_id: sid, path: "in.bin" } });
  assert.equal(down.structuredContent.encoding, "base64");
  assert.equal(down.content[0].type, "resource");
  assert.deepEqual([...Buffer.from(down.structuredContent.content, "base64")], [0, 1, 2, 255]);
  const escape = await client.callTool({ name: "download_file", arguments: { session_id: sid, path: "../etc/passwd" } });
  assert.equal(escape.isError, true);
  const closed = await client.callTool({ name: "close_session", arguments: { session_id: sid } });
  assert.equal(closed.isError, false, text(closed));
  r = await client.callTool({ name: "execute_python", arguments: { session_id: sid, code: "r" } });
  assert.equal(r.isError, true);
});

test("list_profiles lists the shipped profiles and their imports", async () => {
  const r = await client.callTool({ name: "list_profiles", arguments: {} });
  assert.equal(r.isError, false);
  const names = r.structuredContent.profiles.map((p) => p.name).sort();
  assert.deepEqual(names, ["data-science", "general", "minimal", "visualization"]);
  assert.match(text(r), /general \(default\)/);
});

test("nothing but protocol messages reached stdout (the SDK would have failed to parse)", () => {
  assert.match(stderr, /mcp: serving on stdio/);
});
