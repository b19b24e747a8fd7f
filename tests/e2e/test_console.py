"""The web console (issue 14, docs/console.md) in a real browser: headless Chromium driven by
Selenium (Debian's chromium, chromium-driver, python3-selenium) against a real `airlock serve`.

A person loads the page, gives a token, runs code and sees its output and a figure appear; run
output that looks like HTML stays text; requests held for approval appear with their code and
findings, one is approved (its result shows) and one denied; the recent runs list them. The page
is served with a strict Content-Security-Policy and the API's Host/Origin rules, which the test
checks over plain HTTP. Screenshots of each step are taken (AIRLOCK_UPDATE_SCREENSHOTS=1 keeps
them as docs/console-*.png).

Skips only when chromium or Selenium is missing and AIRLOCK_MUST_WORK is unset.
"""

import base64
import json
import os
import shutil
import tempfile
import time
import unittest

from airlock_server import SOURCE_DIR, AirlockServer, copy_profiles, expected_mode, scaled
from browser import browser, skip_unless_browser

try:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select, WebDriverWait
except ImportError:
    pass  # skip_unless_browser() skips the module

# Screenshots go to the test's temp dir; AIRLOCK_UPDATE_SCREENSHOTS=1 writes docs/console-*.png.
UPDATE_DOCS = os.environ.get("AIRLOCK_UPDATE_SCREENSHOTS") == "1"

OPERATOR = "operator-token-0123456789abcdef"
AGENT = "agent-token-0123456789abcdef00"

server = None
profiles = None
tmp = None


def setUpModule():
    global server, profiles, tmp
    skip_unless_browser("the console test")
    tmp = tempfile.mkdtemp(prefix="airlock-e2e-console-")
    profiles = os.path.join(tmp, "profiles")
    os.mkdir(profiles)
    copy_profiles(profiles, {"gated": "name: gated\nextends: minimal\napproval:\n  policy: always\n",
                             "gated-general": "name: gated-general\nextends: general\napproval:\n  policy: always\n"})
    tokens = os.path.join(tmp, "tokens")
    with open(tokens, "w") as f:
        f.write(f"operator:{OPERATOR}:run+approve\nagent:{AGENT}\n")
    os.chmod(tokens, 0o600)
    server = AirlockServer(extra_args=["--tokens-file", tokens], profiles_dir=profiles).start()


def tearDownModule():
    if server:
        server.cleanup()
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)


