"""A page opened in a real headless Chromium (Debian's ``chromium``; ``make test`` installs it): its DOM after the
scripts ran, what it logged to the console, and the network requests it made."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass

# Chromium's own background traffic off; the page's requests are still made (and logged).
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-sync",
         "--disable-component-update", "--no-first-run", "--disable-default-apps", "--disable-extensions",
         "--hide-scrollbars", "--virtual-time-budget=15000", "--enable-logging=stderr", "--v=0"]


@dataclass(frozen=True)
class Rendered:
    dom: str
    console: list  # the page's console messages (errors and uncaught exceptions included)
    requests: list  # URLs the page asked for beyond file: and data: ones


def browser() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert path, "no chromium: `make test` installs Debian's chromium package (apt-get install chromium)"
    return path


def render(page: str, tmp_path, screenshot: str | None = None, width: int = 1280, height: int = 4000) -> Rendered:
    """``page`` (a local HTML file) rendered: DOM, console and page requests (from Chromium's net log)."""
    net_log = str(tmp_path / "net-log.json")
    cmd = [browser(), *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--log-net-log={net_log}",
           f"--window-size={width},{height}", "--dump-dom", "file://" + os.path.abspath(page)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    if screenshot:
        shot = [c for c in cmd if c != "--dump-dom"][:-1] + [f"--screenshot={screenshot}", cmd[-1]]
        subprocess.run(shot, capture_output=True, timeout=180, check=True)
    return Rendered(done.stdout, console, page_requests(net_log))


def page_requests(net_log: str) -> list:
    """The URLs requested for a file:// page (its network isolation key), other than file: and data: URLs."""
    with open(net_log, encoding="utf-8") as f:
        log = json.load(f)
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = []
    for e in log["events"]:
        params = e.get("params") or {}
        if e["type"] == start and "file://" in str(params.get("network_isolation_key", "")):
            if not str(params.get("url", "")).startswith(("file:", "data:", "blob:")):
                urls.append(params["url"])
    return urls
