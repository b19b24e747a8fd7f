"""Renders every kustomize overlay of deploy/k8s with `kubectl kustomize` and checks
what matters in the objects (docs/deploy.md, "Kubernetes"): probes, the airlock
container's securityContext and resources, no `:latest` image, graceful termination
longer than the drain, and for the shared service a NetworkPolicy denying all egress,
a PodDisruptionBudget, a Service and an HPA on an airlock metric."""

import os
import re
import subprocess
import unittest

import yaml

from deploy_common import DEPLOY_DIR, need_tool

OVERLAYS_DIR = os.path.join(DEPLOY_DIR, "k8s", "overlays")
# What airlock may be granted; anything else (NET_ADMIN, SYS_PTRACE, ...) is a regression.
ALLOWED_CAPS = {"SETUID", "SETGID", "SYS_ADMIN"}


def render(overlay):
    kubectl = need_tool("kubectl", "kubernetes-client")
    p = subprocess.run([kubectl, "kustomize", os.path.join(OVERLAYS_DIR, overlay)],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise AssertionError(f"kubectl kustomize {overlay} failed:\n{p.stderr}")
    return [d for d in yaml.safe_load_all(p.stdout) if d]


def of_kind(objects, kind):
    return [o for o in objects if o.get("kind") == kind]


def env_of(container):
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def probe_path(probe):
    if "httpGet" in probe:
        return probe["httpGet"]["path"]
    command = " ".join(probe["exec"]["command"])
    m = re.search(r"http://127\.0\.0\.1:8000(/\w+)", command)
    return m.group(1) if m else None


class EveryOverlay(unittest.TestCase):
    def overlays(self):
        names = sorted(os.listdir(OVERLAYS_DIR))
        self.assertIn("service", names)
        self.assertIn("sidecar", names)
        return names

    def test_each_overlay_renders_and_its_airlock_pod_is_locked_down(self):
        for overlay in self.overlays():
            with self.subTest(overlay=overlay):
                objects = render(overlay)
                deployments = of_kind(objects, "Deployment")
                self.assertEqual(len(deployments), 1, overlay)
                self.check_pod(overlay, deployments[0]["spec"]["template"]["spec"])

    def check_pod(self, overlay, pod):
        containers = {c["name"]: c for c in pod["containers"]}
        self.assertIn("airlock", containers)
        self.assertFalse(pod.get("hostNetwork", False))
        self.assertFalse(pod.get("hostPID", False))
        self.assertFalse(pod.get("hostIPC", False))
        self.assertFalse(pod.get("automountServiceAccountToken", True), "airlock needs no API token")
        for c in pod["containers"]:
            image = c["image"]
            self.assertRegex(image, r":[\w][\w.-]*$|@sha256:", f"{c['name']}: image without a tag: {image}")
            self.assertFalse(image.endswith(":latest"), f"{c['name']}: {image}")
            names = [e["name"] for e in c.get("env", [])]
            self.assertEqual(len(names), len(set(names)), f"{c['name']}: duplicate env {names}")
            for kind in ("requests", "limits"):
                for res in ("cpu", "memory"):
                    self.assertIn(res, c.get("resources", {}).get(kind, {}), f"{c['name']}: {kind}.{res}")
            sc = c.get("securityContext", {})
            self.assertIs(sc.get("allowPrivilegeEscalation"), False, c["name"])
            self.assertFalse(sc.get("privileged", False), c["name"])
            self.assertEqual(sc.get("capabilities", {}).get("drop"), ["ALL"], c["name"])
            self.assertTrue(sc.get("readOnlyRootFilesystem"), c["name"])
            self.assertIn("seccompProfile", sc, c["name"])
            self.assertNotEqual(sc["seccompProfile"]["type"], "Unconfined", c["name"])

        airlock = containers["airlock"]
        sc = airlock["securityContext"]
        self.assertLessEqual(set(sc["capabilities"].get("add", [])), ALLOWED_CAPS)
        env = env_of(airlock)
        self.assertEqual(probe_path(airlock["livenessProbe"]), "/healthz")
        self.assertEqual(probe_path(airlock["readinessProbe"]), "/readyz")
        # SIGTERM comes after preStop; the drain must end before the kill.
        grace = float(env.get("AIRLOCK_DRAIN_GRACE") or 10)
        pre_stop = 0.0
        cmd = airlock.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
        if cmd[:1] == ["sleep"]:
            pre_stop = float(cmd[1])
        self.assertGreaterEqual(pod.get("terminationGracePeriodSeconds", 30), pre_stop + grace + 5)
        # A non-loopback listener must have tokens (airlock refuses to start otherwise).
        listen = env.get("AIRLOCK_LISTEN", "")
        if not listen.startswith("127.0.0.1:"):
            self.assertTrue(env.get("AIRLOCK_TOKENS_FILE"), overlay)
            mounts = [m["mountPath"] for m in airlock.get("volumeMounts", [])]
            self.assertTrue(any(env["AIRLOCK_TOKENS_FILE"].startswith(m + "/") for m in mounts), mounts)
        degraded = env.get("AIRLOCK_ALLOW_DEGRADED")
        if degraded:
            # Degrading is the overlay's whole point, named in its directory.
            self.assertEqual(overlay, "degraded", "only the degraded overlay may allow missing layers")
        if overlay != "degraded":
            self.assertEqual(sc["runAsUser"], 0)
            self.assertEqual(sc.get("procMount"), "Unmasked")
            self.assertIs(pod.get("hostUsers"), False, "user-namespaced pod")


class Service(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.objects = render("service")
        cls.deployment = of_kind(cls.objects, "Deployment")[0]
        cls.labels = cls.deployment["spec"]["template"]["metadata"]["labels"]

    def selects_airlock(self, selector):
        return all(self.labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())

    def test_network_policy_denies_all_egress_and_admits_only_labelled_agents(self):
        policies = [p for p in of_kind(self.objects, "NetworkPolicy")
                    if self.selects_airlock(p["spec"]["podSelector"])]
        self.assertEqual(len(policies), 1)
        spec = policies[0]["spec"]
        self.assertIn("Egress", spec["policyTypes"])
        self.assertIn("Ingress", spec["policyTypes"])
        self.assertEqual(spec.get("egress", []), [], "airlock pods need no egress at all")
        self.assertTrue(spec["ingress"])
        for rule in spec["ingress"]:
            self.assertTrue(rule.get("from"), "an ingress rule without `from` admits everyone")
            for peer in rule["from"]:
                self.assertNotIn("ipBlock", peer)
                self.assertTrue(peer.get("podSelector", {}).get("matchLabels"), peer)
        agents = [p for r in spec["ingress"] for p in r["from"]
                  if p["podSelector"]["matchLabels"].get("airlock.dev/client") == "true"]
        self.assertTrue(agents)

    def test_service_pdb_hpa_and_scrape(self):
        services = of_kind(self.objects, "Service")
        self.assertEqual(len(services), 1)
        self.assertTrue(self.selects_airlock({"matchLabels": services[0]["spec"]["selector"]}))
        pdbs = of_kind(self.objects, "PodDisruptionBudget")
        self.assertEqual(len(pdbs), 1)
        self.assertTrue(self.selects_airlock(pdbs[0]["spec"]["selector"]))
        self.assertGreaterEqual(self.deployment["spec"]["replicas"], 2, "a PDB of 1 needs 2 replicas")
        hpas = of_kind(self.objects, "HorizontalPodAutoscaler")
        self.assertEqual(len(hpas), 1)
        hpa = hpas[0]["spec"]
        self.assertEqual(hpa["scaleTargetRef"]["name"], self.deployment["metadata"]["name"])
        metric_names = [m["pods"]["metric"]["name"] for m in hpa["metrics"] if m["type"] == "Pods"]
        self.assertTrue(set(metric_names) & {"airlock_executions_in_flight", "airlock_execution_queue_depth"})
        annotations = self.deployment["spec"]["template"]["metadata"].get("annotations", {})
        self.assertEqual(annotations.get("prometheus.io/scrape"), "true")
        self.assertEqual(annotations.get("prometheus.io/path"), "/metrics")


class Sidecar(unittest.TestCase):
    def test_agent_and_airlock_share_a_pod_over_loopback(self):
        objects = render("sidecar")
        self.assertEqual(of_kind(objects, "Service"), [], "a sidecar is reached over localhost only")
        pod = of_kind(objects, "Deployment")[0]["spec"]["template"]["spec"]
        containers = {c["name"]: c for c in pod["containers"]}
        self.assertEqual(set(containers), {"agent", "airlock"})
        self.assertTrue(env_of(containers["airlock"])["AIRLOCK_LISTEN"].startswith("127.0.0.1:"))
        agent = containers["agent"]["securityContext"]
        self.assertTrue(agent["runAsNonRoot"])
        self.assertNotIn("add", agent["capabilities"])


if __name__ == "__main__":
    unittest.main()


class Degraded(unittest.TestCase):
    def test_names_only_the_cgroup_layer_and_ships_its_seccomp_profile(self):
        pod = of_kind(render("degraded"), "Deployment")[0]["spec"]["template"]["spec"]
        airlock = {c["name"]: c for c in pod["containers"]}["airlock"]
        self.assertEqual(env_of(airlock)["AIRLOCK_ALLOW_DEGRADED"], "cgroup")
        sc = airlock["securityContext"]
        self.assertNotIn("SYS_ADMIN", sc["capabilities"]["add"])
        self.assertEqual(sc["seccompProfile"]["type"], "Localhost")
        self.assertTrue(os.path.exists(os.path.join(DEPLOY_DIR, "seccomp", sc["seccompProfile"]["localhostProfile"])))


class SeccompProfile(unittest.TestCase):
    """deploy/seccomp/airlock.json: default-deny, and what airlock's sandbox setup calls is
    allowed without any capability condition (runtime defaults gate these on SYS_ADMIN)."""

    def test_allows_namespace_setup_without_capabilities(self):
        import json
        with open(os.path.join(DEPLOY_DIR, "seccomp", "airlock.json")) as f:
            profile = json.load(f)
        self.assertEqual(profile["defaultAction"], "SCMP_ACT_ERRNO")
        unconditional = set()
        for rule in profile["syscalls"]:
            if rule["action"] == "SCMP_ACT_ALLOW" and not rule.get("args") and not rule.get("includes"):
                unconditional.update(rule["names"])
        needed = {"clone", "clone3", "unshare", "mount", "umount2", "pivot_root", "sethostname", "setdomainname",
                  "seccomp", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
                  "pidfd_open", "pidfd_send_signal", "prctl", "capset", "setgroups"}
        self.assertEqual(needed - unconditional, set())
        for forbidden in ("kexec_load", "init_module", "bpf", "perf_event_open", "open_by_handle_at"):
            self.assertNotIn(forbidden, unconditional)
