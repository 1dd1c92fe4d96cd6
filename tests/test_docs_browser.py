"""The built site in a real browser: each benchmark page shows a plot and never scrolls sideways.

Debian's ``chromium`` opens each benchmark page of the site that tests/head_start.py builds, at a
desktop's width and at 500 px (the narrowest window headless Chromium opens), and a probe script
run on the page's ``load`` event reports what a reader sees: every image loaded (``complete``
and a natural width), the page body no wider than the window (``scrollWidth <= clientWidth``),
and every table inside a box that scrolls sideways (``overflow-x: auto``), not one that cuts it.

``.ci/run`` installs chromium where it is missing. Elsewhere the test skips and says how to
install it, except under CI (``CI`` set), where a missing browser fails it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from store_backends import tool

PAGES = (
    "benchmarks/index.html",
    "benchmarks/quality/index.html",
    "benchmarks/speed/index.html",
    "benchmarks/conversation-memory/index.html",
)
WIDTHS = (1280, 500)  # a desktop, and the narrowest window headless Chromium opens

# Run once everything (images included) has loaded; the answer goes into the title, which
# --dump-dom prints with the rest of the page.
PROBE = """
<script>
window.addEventListener("load", () => {
  const root = document.documentElement;
  const images = [...document.querySelectorAll("article img")].map((img) => ({
    src: img.getAttribute("src"),
    loaded: img.complete && img.naturalWidth > 0,
  }));
  const tables = [...document.querySelectorAll("article table")].map((table) => {
    let box = table.parentElement;
    while (box && box !== document.body && getComputedStyle(box).overflowX === "visible") {
      box = box.parentElement;
    }
    const overflow = box && box !== document.body ? getComputedStyle(box).overflowX : "page";
    const wide = box && box !== document.body ? table.scrollWidth > box.clientWidth : false;
    return { overflow, wide, width: table.scrollWidth };
  });
  document.title = "PROBE " + JSON.stringify({
    scrollWidth: root.scrollWidth, clientWidth: root.clientWidth, images, tables,
  });
});
</script>
"""


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    return tool(found, "Debian's chromium: apt-get install -y chromium")


def _probe(browser: str, page: Path, width: int) -> dict[str, Any]:
    """What the probe reports for ``page`` in a window ``width`` pixels wide."""
    html = page.read_text(encoding="utf-8")
    probed = page.with_name(f"probe-{width}.html")  # beside it: relative links still resolve
    probed.write_text(html.replace("</body>", PROBE + "</body>", 1), encoding="utf-8")
    result = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",  # as root, in CI
            "--disable-gpu",
            "--no-first-run",
            "--hide-scrollbars",
            f"--window-size={width},900",
            "--virtual-time-budget=10000",  # let the page load before the DOM is dumped
            "--dump-dom",
            probed.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    found = re.search(r"<title>PROBE (.*?)</title>", result.stdout, re.S)
    assert found, f"no probe answer from {page}: {result.stderr[-2000:]}"
    return json.loads(found.group(1).replace("&amp;", "&").replace("&quot;", '"'))


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", PAGES)
def test_benchmark_page_shows_its_plots_and_never_scrolls_sideways(
    site: Path, name: str, width: int
) -> None:
    report = _probe(_chromium(), site / name, width)
    images = report["images"]
    assert images, f"{name}: no image"
    assert all(image["loaded"] for image in images), f"{name}: not loaded: {images}"
    assert report["scrollWidth"] <= report["clientWidth"], (
        f"{name} at {width} px: the page is {report['scrollWidth']} px wide, the window "
        f"{report['clientWidth']}"
    )
    for table in report["tables"]:
        # a wide table scrolls inside its own box; no box cuts one (hidden, clip)
        assert table["overflow"] in ("auto", "scroll"), f"{name}: a table in a {table} box"
    assert report["tables"] or name == "benchmarks/index.html"
