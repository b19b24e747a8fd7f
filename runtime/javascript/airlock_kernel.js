// airlock's JavaScript (and TypeScript) kernel: one persistent node process in a session's
// sandbox that runs cells sent by the server and reports what they produced, in the runner's
// session protocol (runtime/python/airlock_runner.py, "Sessions"; model/runner_protocol.h).
//
// Started by the sandbox's init as
//
//   /usr/bin/node [flags] --experimental-vm-modules -e <this file> -- <language> <cwd>
//
// with fd 3 the control pipe (the server writes calls: b"C", an 8-byte little-endian length,
// a JSON frame {"frame":"call","code":str,"call":int,"env":{str:str}}) and fd 4 the event
// channel (JSON lines, ASCII). Per call: the cell's stdout and stderr on fds 1 and 2, then
// {"type":"result","is_main_result":true,"data":{"text/plain":...}} for the value of the last
// expression (a string as it is, anything else as util.inspect shows it; undefined: none),
// {"type":"error","name","value","traceback"} for an uncaught error, and always last
// {"type":"end","exit_code":0|1,"call":n}. End of file on fd 3 ends the kernel.
//
// A cell runs as a notebook's: its top-level declarations (var, let, const, function, class,
// import) become globals that later cells see, top-level `await` works, static `import` of
// node's built-in modules (and of anything node resolves from the working directory) becomes
// a dynamic import, and `require` is there. How: the cell is parsed with the acorn parser that
// node carries (its source read from node's own built-in modules; nothing is loaded from
// outside), its top-level declarations are hoisted as globals, and the rest runs in an async
// function whose last expression is its value. TypeScript (language "typescript") is first
// transpiled by Debian's node-typescript (transpileModule: types removed, no type check),
// inside the sandbox, then run the same way.
//
// The call's "env" is set in process.env for that call only: afterwards each variable is put
// back to what it was (or removed), as the Python runner does. SIGINT from the server stops a
// cell: synchronous code through vm's breakOnSigint, a cell waiting on a promise by giving up
// on it (its timers may still fire later); a cell that goes on regardless is the server's to
// restart.
//
// Not a security boundary: the sandbox is. The server treats fd 4 as untrusted.
'use strict';
(function airlockKernel() {
  const fs = require('fs');
  const vm = require('vm');
  const util = require('util');
  const Module = require('module');

  const language = process.argv[process.argv.length - 2] || 'javascript';
  const cwd = process.argv[process.argv.length - 1] || '/home/user';
  const CONTROL = 3;
  const EVENTS = 4;
  const MAX_CALL_BYTES = 256 * 1024 * 1024;
  const TEXT_CAP = 1 << 20;

  // Calls are read as the event loop runs (timers and promises a cell left behind go on
  // between calls), one at a time: the next is taken once the previous one ended.
  function callReader(onCall) {
    const stream = fs.createReadStream(null, { fd: CONTROL, autoClose: false, highWaterMark: 1 << 16 });
    let buffered = Buffer.alloc(0);
    let busy = false;
    let ended = false;
    const pump = async () => {
      if (busy) return;
      busy = true;
      for (;;) {
        if (buffered.length >= 9) {
          if (buffered[0] !== 0x43) process.exit(0);  // 'C': anything else is nonsense
          const size = Number(buffered.readBigUInt64LE(1));
          if (size > MAX_CALL_BYTES) process.exit(0);
          if (buffered.length >= 9 + size) {
            const payload = buffered.subarray(9, 9 + size).toString('utf8');
            buffered = buffered.subarray(9 + size);
            await onCall(payload);
            continue;
          }
        }
        break;
      }
      busy = false;
      if (ended) process.exit(0);  // end of file: the server closed the context
    };
    stream.on('data', (chunk) => {
      buffered = Buffer.concat([buffered, chunk]);
      pump();
    });
    stream.on('end', () => {
      ended = true;
      if (!busy) process.exit(0);
    });
    stream.on('error', () => process.exit(0));
  }

  // JSON with every non-ASCII character escaped: the channel is ASCII lines.
  function encode(event) {
    return JSON.stringify(event).replace(/[\u007f-\uffff]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0')) + '\n';
  }

  function emit(events) {
    const data = Buffer.from(events.map(encode).join(''), 'ascii');
    let off = 0;
    while (off < data.length) {
      try {
        off += fs.writeSync(EVENTS, data, off, data.length - off);
      } catch (e) {
        if (e.code === 'EAGAIN' || e.code === 'EINTR') continue;
        process.exit(0);  // the server is gone
      }
    }
  }

  function cap(text) {
    return text.length > TEXT_CAP ? text.slice(0, TEXT_CAP) + '... [truncated by airlock]' : text;
  }

  // stdout and stderr are flushed (written synchronously by node to pipes) before the end event.
  function flushStreams() {
    return new Promise((resolve) => {
      let left = 2;
      const done = () => { if (--left === 0) resolve(); };
      process.stdout.write('', done);
      process.stderr.write('', done);
    });
  }

  // ---- the parser: node's own acorn, from its built-in modules' sources -------------------
  let acorn = null;
  try {
    const natives = process.binding('natives');
    const source = natives['internal/deps/acorn/acorn/dist/acorn'];
    if (typeof source === 'string') {
      const mod = { exports: {} };
      new Function('exports', 'module', 'define', source)(mod.exports, mod, undefined);
      if (typeof mod.exports.parse === 'function') acorn = mod.exports;
    }
  } catch (e) {
    acorn = null;
  }

  // ---- TypeScript, loaded on first use ---------------------------------------------------
  let ts = null;
  function typescript() {
    if (ts) return ts;
    const where = ['typescript', '/usr/share/nodejs/typescript', '/usr/lib/nodejs/typescript'];
    for (const w of where) {
      try {
        ts = require(w);
        return ts;
      } catch (e) {
        // next
      }
    }
    throw new Error('TypeScript is not installed on the server (Debian package node-typescript)');
  }

  function transpile(code) {
    const t = typescript();
    const out = t.transpileModule(code, {
      reportDiagnostics: true,
      compilerOptions: {
        target: t.ScriptTarget.ES2022,
        module: t.ModuleKind.ESNext,
        sourceMap: false,
        removeComments: false,
        verbatimModuleSyntax: false,
        isolatedModules: true,
      },
    });
    const diags = (out.diagnostics || []).filter((d) => d.category === t.DiagnosticCategory.Error);
    if (diags.length > 0) {
      const d = diags[0];
      const text = t.flattenDiagnosticMessageText(d.messageText, '\n');
      let where = '';
      if (d.file && d.start !== undefined) {
        const pos = d.file.getLineAndCharacterOfPosition(d.start);
        where = ` (${pos.line + 1}:${pos.character + 1})`;
      }
      const err = new SyntaxError(text + where);
      err.airlockNoStack = true;
      throw err;
    }
    // transpileModule marks a module with `export {}`: not a cell's business.
    return out.outputText.replace(/^export \{\};\s*$/m, '');
  }

  // ---- a cell made a script ---------------------------------------------------------------
  function patternNames(node, out) {
    if (!node) return;
    switch (node.type) {
      case 'Identifier': out.push(node.name); break;
      case 'ObjectPattern':
        for (const p of node.properties) patternNames(p.type === 'RestElement' ? p.argument : p.value, out);
        break;
      case 'ArrayPattern': for (const e of node.elements) patternNames(e, out); break;
      case 'RestElement': patternNames(node.argument, out); break;
      case 'AssignmentPattern': patternNames(node.left, out); break;
      default: break;
    }
  }

  let tempCounter = 0;

  // The cell as a script: `var` for every top-level name (so that later cells see them, and
  // running a cell again redeclares nothing), then an async function that runs the cell and
  // returns {value} of its last expression. Returns null when acorn is not there (the cell
  // then runs as a plain script: no top-level await, no static import).
  function toScript(code) {
    if (!acorn) return null;
    const ast = acorn.parse(code, {
      ecmaVersion: 'latest',
      sourceType: 'script',
      allowAwaitOutsideFunction: true,
      allowImportExportEverywhere: true,
      allowReturnOutsideFunction: false,
      allowHashBang: true,
    });
    const names = new Set();
    const edits = [];  // [start, end, text]
    const prologue = [];
    const body = ast.body;
    for (let i = 0; i < body.length; i++) {
      const node = body[i];
      const last = i === body.length - 1;
      const src = (n) => code.slice(n.start, n.end);
      if (node.type === 'ImportDeclaration') {
        const tmp = `__airlock_import_${++tempCounter}`;
        names.add(tmp);
        const parts = [`${tmp} = await import(${JSON.stringify(node.source.value)})`];
        for (const s of node.specifiers) {
          names.add(s.local.name);
          if (s.type === 'ImportDefaultSpecifier') {
            parts.push(`${s.local.name} = ('default' in ${tmp} ? ${tmp}.default : ${tmp})`);
          } else if (s.type === 'ImportNamespaceSpecifier') {
            parts.push(`${s.local.name} = ${tmp}`);
          } else {
            const imported = s.imported.type === 'Identifier' ? s.imported.name : s.imported.value;
            parts.push(`${s.local.name} = ${tmp}[${JSON.stringify(imported)}]`);
          }
        }
        edits.push([node.start, node.end, `void (${parts.join(', ')});`]);
      } else if (node.type === 'ExportNamedDeclaration' || node.type === 'ExportDefaultDeclaration' ||
                 node.type === 'ExportAllDeclaration') {
        const err = new SyntaxError("'export' has no meaning in a cell (line " + node.loc?.start?.line + ')');
        throw err;
      } else if (node.type === 'VariableDeclaration') {
        const assigns = [];
        for (const d of node.declarations) {
          const declared = [];
          patternNames(d.id, declared);
          declared.forEach((n) => names.add(n));
          if (d.init) {
            assigns.push(`(${src(d.id)} = ${src(d.init)})`);
          } else if (node.kind !== 'var') {
            for (const n of declared) assigns.push(`(${n} = undefined)`);
          }
        }
        edits.push([node.start, node.end, assigns.length ? `void (${assigns.join(', ')});` : ';']);
      } else if (node.type === 'FunctionDeclaration' && node.id) {
        names.add(node.id.name);
        // Declared in the async function (hoisted there), published as the global at its start.
        prologue.push(`globalThis[${JSON.stringify(node.id.name)}] = ${node.id.name};`);
      } else if (node.type === 'ClassDeclaration' && node.id) {
        names.add(node.id.name);
        edits.push([node.start, node.end, `${node.id.name} = ${src(node)};`]);
      } else if (last && node.type === 'ExpressionStatement') {
        edits.push([node.start, node.end, `return { value: (${src(node.expression)}) };`]);
      }
    }
    let out = code;
    for (const [start, end, text] of edits.sort((a, b) => b[0] - a[0])) {
      out = out.slice(0, start) + text + out.slice(end);
    }
    // All on the cell's first line, so that an error's line numbers are the cell's own.
    const decl = names.size ? `var ${[...names].join(', ')}; ` : '';
    return `${decl}(async () => { ${prologue.join(' ')} ${out}\n})()`;
  }

  // ---- running a cell ---------------------------------------------------------------------
  globalThis.require = Module.createRequire(cwd.endsWith('/') ? cwd : cwd + '/');

  let interruptCell = null;  // rejects the cell under way (SIGINT)
  process.on('SIGINT', () => {
    if (interruptCell) interruptCell();
  });
  // What a cell leaves behind (a rejected promise no one awaited, an error in a timer) is
  // reported on stderr; it does not end the kernel.
  process.on('unhandledRejection', (reason) => {
    process.stderr.write('Unhandled promise rejection: ' + (reason && reason.stack ? reason.stack : util.inspect(reason)) + '\n');
  });
  process.on('uncaughtException', (err) => {
    process.stderr.write('Uncaught ' + (err && err.stack ? err.stack : util.inspect(err)) + '\n');
  });

  function display(value) {
    if (typeof value === 'string') return value;
    return util.inspect(value, { depth: 4, maxArrayLength: 100, maxStringLength: 10000, breakLength: 100 });
  }

  function errorEvent(err) {
    if (err && typeof err === 'object' && 'message' in err) {
      const name = err.name || 'Error';
      const value = String(err.message);
      const stack = err.airlockNoStack ? `${name}: ${value}` : String(err.stack || `${name}: ${value}`);
      // Frames of the kernel itself are not the cell's.
      const traceback = stack.split('\n')
        .filter((l) => !/^\s+at /.test(l) || !/airlockKernel|\[eval\]|\(node:|at node:|sigintHandlersWrap/.test(l))
        .join('\n');
      return { type: 'error', name: cap(name), value: cap(value), traceback: cap(traceback) };
    }
    return { type: 'error', name: 'Error', value: cap('Uncaught ' + display(err)), traceback: '' };
  }

  function setEnv(env) {
    const before = {};
    for (const [k, v] of Object.entries(env || {})) {
      if (typeof k !== 'string' || typeof v !== 'string') continue;
      before[k] = Object.prototype.hasOwnProperty.call(process.env, k) ? process.env[k] : undefined;
      process.env[k] = v;
    }
    return before;
  }

  function restoreEnv(before) {
    for (const [k, v] of Object.entries(before)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }

  async function runCell(code) {
    let source = code;
    if (language === 'typescript') source = transpile(source);
    let script = toScript(source);
    let wrapped = script !== null;
    if (!wrapped) script = source;
    const compiled = new vm.Script(script, {
      filename: 'cell.' + (language === 'typescript' ? 'ts' : 'js'),
      // The kernel's own loader (node is started with --experimental-vm-modules for it).
      importModuleDynamically: (specifier) => import(specifier),
    });
    let out = compiled.runInThisContext({ breakOnSigint: true, displayErrors: false });
    if (wrapped) {
      const interrupted = new Promise((_, reject) => {
        interruptCell = () => {
          const e = new Error('the cell was interrupted (SIGINT)');
          e.name = 'KeyboardInterrupt';
          e.airlockNoStack = true;
          reject(e);
        };
      });
      try {
        out = await Promise.race([out, interrupted]);
      } finally {
        interruptCell = null;
      }
      return out && typeof out === 'object' && 'value' in out ? out.value : undefined;
    }
    return out;
  }

  async function call(payload) {
    let callNo = null;
    let exitCode = 0;
    const events = [];
    let before = {};
    try {
      const frame = JSON.parse(payload);
      if (typeof frame.call === 'number') callNo = frame.call;
      if (typeof frame.code !== 'string') throw new Error('a call frame needs code (a string)');
      before = setEnv(frame.env);
      const value = await runCell(frame.code);
      if (value !== undefined) {
        events.push({ type: 'result', is_main_result: true, data: { 'text/plain': cap(display(value)) } });
      }
    } catch (err) {
      exitCode = 1;
      if (err && err.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') {
        events.push({ type: 'error', name: 'KeyboardInterrupt', value: 'the cell was interrupted (SIGINT)', traceback: '' });
      } else {
        events.push(errorEvent(err));
      }
    } finally {
      restoreEnv(before);
    }
    await flushStreams();
    const end = { type: 'end', exit_code: exitCode };
    if (callNo !== null) end.call = callNo;
    events.push(end);
    emit(events);
  }

  function serve() {
    try {
      process.chdir(cwd);
    } catch (e) {
      process.stderr.write(`airlock: the context's working directory ${cwd}: ${e.message}\n`);
      process.exit(2);
    }
    callReader(call);
  }

  serve();
})();
