"""Headless Chromium driven by Selenium (Debian's chromium, chromium-driver, python3-selenium),
for the e2e tests that need a real browser (test_console.py, test_pipeline.py).

    skip_unless_browser()            # in setUpModule: skips, or fails under AIRLOCK_MUST_WORK=1
    driver = browser(downloads_dir)  # a Chrome that saves downloads there, logs the console
"""

import os
import shutil
import unittest

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    HAVE_SELENIUM = True
except ImportError:
    HAVE_SELENIUM = False

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")


def skip_unless_browser(what):
    """Raises SkipTest when chromium, chromedriver or Selenium is missing (AssertionError under
    AIRLOCK_MUST_WORK=1: scripts/setup.sh installs them)."""
    if HAVE_SELENIUM and CHROMIUM and CHROMEDRIVER:
        return
    if os.environ.get("AIRLOCK_MUST_WORK") == "1":
        raise AssertionError(f"{what} needs chromium, chromium-driver and python3-selenium "
                             "(scripts/setup.sh installs them)")
    raise unittest.SkipTest("chromium, chromium-driver or python3-selenium is not installed")


def browser(downloads):
    opts = webdriver.ChromeOptions()
    opts.add_experimental_option("prefs", {"download.default_directory": downloads,
                                           "download.prompt_for_download": False})
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1100", "--no-first-run", "--disable-extensions"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
