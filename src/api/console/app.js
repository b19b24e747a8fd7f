// The airlock web console. Served from the binary (src/api/console/) under a
// strict Content-Security-Policy: this file is the only script, nothing is
// inline, and everything a run or a request produced is put into the page as
// text (textContent) or as a data: URL of PNG bytes, never as HTML.
//
// The token the person gives is kept in sessionStorage (this tab only) and
// sent in an Authorization header on every API call; no cookie is ever set,
// so another site cannot make the browser act with it (no CSRF), and the
// server's Host/Origin rules refuse what a rebinding page would send.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const TOKEN_KEY = "airlock-token";

  function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

  function headers(extra) {
    const h = Object.assign({}, extra || {});
    const t = token();
    if (t) h["Authorization"] = "Bearer " + t;
    return h;
  }

  async function api(method, path, body, extraHeaders) {
    const init = { method: method, headers: headers(extraHeaders), cache: "no-store", credentials: "omit" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const res = await fetch(path, init);
    let data = null;
    const type = res.headers.get("Content-Type") || "";
    if (type.indexOf("application/json") === 0) data = await res.json();
    return { status: res.status, data: data, res: res };
  }

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }

  // ---- the editor ------------------------------------------------------------
  // CodeMirror (editor.js, bundled from pinned npm packages) when it loaded;
  // the plain textarea otherwise.
  const editor = window.AirlockEditor ? window.AirlockEditor.mount($("code"), "python") : null;
  function getCode() { return editor ? editor.getCode() : $("code").value; }
  function setCode(text) { if (editor) editor.setCode(text); else $("code").value = text; }
  // For people scripting the page (and the browser test): the editor's text.
  window.airlockConsole = { getCode: getCode, setCode: setCode };

  const SAMPLES = {
    python: 'print("hello from the sandbox")',
    javascript: 'console.log("hello from the sandbox", process.version)',
    bash: 'echo "hello from the sandbox: $BASH_VERSION"',
  };

  function pathUrl(path) { return path.split("/").map(encodeURIComponent).join("/"); }

  function errorText(r) {
    if (r.data && r.data.error) return r.status + ": " + r.data.error;
    return "HTTP " + r.status;
  }

  // ---- token ---------------------------------------------------------------

  function showTokenState(text) { $("token-state").textContent = text; }

  $("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const t = $("token").value.trim();
    if (t) sessionStorage.setItem(TOKEN_KEY, t);
    $("token").value = "";
    refreshAll();
  });
  $("token-forget").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    showTokenState("no token");
    refreshAll();
  });

  // ---- profiles ------------------------------------------------------------

  let profiles = {};  // name -> the profile as GET /v1/profiles gives it

  // The languages of the picked profile (its first is the default) that a
  // one-shot run takes: typescript, r and java run only in sessions (POST
  // /v1/sessions with "language"), which the console's pickers do not make.
  const ONE_SHOT_LANGUAGES = ["python", "javascript", "bash"];
  function fillLanguages() {
    const sel = $("language");
    const keep = sel.value;
    const p = profiles[$("profile").value];
    const langs = ((p && p.languages) || ["python"]).filter((l) => ONE_SHOT_LANGUAGES.indexOf(l) >= 0);
    if (!langs.length) langs.push("python");
    clear(sel);
    for (const l of langs) {
      const o = el("option", l);
      o.value = l;
      sel.appendChild(o);
    }
    sel.value = langs.indexOf(keep) >= 0 ? keep : langs[0];
    languageChanged();
  }

  let shownLanguage = "python";
  function languageChanged() {
    const lang = $("language").value || "python";
    if (lang === shownLanguage) return;
    // A sample of the new language replaces the previous one's, never the person's own code.
    const code = getCode().trim();
    if (!code || code === SAMPLES[shownLanguage]) setCode(SAMPLES[lang]);
    shownLanguage = lang;
    if (editor) editor.setLanguage(lang);
  }

  $("profile").addEventListener("change", fillLanguages);
  $("language").addEventListener("change", languageChanged);

  async function loadProfiles() {
    const r = await api("GET", "/v1/profiles");
    if (r.status === 401) { showTokenState("a token is needed"); return false; }
    if (r.status !== 200) { showTokenState(errorText(r)); return false; }
    showTokenState(token() ? "token set (this tab only)" : "no token needed");
    const sel = $("profile");
    const keep = sel.value;
    clear(sel);
    profiles = {};
    for (const p of r.data.profiles) {
      profiles[p.name] = p;
      const o = el("option", p.name + (p.approval && p.approval.policy !== "never" ? " (approval: " + p.approval.policy + ")" : ""));
      o.value = p.name;
      sel.appendChild(o);
    }
    sel.value = keep || r.data.default;
    fillLanguages();
    return true;
  }

  // ---- running code --------------------------------------------------------

  function resetOutput() {
    for (const id of ["stdout", "stderr", "result", "report"]) $(id).textContent = "";
    clear($("figures"));
    clear($("files"));
  }

  function b64ToBytes(b64) {
    const bin = atob(b64);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  // The final response of a run (/v1/execute's shape).
  function showResponse(resp) {
    $("stdout").textContent = resp.stdout || "";
    $("stderr").textContent = resp.stderr || "";
    let result = resp.result !== undefined && resp.result !== null ? String(resp.result) : "";
    if (resp.error) result += (result ? "\n" : "") + resp.error.name + ": " + resp.error.value;
    $("result").textContent = result;
    const figs = $("figures");
    clear(figs);
    for (const r of resp.results || []) {
      const png = r.data && r.data["image/png"];
      if (typeof png === "string" && /^[A-Za-z0-9+/=\s]+$/.test(png)) {
        const img = document.createElement("img");
        img.alt = "figure";
        img.className = "figure";
        img.src = "data:image/png;base64," + png.replace(/\s/g, "");
        figs.appendChild(img);
      }
    }
    const files = $("files");
    clear(files);
    if ((resp.files || []).length) files.appendChild(el("h3", "Files"));
    for (const f of resp.files || []) {
      const a = el("a", f.path + " (" + f.size + " bytes)");
      const bytes = b64ToBytes(f.content || "");  // returned files are always base64
      a.href = URL.createObjectURL(new Blob([bytes], { type: "application/octet-stream" }));
      a.download = f.path.split("/").pop();
      files.appendChild(a);
      files.appendChild(el("br"));
    }
    const iso = resp.isolation || {};
    // isolation: {layer: {enforced, detail}, mode, ...}: the layers that were in force.
    const layers = Object.keys(iso).filter((k) => iso[k] && typeof iso[k] === "object" && "enforced" in iso[k])
      .map((k) => k + (iso[k].enforced ? "" : " (NOT enforced)")).join(", ");
    const usage = resp.usage || {};
    $("report").textContent =
      "exit " + resp.exit_code + (resp.kill_reason ? " (killed: " + resp.kill_reason + ")" : "") +
      " · " + (resp.duration_ms !== undefined ? resp.duration_ms.toFixed(1) + " ms" : "") +
      " · cpu " + usage.cpu_ms + " ms · max rss " + usage.max_rss_kb + " KiB" +
      "\nprofile " + (resp.profile ? resp.profile.name : "") + " · mode " + (iso.mode || "") +
      (layers ? "\nlayers " + layers : "") +
      ((resp.warnings || []).length ? "\nwarnings " + resp.warnings.map((w) => w.rule).join(", ") : "");
  }

  async function run() {
    resetOutput();
    const state = $("run-state");
    state.textContent = "running…";
    $("run").disabled = true;
    try {
      const session = $("target").value;
      const body = { code: getCode() };
      if (!session) {
        body.profile = $("profile").value;
        body.language = $("language").value;
      }
      const t = parseFloat($("timeout").value);
      if (t > 0) body.timeout = t;
      const url = session ? "/v1/sessions/" + encodeURIComponent(session) + "/execute" : "/v1/execute";
      const res = await fetch(url, {
        method: "POST", cache: "no-store", credentials: "omit",
        headers: headers({ "Content-Type": "application/json", "Accept": "application/x-ndjson" }),
        body: JSON.stringify(body),
      });
      const type = res.headers.get("Content-Type") || "";
      if (res.status === 200 && type.indexOf("application/x-ndjson") === 0) {
        const end = await readStream(res);
        state.textContent = end && end.execution_count ? "done (call " + end.execution_count + " of the session)" : "done";
      } else {
        const data = type.indexOf("application/json") === 0 ? await res.json() : null;
        if (res.status === 202 && data) {
          state.textContent = "held for approval (" + data.approval_id + "); waiting for a decision…";
          await followApproval(data.approval_id, state);
        } else if (res.status === 200 && data) {
          showResponse(data);
          state.textContent = "done";
        } else {
          state.textContent = errorText({ status: res.status, data: data });
          if (data && data.violations) {
            $("stderr").textContent = data.violations.map((v) => "line " + v.line + ": " + v.message + " [" + v.rule + "]").join("\n");
          }
        }
      }
    } catch (e) {
      state.textContent = "failed: " + e;
    } finally {
      $("run").disabled = false;
      refreshRuns();
      if ($("target").value) refreshSessions(true);
    }
  }

  // Output events as they come; the last event is the whole response.
  async function readStream(res) {
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    let end = null;
    for (;;) {
      const chunk = await reader.read();
      if (chunk.done) break;
      buf += dec.decode(chunk.value, { stream: true });
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (!line.trim()) continue;
        const ev = JSON.parse(line);
        if (ev.type === "stdout") $("stdout").textContent += ev.text;
        else if (ev.type === "stderr") $("stderr").textContent += ev.text;
        else if (ev.type === "end_of_execution") { showResponse(ev); end = ev; }
      }
    }
    return end;
  }

  async function followApproval(id, state) {
    for (;;) {
      await new Promise((ok) => setTimeout(ok, 1000));
      const r = await api("GET", "/v1/approvals/" + encodeURIComponent(id));
      if (r.status !== 200) { state.textContent = errorText(r); return; }
      const a = r.data;
      if (a.status === "ran" && a.result) { showResponse(a.result); state.textContent = "approved by " + a.decided_by + "; ran"; return; }
      if (a.status === "denied" || a.status === "expired" || a.status === "failed") {
        state.textContent = a.status + (a.error ? ": " + a.error : "");
        return;
      }
      state.textContent = "held for approval (" + id + "): " + a.status;
    }
  }

  $("run").addEventListener("click", run);
  // Without CodeMirror, Tab inserts four spaces in the textarea (Shift+Tab still moves focus out).
  $("code").addEventListener("keydown", (ev) => {
    if (editor || ev.key !== "Tab" || ev.shiftKey) return;
    ev.preventDefault();
    const t = ev.target;
    const s = t.selectionStart;
    t.value = t.value.slice(0, s) + "    " + t.value.slice(t.selectionEnd);
    t.selectionStart = t.selectionEnd = s + 4;
  });

  // ---- sessions ------------------------------------------------------------

  // Run in: a new one-shot sandbox, or one of the caller's live sessions
  // (whose profile is its own: the pickers do not apply then).
  function targetChanged() {
    const inSession = !!$("target").value;
    $("profile").disabled = inSession;
    $("language").disabled = inSession;
    if (inSession && $("language").value !== "python") {
      $("language").value = "python";
      languageChanged();
    }
  }
  $("target").addEventListener("change", targetChanged);

  async function newSession() {
    const state = $("sessions-state");
    const r = await api("POST", "/v1/sessions", { profile: $("profile").value });
    if (r.status !== 201) { state.textContent = "could not create a session: " + errorText(r); return; }
    state.textContent = "created " + r.data.id;
    await refreshSessions(false);
    $("target").value = r.data.id;
    targetChanged();
  }

  async function closeSession(id) {
    const r = await api("DELETE", "/v1/sessions/" + encodeURIComponent(id));
    $("sessions-state").textContent = r.status === 204 ? "closed " + id : "could not close " + id + ": " + errorText(r);
    refreshSessions(false);
  }

  async function download(id, path) {
    const res = await fetch("/v1/sessions/" + encodeURIComponent(id) + "/files/" + pathUrl(path),
                            { headers: headers(), cache: "no-store", credentials: "omit" });
    if (res.status !== 200) { $("sessions-state").textContent = "download of " + path + ": HTTP " + res.status; return; }
    const blob = await res.blob();
    const a = document.createElement("a");
    a.href = URL.createObjectURL(new Blob([blob], { type: "application/octet-stream" }));
    a.download = path.split("/").pop();
    document.body.appendChild(a);
    a.click();
    a.remove();
  }

  async function showFiles(id, box) {
    const r = await api("GET", "/v1/sessions/" + encodeURIComponent(id) + "/files");
    if (r.status !== 200) { clear(box); box.appendChild(el("div", "files: " + errorText(r))); return; }
    const files = r.data.files.filter((f) => f.type === "file");
    // Redrawn only when the listing changed (a link being clicked stays the same element).
    const signature = JSON.stringify(files.map((f) => [f.path, f.size]));
    if (box.dataset.signature === signature) return;
    box.dataset.signature = signature;
    clear(box);
    box.appendChild(el("div", files.length ? "files in /tmp:" : "no files in /tmp yet", "muted"));
    const ul = el("ul");
    for (const f of files) {
      const li = el("li");
      const a = el("a", f.path);
      a.href = "#";
      a.className = "session-file";
      a.addEventListener("click", (ev) => { ev.preventDefault(); download(id, f.path); });
      li.appendChild(a);
      li.appendChild(document.createTextNode(" (" + f.size + " bytes)"));
      ul.appendChild(li);
    }
    box.appendChild(ul);
  }

  function sessionCard(s) {
    const card = el("div", null, "session");
    card.dataset.id = s.id;
    const head = el("div");
    head.appendChild(el("span", s.id, "id"));
    card.appendChild(head);
    card.appendChild(el("div", "", "summary"));
    for (const [label, fn] of [["Run here", () => { $("target").value = s.id; targetChanged(); }],
                               ["Files", () => showFiles(s.id, card.querySelector(".files"))],
                               ["Close", () => closeSession(s.id)]]) {
      const b = el("button", label, label === "Close" ? "close" : label === "Files" ? "files-button" : "use");
      b.type = "button";
      b.addEventListener("click", fn);
      card.appendChild(b);
    }
    card.appendChild(el("div", null, "files"));
    return card;
  }

  // Redraws the list in place: a card keeps its file listing between refreshes;
  // `files` re-reads the listing of the session runs go to.
  async function refreshSessions(files) {
    const r = await api("GET", "/v1/sessions");
    const box = $("sessions");
    const state = $("sessions-state");
    if (r.status !== 200) { clear(box); state.textContent = errorText(r); return; }
    const list = r.data.sessions;
    const ids = new Set(list.map((s) => s.id));
    for (const card of Array.from(box.children)) if (!ids.has(card.dataset.id)) box.removeChild(card);
    for (const s of list) {
      let card = box.querySelector('[data-id="' + CSS.escape(s.id) + '"]');
      if (!card) { card = sessionCard(s); box.appendChild(card); }
      card.classList.toggle("dead", s.state === "dead");
      card.querySelector(".summary").textContent = "profile " + s.profile + " · " + s.state + " · " + s.execution_count +
        " call(s) · expires " + s.expires_at + (s.end_reason ? " · " + s.end_reason : "");
    }
    // "Run in": rebuilt only when the sessions changed (an open list is not closed under the person).
    const target = $("target");
    const keep = target.value;
    const have = Array.from(target.options).slice(1).map((o) => o.value).join(" ");
    if (have !== list.map((s) => s.id).join(" ")) {
      while (target.options.length > 1) target.remove(1);
      for (const s of list) {
        const o = el("option", "session " + s.id.slice(0, 16) + "… (" + s.profile + ")");
        o.value = s.id;
        target.appendChild(o);
      }
    }
    target.value = ids.has(keep) ? keep : "";
    targetChanged();
    if (files && target.value) {
      const card = box.querySelector('[data-id="' + CSS.escape(target.value) + '"]');
      if (card) showFiles(target.value, card.querySelector(".files"));
    }
  }

  $("session-new").addEventListener("click", newSession);
  $("sessions-refresh").addEventListener("click", () => refreshSessions(false));

  // ---- approvals -----------------------------------------------------------

  async function refreshApprovals() {
    const r = await api("GET", "/v1/approvals");
    const box = $("approvals");
    const state = $("approvals-state");
    if (r.status !== 200) {
      clear(box);
      state.textContent = r.status === 403 ? "this token may not approve" : errorText(r);
      return;
    }
    const list = r.data.approvals;
    state.textContent = list.length ? list.length + " waiting (refreshed every 2 s)" : "nothing waiting";
    // Keep cards being typed into; drop decided ones; add new ones.
    const ids = new Set(list.map((a) => a.approval_id));
    for (const card of Array.from(box.children)) {
      if (!ids.has(card.dataset.id)) box.removeChild(card);
    }
    for (const a of list) {
      if (box.querySelector('[data-id="' + CSS.escape(a.approval_id) + '"]')) continue;
      // A list carries no code (each held request's could be a megabyte): a
      // new card reads its approval, code included, by id.
      const one = await api("GET", "/v1/approvals/" + encodeURIComponent(a.approval_id));
      if (one.status !== 200 || box.querySelector('[data-id="' + CSS.escape(a.approval_id) + '"]')) continue;
      box.appendChild(approvalCard(one.data));
    }
  }

  // Invisible characters (Unicode category Cf: bidirectional controls,
  // zero-width characters, tags; and the Hangul fillers, drawn as nothing) in
  // code or a file are shown as marked escapes, so the person deciding reads
  // what will run, not a reordered or shortened line (the server escapes them
  // in its JSON too, and the analyzer reports them as "invisible-character").
  const INVISIBLE = /[\p{Cf}\u115F\u1160\u3164\uFFA0]/gu;

  function markedText(tag, text, cls) {
    const box = el(tag, null, cls);
    let last = 0;
    let count = 0;
    for (const m of text.matchAll(INVISIBLE)) {
      box.appendChild(document.createTextNode(text.slice(last, m.index)));
      const hex = m[0].codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
      const mark = el("span", "\u27e8U+" + hex + "\u27e9", "invisible");
      mark.title = "invisible character U+" + hex + ": not shown by editors, can reorder the line";
      box.appendChild(mark);
      last = m.index + m[0].length;
      count++;
    }
    box.appendChild(document.createTextNode(text.slice(last)));
    box.dataset.invisible = String(count);
    return box;
  }

  function bytesText(n) {
    if (n >= 1 << 20 && n % (1 << 20) === 0) return n / (1 << 20) + " MiB";
    if (n >= 1 << 10 && n % (1 << 10) === 0) return n / (1 << 10) + " KiB";
    return n + " bytes";
  }

  function limitsText(l) {
    return "timeout " + l.timeout_s + " s · memory " + bytesText(l.memory_bytes) + " · cpu " + l.cpu_cores +
      " core(s), " + l.cpu_time_s + " s of CPU · " + l.pids + " processes · disk " + bytesText(l.disk_bytes) +
      " · output " + bytesText(l.output_bytes) + " per stream";
  }

  async function downloadApprovalFile(f) {
    const r = await api("GET", f.download);
    if (r.status !== 200) { $("approvals-state").textContent = "download of " + f.path + ": " + errorText(r); return; }
    const a = document.createElement("a");
    a.href = URL.createObjectURL(new Blob([b64ToBytes(r.data.content_base64)], { type: "application/octet-stream" }));
    a.download = f.path.split("/").pop();
    document.body.appendChild(a);
    a.click();
    a.remove();
  }

  // The whole request, from GET /v1/approvals/{id}: what will run is the code,
  // its language, its limits and its input files, and the decision names all
  // of it (request_sha256).
  async function fillApprovalCard(card, id) {
    const r = await api("GET", "/v1/approvals/" + encodeURIComponent(id));
    clear(card);
    if (r.status !== 200) { card.appendChild(el("div", id + ": " + errorText(r), "finding")); return; }
    const a = r.data;
    card.appendChild(el("div", a.approval_id + " · profile " + a.profile + " · " + a.language + " · from " +
                        (a.requested_by || "(no token)") + " · expires " + a.expires_at));
    card.appendChild(el("div", limitsText(a.limits), "limits"));
    card.appendChild(el("div", "request sha256 " + a.request_sha256, "muted"));
    const code = markedText("pre", a.code, "code");
    const files = (a.files || []).map((f) => ({ f: f, view: typeof f.content === "string" ? markedText("pre", f.content, "file-content") : null }));
    const invisible = Number(code.dataset.invisible) +
      files.reduce((n, x) => n + (x.view ? Number(x.view.dataset.invisible) : 0), 0);
    if (invisible > 0) {
      card.appendChild(el("div", invisible + " invisible character(s), shown as \u27e8U+\u2026\u27e9: the text " +
                          "reads differently from how it runs", "invisible-warning"));
    }
    for (const f of a.findings) card.appendChild(el("div", "line " + f.line + ": " + f.message + " [" + f.rule + "]", "finding"));
    card.appendChild(code);
    if (files.length) {
      card.appendChild(el("h3", files.length + " input file(s), placed in the working directory before the code runs"));
      for (const x of files) {
        const box = el("div", null, "approval-file");
        box.dataset.path = x.f.path;
        box.appendChild(el("div", x.f.path + " · " + bytesText(x.f.size) + " · sha256 " + x.f.sha256, "file-name"));
        if (x.view) {
          box.appendChild(x.view);
        } else if (x.f.download) {
          const link = el("a", "download (binary or larger than shown here)");
          link.href = "#";
          link.className = "file-download";
          link.addEventListener("click", (ev) => { ev.preventDefault(); downloadApprovalFile(x.f); });
          box.appendChild(link);
        }
        card.appendChild(box);
      }
    }
    const reason = el("input");
    reason.placeholder = "reason (optional)";
    reason.className = "reason";
    card.appendChild(reason);
    for (const decision of ["approve", "deny"]) {
      const b = el("button", decision === "approve" ? "Approve" : "Deny", decision);
      b.type = "button";
      b.addEventListener("click", () => decide(a, decision, reason.value, card));
      card.appendChild(b);
    }
  }

  function approvalCard(a) {
    const card = el("div", null, "approval");
    card.dataset.id = a.approval_id;
    card.appendChild(el("div", a.approval_id + ": loading\u2026", "muted"));
    fillApprovalCard(card, a.approval_id);
    return card;
  }

  async function decide(a, decision, reason, card) {
    // The decision names the request it was made on (code, language, limits,
    // files): the server refuses it (409) if the held request is not this one.
    const body = { decision: decision, request_sha256: a.request_sha256 };
    if (reason) body.reason = reason;
    const r = await api("POST", "/v1/approvals/" + encodeURIComponent(a.approval_id), body);
    const line = el("div", null, "decision");
    line.dataset.id = a.approval_id;
    $("decisions").prepend(line);
    if (r.status !== 200) {
      line.textContent = a.approval_id + ": " + errorText(r);
      return;
    }
    if (card.parentNode) card.parentNode.removeChild(card);
    refreshApprovals();
    line.textContent = a.approval_id + ": " + r.data.status;
    line.classList.add(r.data.status);
    if (r.data.status === "approved") {
      for (let i = 0; i < 120; i++) {
        await new Promise((ok) => setTimeout(ok, 500));
        const g = await api("GET", "/v1/approvals/" + encodeURIComponent(a.approval_id));
        if (g.status !== 200) break;
        if (g.data.status === "ran" || g.data.status === "failed") {
          line.className = "decision " + g.data.status;
          line.textContent = a.approval_id + ": " + g.data.status +
            (g.data.result ? " · exit " + g.data.result.exit_code + " · stdout: " + g.data.result.stdout : "") +
            (g.data.error ? " · " + g.data.error : "");
          break;
        }
      }
      refreshRuns();
    }
  }

  $("approvals-refresh").addEventListener("click", refreshApprovals);

  // ---- recent runs ---------------------------------------------------------

  async function refreshRuns() {
    const r = await api("GET", "/v1/runs");
    const body = $("runs").tBodies[0];
    if (r.status !== 200) { $("runs-state").textContent = errorText(r); return; }
    $("runs-state").textContent = r.data.runs.length + " most recent (kept in the server's memory)";
    clear(body);
    for (const rec of r.data.runs) {
      const tr = el("tr");
      tr.className = "verdict-" + rec.verdict;
      const cells = [rec.time, rec.client && rec.client.token, rec.route, rec.profile, rec.verdict, rec.http_status,
                     rec.exit_code, rec.run_ms ? rec.run_ms.toFixed(1) : "", (rec.code_sha256 || "").slice(0, 12)];
      cells.forEach((c, i) => tr.appendChild(el("td", c === null || c === undefined ? "" : c, i === 8 ? "sha" : "")));
      body.appendChild(tr);
    }
  }

  $("runs-refresh").addEventListener("click", refreshRuns);

  async function refreshAll() {
    if (await loadProfiles()) {
      refreshApprovals();
      refreshRuns();
      refreshSessions(false);
    }
  }

  refreshAll();
  setInterval(() => {
    if (document.visibilityState === "visible") { refreshApprovals(); refreshRuns(); refreshSessions(false); }
  }, 2000);
})();
