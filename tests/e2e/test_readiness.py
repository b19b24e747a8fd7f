"""Readiness (issue 22, item 6): /readyz answers 200 only once the warm pool of every door's
default profile has had a ready run (or cannot make one), and says which are still starting
before that.

Runs warm (the default pool: the pools start with the server) and cold (--pool-size 0: no pool,
so readiness is the self-test alone). The verdict rests on what /readyz itself said: the body of
its first 200 lists the pools, and each door default's must show a ready run there.
"""

import json
import time
import unittest

from airlock_server import AirlockServer, scaled


class ReadinessTest(unittest.TestCase):
    def test_ready_only_when_the_default_profiles_are_warm(self):
        server = AirlockServer()
        server.start(wait_ready=False)
        try:
            seen_503 = []
            deadline = time.monotonic() + scaled(150)
            ready_body = None
            while time.monotonic() < deadline:
                status, _, body = server.get("/readyz")
                parsed = json.loads(body)
                if status == 200:
                    ready_body = parsed
                    break
                self.assertEqual(status, 503, body)
                self.assertEqual(parsed["status"], "not ready", body)
                self.assertIn("pools", parsed, body)  # a 503 says which pools are where
                seen_503.append(parsed.get("detail", ""))
                time.sleep(0.02)
            self.assertIsNotNone(ready_body, f"never ready; last details: {seen_503[-3:]}")
            status, _, body = server.get("/v1/profiles")
            self.assertEqual(status, 200, body)
            defaults = set(json.loads(body)["defaults"].values())
            pools = ready_body["pools"]
            for name in defaults:
                if name not in pools:
                    continue  # a profile without a warm pool: its runs are cold by design
                p = pools[name]
                self.assertTrue(p["ready"] > 0 or p["state"] == "degraded" or p["zygote"] == "down",
                                f"/readyz said ready while the pool of '{name}' (a door's default) had no "
                                f"ready run: {ready_body}")
            # Before the pools were warm, a 503 named them (after the self-test passed).
            starting = [d for d in seen_503 if "still starting" in d]
            for d in starting:
                self.assertTrue(any(f"'{n}'" in d for n in defaults), d)
            print(f"\n{len(seen_503)} answers of 503 before ready ({len(starting)} naming starting pools)")
            # Ready stays ready: the latch does not flap while a pool refills after runs.
            for _ in range(3):
                status, _, body = server.post_json("/v1/execute", {"code": "print(1)"})
                self.assertEqual(status, 200, body)
                status, _, body = server.get("/readyz")
                self.assertEqual(status, 200, body)
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main()
