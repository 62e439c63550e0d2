"""Take the README's screenshots of the inspector: ``python docs/make_screenshots.py``.

Builds the tests' sample file (tests/support/inspector_data.py) dated to the last few days, serves
it with ``tiered-memory serve`` and photographs each page with Debian's chromium
(``/usr/bin/chromium``) through Playwright, into ``docs/inspector/*.png``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playwright.sync_api import ViewportSize, sync_playwright  # noqa: E402

from tests.support.inspector_data import DAY, build  # noqa: E402
from tests.support.inspector_server import serving  # noqa: E402

OUT = ROOT / "docs" / "inspector"
VIEWPORT: ViewportSize = {"width": 1100, "height": 720}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "agent.db"
        ids = build(db, start=int(time.time() * 1000) - 6 * DAY, hub_relations=40)
        with serving(db) as base, sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium")
            page = browser.new_page(viewport=VIEWPORT)
            shots = {
                "overview": "/",
                "memories": "/memories?per_page=12",
                "memory": f"/memories/{ids['prefs']}",
                "recall": "/recall?q=who+went+to+the+adoption+agency&k=3",
                "session": f"/sessions/{ids['session']}",
                "graph": f"/graph/{ids['caroline']}",
                "notes": "/notes",
                "note": f"/notes/{ids['notes']['lisbon']}",
                "recall_notes": "/recall?q=when+to+call+the+adoption+agency&k=3&notes=1",
            }
            for name, path in shots.items():
                page.goto(base + path)
                page.screenshot(path=str(OUT / f"{name}.png"))
                print(f"{OUT / name}.png  <- {path}")
            browser.close()


if __name__ == "__main__":
    main()
