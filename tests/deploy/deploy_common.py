"""Shared by tests/deploy: paths, and skip-or-fail when a tool is missing."""

import os
import shutil
import unittest

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPLOY_DIR = os.path.join(SOURCE_DIR, "deploy")


def must_work():
    return os.environ.get("AIRLOCK_MUST_WORK") == "1"


def need_tool(name, package):
    """The tool's path; skips the test when it is absent (fails under AIRLOCK_MUST_WORK=1)."""
    path = shutil.which(name)
    if path:
        return path
    message = f"{name} is not installed (apt-get install {package}; scripts/setup.sh does)"
    if must_work():
        raise AssertionError(message)
    raise unittest.SkipTest(message)
