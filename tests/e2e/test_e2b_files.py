"""E2B's envd POST/GET /files as the SDK's files.write/read use them (issue 22): gzip bodies
(Content-Encoding: gzip) inflated as they arrive, file metadata (X-Metadata-<key> headers) kept as
user.e2b.<key> extended attributes; and the attacks on both, each asserted on what airlock did:

  a gzip bomb                         -> 413 at --max-file, no file, the server lives on
  truncated / corrupt gzip            -> 400, the file there before is left as it was
  another Content-Encoding            -> 415 naming gzip
  metadata too large, too many keys,
  non-printable values, NUL in a key  -> 400, no file written
  a key aiming at another namespace   -> stays beneath user.e2b. (trusted.x is user.e2b.trusted.x)
  a symlink planted by the sandbox    -> refused (409), never written through, the link unchanged

What the sandbox sees is read by code inside it (os.listxattr/os.getxattr through /execute).
"""

import gzip
import http.client
import json
import re
import time
import unittest

from airlock_server import AirlockServer, assert_server_alive, raw_request

MAX_FILE = 1 << 20


def e2b_ports(server):
    """The code-interpreter and envd ports the server bound (--e2b-listen 127.0.0.1:0,0)."""
    found = {}
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(found) < 2:
        for line in server.stderr_lines:
            for which in ("code interpreter", "envd"):
                m = re.search(r"127\.0\.0\.1:(\d+) \(" + which + r"\)", line)
                if m:
                    found[which] = int(m.group(1))
        time.sleep(0.05)
    if len(found) < 2:
        raise AssertionError(f"the E2B listeners' ports are not in the log: {server.stderr_lines[-20:]}")
    return found["code interpreter"], found["envd"]


def send(port, method, path, body=None, headers=None):
    """One request over a raw socket (http.client refuses some of the headers sent here)."""
    body = body or b""
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n".encode()
    for name, value in (headers or {}).items():
        head += (name.encode() if isinstance(name, str) else name) + b": " + (
            value.encode() if isinstance(value, str) else value) + b"\r\n"
    head += f"Content-Length: {len(body)}\r\n\r\n".encode()
    answer = raw_request(port, head + body)
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0
    return status, answer.split(b"\r\n\r\n", 1)[-1]