class ConsoleInBrowser(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.downloads = tempfile.mkdtemp(prefix="airlock-e2e-console-downloads-", dir=tmp)
        cls.driver = browser(cls.downloads)
        cls.base = f"http://127.0.0.1:{server.port}"

    @classmethod
    def tearDownClass(cls):
        cls.driver.quit()

    def wait(self, predicate, timeout=60, what="the page"):
        return WebDriverWait(self.driver, scaled(timeout), poll_frequency=0.1).until(
            lambda d: predicate(d), message=f"waited for {what}")

    def shot(self, name):
        where = os.path.join(SOURCE_DIR, "docs") if UPDATE_DOCS else tmp
        self.assertTrue(self.driver.save_screenshot(os.path.join(where, f"console-{name}.png")))

    def set_code(self, code):
        # The editor's text (CodeMirror's document), through the page's own hook.
        self.driver.execute_script("window.airlockConsole.setCode(arguments[0]);", code)

    def editor_content(self):
        """The editor's editable element, inside its shadow root (#editor)."""
        host = self.driver.find_element(By.ID, "editor")
        root = self.driver.execute_script("return arguments[0].shadowRoot", host)
        return root.find_element(By.CSS_SELECTOR, ".cm-content")

    def login(self):
        d = self.driver
        d.get(self.base + "/console")
        if d.execute_script("return sessionStorage.getItem('airlock-token')") != OPERATOR:
            self.wait(lambda d: "token is needed" in d.find_element(By.ID, "token-state").text, what="the token prompt")
            d.find_element(By.ID, "token").send_keys(OPERATOR)
            d.find_element(By.ID, "token-save").click()
        self.wait(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#profile option[value=general]")) == 1,
                  what="the profiles")

    def run_code(self, code, profile, language=None, typed=False):
        if profile is not None:
            Select(self.driver.find_element(By.ID, "profile")).select_by_value(profile)
        if language is not None:
            Select(self.driver.find_element(By.ID, "language")).select_by_value(language)
        # The cold path imports matplotlib afresh (seconds under load): the profile's ceiling.
        timeout = self.driver.find_element(By.ID, "timeout")
        timeout.clear()
        timeout.send_keys("30")
        if typed:
            # As a person would: select all in the editor and type over it.
            content = self.editor_content()
            content.click()
            ActionChains(self.driver).key_down(Keys.CONTROL).send_keys("a").key_up(Keys.CONTROL) \
                .send_keys(Keys.DELETE).perform()
            content.send_keys(code)
            self.assertEqual(self.driver.execute_script("return window.airlockConsole.getCode()"), code)
        else:
            self.set_code(code)
        self.driver.find_element(By.ID, "run").click()
        self.wait(lambda d: d.find_element(By.ID, "run-state").text.startswith("done") or
                  d.find_element(By.ID, "run-state").text.startswith(("4", "5", "failed")), what="the run to end")

    def csp_violations(self):
        return [e for e in self.driver.get_log("browser") if "Content Security Policy" in e.get("message", "")]

    def test_console_end_to_end(self):
        d = self.driver
        # 1. The page loads without a token and asks for one.
        d.get(self.base + "/")  # redirects to /console
        self.assertTrue(d.current_url.endswith("/console"), d.current_url)
        self.wait(lambda d: "token is needed" in d.find_element(By.ID, "token-state").text, what="the token prompt")
        self.shot("1-token")
        d.find_element(By.ID, "token").send_keys(OPERATOR)
        d.find_element(By.ID, "token-save").click()
        self.wait(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#profile option[value=visualization]")) == 1,
                  what="the profiles")
        # The token is kept for the tab only (sessionStorage), never in a cookie.
        self.assertEqual(d.execute_script("return sessionStorage.getItem('airlock-token')"), OPERATOR)
        self.assertEqual(d.get_cookies(), [])

        # 2. Run code: streamed output, a figure.
        self.run_code("import matplotlib.pyplot as plt\nprint('hello from the console')\n"
                      "plt.plot([1, 3, 2, 4])\nplt.title('airlock')\nplt.show()\n", "visualization")
        self.assertEqual(d.find_element(By.ID, "stdout").text, "hello from the console",
                         d.find_element(By.ID, "report").text)
        imgs = d.find_elements(By.CSS_SELECTOR, "#figures img")
        self.assertEqual(len(imgs), 1, d.find_element(By.ID, "report").text)
        self.assertTrue(imgs[0].get_attribute("src").startswith("data:image/png;base64,"))
        self.wait(lambda d: d.execute_script("return arguments[0].naturalWidth", imgs[0]) > 100, what="the figure")
        self.assertIn("exit 0", d.find_element(By.ID, "report").text)
        self.shot("2-run")

        # 3. Output that looks like HTML stays text.
        self.run_code("print('<img src=x id=pwned onerror=\"document.title=1\"><b id=bold>b</b>')\n", "minimal")
        self.assertIn("<img src=x id=pwned", d.find_element(By.ID, "stdout").text)
        self.assertEqual(d.find_elements(By.ID, "pwned"), [])
        self.assertEqual(d.find_elements(By.ID, "bold"), [])

        # 4. Two requests held for approval, from the agent.
        ids = {}
        for key in ("approve-me", "deny-me"):
            status, _, data = server.post_json("/v1/execute", {"code": f"print('{key}')\n", "profile": "gated"},
                                               headers={"Authorization": f"Bearer {AGENT}"})
            self.assertEqual(status, 202, data)
            ids[key] = json.loads(data)["approval_id"]
        d.find_element(By.ID, "approvals-refresh").click()
        for aid in ids.values():
            self.wait(lambda d, aid=aid: d.find_elements(By.CSS_SELECTOR, f'.approval[data-id="{aid}"]'),
                      what=f"approval {aid}")
        card = d.find_element(By.CSS_SELECTOR, f'.approval[data-id="{ids["approve-me"]}"]')
        self.assertIn("print('approve-me')", card.find_element(By.CSS_SELECTOR, "pre").text)
        self.assertIn("from agent", card.text)
        self.shot("3-approvals")
        card.find_element(By.CSS_SELECTOR, "button.approve").click()
        self.wait(lambda d: "ran" in self.decision_text(ids["approve-me"]), what="the approved run's result")
        self.assertIn("stdout: approve-me", self.decision_text(ids["approve-me"]))
        card = d.find_element(By.CSS_SELECTOR, f'.approval[data-id="{ids["deny-me"]}"]')
        card.find_element(By.CSS_SELECTOR, "input.reason").send_keys("not needed")
        card.find_element(By.CSS_SELECTOR, "button.deny").click()
        self.wait(lambda d: "denied" in self.decision_text(ids["deny-me"]), what="the denial")
        # The server agrees: one ran (decided by the operator), one was refused.
        status, _, data = server.request("GET", f"/v1/approvals/{ids['approve-me']}",
                                         headers={"Authorization": f"Bearer {AGENT}"})
        got = json.loads(data)
        self.assertEqual((got["status"], got["decided_by"], got["result"]["stdout"]), ("ran", "operator", "approve-me\n"))
        status, _, data = server.request("GET", f"/v1/approvals/{ids['deny-me']}",
                                         headers={"Authorization": f"Bearer {AGENT}"})
        got = json.loads(data)
        self.assertEqual((got["status"], got["reason"]), ("denied", "not needed"))
        self.assertNotIn("result", got)

        # 5. The recent runs list the runs and the decisions.
        d.find_element(By.ID, "runs-refresh").click()
        # The table is redrawn every 2 s: read it in one script call, not row by row.
        verdicts_js = ("return Array.from(document.querySelectorAll('#runs tbody tr'))"
                       ".map(r => r.children[4].textContent)")
        # Waited for all four: a redraw may come from a fetch made before the denial's record.
        wanted = ("ran", "pending_approval", "approved", "denied")
        self.wait(lambda d: all(v in d.execute_script(verdicts_js) for v in wanted), what="the recent runs")
        verdicts = d.execute_script(verdicts_js)
        for v in wanted:
            self.assertIn(v, verdicts)
        self.shot("4-decided")
        self.assertEqual(self.csp_violations(), [])

    def test_editor_languages_and_sessions(self):
        d = self.driver
        self.login()
        # 1. The editor highlights Python, and typed code runs as typed.
        # (Brackets and quotes the editor closes by itself are typed over, as a person would.)
        self.run_code("print('typed', 6 * 7)", "general", "python", typed=True)
        self.assertEqual(d.find_element(By.ID, "stdout").text, "typed 42", d.find_element(By.ID, "report").text)
        plain = d.execute_script("return getComputedStyle(arguments[0]).color", self.editor_content())
        colors = d.execute_script("return Array.from(arguments[0].querySelectorAll('.cm-line span'))"
                                  ".map(s => getComputedStyle(s).color)", self.editor_content())
        self.assertTrue(set(colors) - {plain}, f"no syntax highlighting: token colours {colors}, text {plain}")
        # 2. The language picker lists what the profile allows; each runs.
        Select(d.find_element(By.ID, "profile")).select_by_value("minimal")
        self.assertEqual([o.get_attribute("value") for o in d.find_elements(By.CSS_SELECTOR, "#language option")],
                         ["python"])
        Select(d.find_element(By.ID, "profile")).select_by_value("general")
        # general allows six; typescript, r and java run in sessions only (a one-shot run of them
        # answers 422 saying so), which the console's pickers do not make: they are not offered.
        self.assertEqual([o.get_attribute("value") for o in d.find_elements(By.CSS_SELECTOR, "#language option")],
                         ["python", "javascript", "bash"])
        self.run_code("console.log('from', typeof process, [3, 1, 2].sort().join())", "general", "javascript")
        self.assertEqual(d.find_element(By.ID, "stdout").text, "from object 1,2,3", d.find_element(By.ID, "report").text)
        self.assertIn("no_static_check", d.find_element(By.ID, "report").text)
        self.shot("5-javascript")
        self.run_code("echo from bash $((6 * 7))", "general", "bash")
        self.assertEqual(d.find_element(By.ID, "stdout").text, "from bash 42")
        # 3. A session: created, run in twice (state kept), its files listed and downloaded, closed.
        Select(d.find_element(By.ID, "language")).select_by_value("python")
        d.find_element(By.ID, "session-new").click()
        # With --pool-size 0 (cold mode) the session is a cold run of its own: the same page.
        self.wait(lambda d: d.find_elements(By.CSS_SELECTOR, "#sessions .session"), what="the new session")
        sid = d.find_element(By.CSS_SELECTOR, "#sessions .session").get_attribute("data-id")
        self.assertEqual(d.execute_script("return document.getElementById('target').value"), sid)
        self.assertFalse(d.find_element(By.ID, "profile").is_enabled())  # the session's profile applies
        self.run_code("counter = 41\nopen('notes.txt', 'w').write('kept in /tmp')", None, None)
        self.run_code("counter += 1\ncounter", None, None)
        self.assertEqual(d.find_element(By.ID, "result").text, "42", d.find_element(By.ID, "report").text)
        self.assertIn("call 2", d.find_element(By.ID, "run-state").text)
        card = d.find_element(By.CSS_SELECTOR, f'#sessions .session[data-id="{sid}"]')
        self.wait(lambda d: "2 call(s)" in card.text, what="the session's call count")
        self.wait(lambda d: card.find_elements(By.CSS_SELECTOR, "a.session-file"), what="the session's files")
        link = card.find_element(By.CSS_SELECTOR, "a.session-file")
        self.assertEqual(link.text, "notes.txt")
        self.shot("6-session")
        link.click()
        saved = os.path.join(self.downloads, "notes.txt")
        self.wait(lambda d: os.path.exists(saved) and os.path.getsize(saved) == len("kept in /tmp"),
                  what="the downloaded file")
        with open(saved) as f:
            self.assertEqual(f.read(), "kept in /tmp")
        card.find_element(By.CSS_SELECTOR, "button.close").click()
        self.wait(lambda d: not d.find_elements(By.CSS_SELECTOR, f'#sessions .session[data-id="{sid}"]'),
                  what="the closed session to go")
        status, _, data = server.request("GET", f"/v1/sessions/{sid}", headers={"Authorization": f"Bearer {OPERATOR}"})
        self.assertIn(status, (404, 410), data)  # gone, or a tombstone saying why
        self.assertTrue(d.find_element(By.ID, "profile").is_enabled())  # back to one-shot runs
        self.assertEqual(self.csp_violations(), [])

    def test_held_request_shows_everything_that_will_run(self):
        # Issue 23.2: a bash request `. ./setup.sh` whose setup.sh comes in `files`, with a
        # right-to-left override hiding part of a line, and a binary file. The person sees the
        # language, the limits, every file (the text one in full, the binary one as a download)
        # and every invisible character marked, and the decision names all of it.
        d = self.driver
        self.login()
        setup = "echo setup-ran\necho 'shown \u202e# hidden' >/dev/null\n"
        blob = bytes(range(256))
        payload = {"code": ". ./setup.sh  # \u2066just a comment\u2069\n", "profile": "gated-general",
                   "language": "bash", "timeout": 9,
                   "files": [{"path": "setup.sh", "content": setup},
                             {"path": "tool.bin", "content": base64.b64encode(blob).decode(), "encoding": "base64"}]}
        status, _, data = server.post_json("/v1/execute", payload, headers={"Authorization": f"Bearer {AGENT}"})
        self.assertEqual(status, 202, data)
        held = json.loads(data)
        aid = held["approval_id"]
        d.find_element(By.ID, "approvals-refresh").click()
        card_css = f'.approval[data-id="{aid}"]'
        self.wait(lambda d: d.find_elements(By.CSS_SELECTOR, card_css + " button.approve"), what=f"approval {aid}")
        card = d.find_element(By.CSS_SELECTOR, card_css)
        self.assertIn("bash", card.text)
        self.assertIn("timeout 9 s", card.find_element(By.CSS_SELECTOR, ".limits").text)
        self.assertIn("request sha256 " + held["request_sha256"], card.text)
        code = card.find_element(By.CSS_SELECTOR, "pre.code")
        self.assertEqual([m.text for m in code.find_elements(By.CSS_SELECTOR, ".invisible")],
                         ["\u27e8U+2066\u27e9", "\u27e8U+2069\u27e9"])
        files = card.find_elements(By.CSS_SELECTOR, ".approval-file")
        self.assertEqual([f.get_attribute("data-path") for f in files], ["setup.sh", "tool.bin"])
        shown = files[0].find_element(By.CSS_SELECTOR, "pre.file-content")
        self.assertIn("echo setup-ran", shown.text)
        self.assertEqual([m.text for m in shown.find_elements(By.CSS_SELECTOR, ".invisible")], ["\u27e8U+202E\u27e9"])
        self.assertIn("3 invisible character(s)", card.find_element(By.CSS_SELECTOR, ".invisible-warning").text)
        self.assertIn("256 bytes", files[1].text)
        self.shot("7-approval-files")
        files[1].find_element(By.CSS_SELECTOR, "a.file-download").click()
        saved = os.path.join(self.downloads, "tool.bin")
        self.wait(lambda d: os.path.exists(saved) and os.path.getsize(saved) == len(blob), what="the downloaded file")
        with open(saved, "rb") as f:
            self.assertEqual(f.read(), blob)
        card.find_element(By.CSS_SELECTOR, "button.approve").click()
        self.wait(lambda d: "ran" in self.decision_text(aid), what="the approved run's result")
        self.assertIn("stdout: setup-ran", self.decision_text(aid))
        # The decision named the whole request (what the console sends is in the audit trail's
        # approval record only as a verdict; the server refuses a stale hash with 409).
        status, _, data = server.request("GET", f"/v1/approvals/{aid}", headers={"Authorization": f"Bearer {AGENT}"})
        self.assertEqual(json.loads(data)["status"], "ran")
        self.assertEqual(self.csp_violations(), [])

    def decision_text(self, aid):
        found = self.driver.find_elements(By.CSS_SELECTOR, f'.decision[data-id="{aid}"]')
        return found[0].text if found else ""


class ConsoleOverHttp(unittest.TestCase):
    def test_strict_csp_and_no_inline_script(self):
        status, headers, body = server.get("/console")
        self.assertEqual(status, 200)
        csp = headers["content-security-policy"]
        for part in ("default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "connect-src 'self'"):
            self.assertIn(part, csp)
        self.assertNotIn("unsafe", csp)
        self.assertEqual(headers["x-content-type-options"], "nosniff")
        self.assertEqual(headers["x-frame-options"], "DENY")
        html = body.decode()
        self.assertNotIn("<script>", html)
        self.assertNotRegex(html, r"\son[a-z]+\s*=")
        for asset, ctype in (("/console/app.js", "text/javascript"), ("/console/editor.js", "text/javascript"),
                             ("/console/app.css", "text/css")):
            status, headers, _ = server.get(asset)
            self.assertEqual(status, 200)
            self.assertTrue(headers["content-type"].startswith(ctype))

    def test_page_needs_no_token_but_the_api_does(self):
        self.assertEqual(server.get("/console")[0], 200)
        self.assertEqual(server.get("/v1/runs")[0], 401)
        self.assertEqual(server.get("/v1/approvals")[0], 401)

    def test_host_and_origin_rules_apply_to_the_console(self):
        # DNS rebinding: a page served under another name is refused.
        status, _, _ = server.request("GET", "/console", headers={"Host": "evil.example"})
        self.assertEqual(status, 421)
        # A cross-site page cannot call the API (no cookie exists to ride on, and the origin is refused).
        status, _, _ = server.post_json("/v1/execute", {"code": "print(1)"},
                                        headers={"Origin": "http://evil.example", "Authorization": f"Bearer {OPERATOR}"})
        self.assertEqual(status, 403)

    def test_recent_runs_are_filtered_for_run_only_tokens(self):
        server.post_json("/v1/execute", {"code": "print('op')", "profile": "minimal"},
                         headers={"Authorization": f"Bearer {OPERATOR}"})
        status, _, data = server.request("GET", "/v1/runs", headers={"Authorization": f"Bearer {AGENT}"})
        self.assertEqual(status, 200)
        tokens = {r["client"]["token"] for r in json.loads(data)["runs"]}
        self.assertLessEqual(tokens, {"agent"})
        status, _, data = server.request("GET", "/v1/runs", headers={"Authorization": f"Bearer {OPERATOR}"})
        self.assertIn("operator", {r["client"]["token"] for r in json.loads(data)["runs"]})


if __name__ == "__main__":
    unittest.main()
