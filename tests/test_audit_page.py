"""The HTML reports of iez advise and iez audit as a browser shows them: headless Chromium
(Debian's chromium, driven by playwright) loads each page; every figure must load and the
screenshot must not be blank."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import need_tool
from test_darshan import need_log


def screenshot(page_path: Path, png: Path) -> dict:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: .venv/bin/pip install playwright")
    chromium = need_tool("chromium", "apt-get install chromium (scripts/setup.sh)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1600})
            page.goto(page_path.resolve().as_uri())
            page.wait_for_load_state("load")
            images = page.eval_on_selector_all("img", "els => els.map(e => [e.getAttribute('src'), e.naturalWidth])")
            title = page.title()
            page.screenshot(path=str(png), full_page=True)
        finally:
            browser.close()
    return {"images": images, "title": title}


def not_blank(png: Path) -> None:
    from matplotlib.image import imread

    px = imread(png)[..., :3]
    ink = (px < 0.9).any(axis=-1).mean()  # share of pixels that are not (near) white
    colours = len(np.unique((px * 255).astype(np.uint8).reshape(-1, 3), axis=0))
    assert ink > 0.02 and colours > 50, (png, ink, colours)


def run(cmd: list[str], env: dict) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr


def test_advise_page_in_chromium(iez_cmd, subenv, tmp_path):
    out = tmp_path / "advise"
    run([*iez_cmd, "advise", str(need_log("ior_hdf5_example.darshan")), "-o", str(out)], subenv)
    got = screenshot(out / "index.html", tmp_path / "advise.png")
    assert "32324925" in got["title"]
    assert sorted(src for src, _ in got["images"]) == ["osts.png", "times.png"]
    assert all(width > 100 for _, width in got["images"]), got["images"]
    not_blank(tmp_path / "advise.png")


def test_audit_page_in_chromium(iez_cmd, subenv, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in ("ior_hdf5_example.darshan", "sample-goodost.darshan"):
        shutil.copy(need_log(name), logs / name)
    (logs / "junk.darshan").write_text("not a log\n")
    out = tmp_path / "audit"
    run([*iez_cmd, "audit", str(logs), "-o", str(out), "--workers", "1"], subenv)
    got = screenshot(out / "index.html", tmp_path / "audit.png")
    assert {src for src, _ in got["images"]} == {"worst_jobs.png", "problems.png", "ost_cost.png", "days.png"}
    assert all(width > 100 for _, width in got["images"]), got["images"]
    not_blank(tmp_path / "audit.png")