class E2bFiles(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # general: the sandbox's code may import os (to read the attributes back).
        cls.server = AirlockServer(extra_args=["--e2b-listen", "127.0.0.1:0,0", "--e2b-profile", "general",
                                               "--max-file", str(MAX_FILE)]).start()
        cls.code_port, cls.envd = e2b_ports(cls.server)

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def upload(self, path, data, headers=None, gzip_it=False):
        h = {"Content-Type": "application/octet-stream"}
        if gzip_it:
            data = gzip.compress(data)
            h["Content-Encoding"] = "gzip"
        h.update(headers or {})
        return send(self.envd, "POST", f"/files?path={path}", data, h)

    def run_code(self, code):
        """Runs `code` in the sandbox's default context; returns its stdout."""
        status, body = send(self.code_port, "POST", "/execute", json.dumps({"code": code}).encode(),
                            {"Content-Type": "application/json"})
        self.assertEqual(status, 200, body)
        lines = [json.loads(line) for line in body.decode().splitlines() if line.strip().startswith("{")]
        errors = [line for line in lines if line.get("type") == "error"]
        self.assertFalse(errors, errors)
        return "".join(line["text"] for line in lines if line.get("type") == "stdout")

    def xattrs(self, path):
        out = self.run_code("import os, json\n"
                            f"p = {path!r}\n"
                            "print(json.dumps({n: os.getxattr(p, n, follow_symlinks=False).decode('latin-1') "
                            "for n in os.listxattr(p, follow_symlinks=False)}))")
        return json.loads(out)

    def exists(self, path):
        return self.run_code(f"import os\nprint(os.path.lexists({path!r}))").strip() == "True"

    # ---------------------------------------------------------------------------------------------

    def test_gzip_and_metadata_round_trip(self):
        content = b"gzip upload, " * 5000
        status, body = self.upload("gz/a.txt", content, {"X-Metadata-Author": "mish", "X-Metadata-purpose": "up"},
                                   gzip_it=True)
        self.assertEqual(status, 200, body)
        info = json.loads(body)
        self.assertEqual(info, [{"path": "/home/user/gz/a.txt", "name": "a.txt", "type": "file",
                                 "metadata": {"author": "mish", "purpose": "up"}}])
        status, got = send(self.envd, "GET", "/files?path=gz/a.txt", headers={"Accept-Encoding": "gzip"})
        self.assertEqual((status, got), (200, content))
        self.assertEqual(self.xattrs("/home/user/gz/a.txt"), {"user.e2b.author": "mish", "user.e2b.purpose": "up"})
        # Overwritten without metadata: none is left.
        status, body = self.upload("gz/a.txt", b"second")
        self.assertEqual(status, 200, body)
        self.assertNotIn("metadata", json.loads(body)[0])
        self.assertEqual(self.xattrs("/home/user/gz/a.txt"), {})

    def test_multipart_gzip_with_metadata_on_every_file(self):
        parts = b""
        for name, data in (("m/one.txt", b"first file"), ("m/two.txt", b"second file")):
            parts += (b"--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"" + name.encode() +
                      b"\"\r\nContent-Type: application/octet-stream\r\n\r\n" + data + b"\r\n")
        parts += b"--B--\r\n"
        status, body = send(self.envd, "POST", "/files", gzip.compress(parts),
                            {"Content-Type": "multipart/form-data; boundary=B", "Content-Encoding": "gzip",
                             "X-Metadata-source": "suite"})
        self.assertEqual(status, 200, body)
        self.assertEqual([f["metadata"] for f in json.loads(body)], [{"source": "suite"}] * 2)
        self.assertEqual(send(self.envd, "GET", "/files?path=m/two.txt"), (200, b"second file"))
        self.assertEqual(self.xattrs("/home/user/m/one.txt"), {"user.e2b.source": "suite"})

    def test_gzip_bomb_stops_at_the_cap(self):
        bomb = gzip.compress(b"\0" * (64 * MAX_FILE), 9)  # 64 MiB of zeros in ~64 KiB
        self.assertLess(len(bomb), MAX_FILE)
        status, body = send(self.envd, "POST", "/files?path=bomb.bin", bomb,
                            {"Content-Type": "application/octet-stream", "Content-Encoding": "gzip"})
        self.assertEqual(status, 413, body)
        self.assertIn(b"--max-file", body)
        self.assertFalse(self.exists("/home/user/bomb.bin"))
        # Nor through multipart, whose parts the inflated bytes would become.
        status, body = send(self.envd, "POST", "/files?path=bomb2.bin", bomb,
                            {"Content-Type": "multipart/form-data; boundary=B", "Content-Encoding": "gzip"})
        self.assertIn(status, (400, 413), body)
        self.assertFalse(self.exists("/home/user/bomb2.bin"))
        # No temporary file is left behind either.
        self.assertEqual(self.run_code("import os\nprint([n for n in os.listdir('/home/user') if 'bomb' in n])"),
                         "[]\n")
        assert_server_alive(self, self.server)

    def test_truncated_and_corrupt_gzip_leave_the_old_file(self):
        self.assertEqual(self.upload("keep.txt", b"original")[0], 200)
        whole = gzip.compress(b"replacement " * 1000)
        for bad in (whole[: len(whole) // 2], whole[:10] + b"\xff" * 40, whole + b"trailing garbage", b"plain text"):
            status, body = send(self.envd, "POST", "/files?path=keep.txt", bad,
                                {"Content-Type": "application/octet-stream", "Content-Encoding": "gzip"})
            self.assertEqual(status, 400, body)
            self.assertIn(b"gzip", body)
            self.assertEqual(send(self.envd, "GET", "/files?path=keep.txt"), (200, b"original"))

    def test_another_encoding_is_415_naming_gzip(self):
        for encoding in ("br", "deflate", "gzip, br"):
            status, body = self.upload("enc.txt", b"x", {"Content-Encoding": encoding})
            self.assertEqual(status, 415, body)
            self.assertIn(b"gzip", body)
        self.assertFalse(self.exists("/home/user/enc.txt"))
        self.assertEqual(self.upload("enc.txt", b"x", {"Content-Encoding": "identity"})[0], 200)

    def test_invalid_metadata_is_400_and_writes_nothing(self):
        cases = [
            {"X-Metadata-big": "v" * 4100},                               # over 4096 bytes in all
            {f"X-Metadata-k{i}": "v" for i in range(65)},                  # over 64 keys
            {"X-Metadata-" + "k" * 247: "v"},                              # a key over 246 bytes
            {"X-Metadata-good": b"caf\xc3\xa9"},                           # not printable US-ASCII
            {"X-Metadata-good": b"bell\x07"},                              # a control character
            {"X-Metadata-": "empty key"},
            {b"X-Metadata-a\x00b": "nul in the key"},
            {"X-Metadata-../../etc/passwd": "v"},                          # not a header name at all
        ]
        for headers in cases:
            status, body = self.upload("invalid.txt", b"x", headers)
            self.assertEqual(status, 400, (list(headers)[:1], body))
        self.assertFalse(self.exists("/home/user/invalid.txt"))

    def test_a_refused_upload_body_is_never_read_as_the_next_request(self):
        # Refused before its body is read (415, 400): on a kept-alive connection the body's bytes
        # would otherwise be parsed as the next request ("GET /files..." -> "xGET": 405).
        conn = http.client.HTTPConnection("127.0.0.1", self.envd, timeout=30)
        try:
            for headers in ({"Content-Encoding": "br"}, {"X-Metadata-k": "v" * 5000}):
                conn.request("POST", "/files?path=ka.txt", body=b"GET /files?path=x HTTP/1.1\r\n\r\n",
                             headers={"Content-Type": "application/octet-stream", **headers})
                r = conn.getresponse()
                r.read()
                self.assertIn(r.status, (400, 415))
                conn.request("GET", "/files?path=ka.txt")  # reconnects when the server closed
                r = conn.getresponse()
                self.assertEqual(r.status, 404, r.read())
                r.read()
        finally:
            conn.close()

    def test_keys_stay_in_the_user_e2b_namespace(self):
        status, body = self.upload("ns.txt", b"x", {"X-Metadata-trusted.overlay.opaque": "y",
                                                   "X-Metadata-security.capability": "z"})
        self.assertEqual(status, 200, body)
        self.assertEqual(self.xattrs("/home/user/ns.txt"), {"user.e2b.trusted.overlay.opaque": "y",
                                                           "user.e2b.security.capability": "z"})

    def test_planted_symlinks_are_never_written_through(self):
        # Targets the sandbox itself can write (/tmp), so a write through a link would land.
        self.run_code("import os\n"
                      "open('/tmp/target.txt', 'w').write('untouched')\n"
                      "os.symlink('/tmp/target.txt', '/home/user/link.txt')\n"
                      "os.symlink('/tmp', '/home/user/linkdir')\n")
        for path in ("link.txt", "linkdir/target.txt", "linkdir/new.txt"):
            for gz in (False, True):
                status, body = self.upload(path, b"through the link", {"X-Metadata-a": "b"}, gzip_it=gz)
                self.assertIn(status, (400, 409), (path, body))
        out = self.run_code("import os\n"
                            "print(os.readlink('/home/user/link.txt'), open('/tmp/target.txt').read(),\n"
                            "      os.path.exists('/tmp/new.txt'), os.listxattr('/tmp/target.txt'))")
        self.assertEqual(out, "/tmp/target.txt untouched False []\n")


if __name__ == "__main__":
    unittest.main()
