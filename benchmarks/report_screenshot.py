"""A screenshot of a compare run's report.html as a reader sees it: headless Chromium, a 1280 px window.

Needs Debian's chromium (``apt-get install chromium``) and playwright (the dev extras); no browser download.

    dmk compare running_counts --out runs/rc
    python benchmarks/report_screenshot.py runs/rc docs/report.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

from playwright.sync_api import sync_playwright

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def main() -> None:
    """Write the screenshot."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": args.width, "height": 900})
        page.goto((args.run_dir / "report.html").resolve().as_uri())
        page.wait_for_load_state("load")
        page.screenshot(path=str(args.out), full_page=True)
        browser.close()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
