"""The controller's live dashboard as a person sees it: a real control plane (emulated cluster,
collectors, controller) and a real IO-Cop with a holder and a waiter; headless Chromium (Debian's
chromium, driven by playwright) logs in with the site token, the screenshots must show the
cluster's numbers, and the page must follow a change in the cluster (a trace with plan hits and
misses uploaded, an OSS's collector killed). Also: who may read what (the page, the state, the
admin token refused) and the token-free metrics port."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import httpx
import pytest

from conftest import need_tool
from iez.access.server import spawn
from iez.controller.dashboard import iocop_state
from iez.controller.local import free_port
from test_audit_page import not_blank

from plugins.controller_stack import MiB, requests_for

HOLDER = textwrap.dedent("""
    import sys
    from iez.access.token_client import AccessClient
    c = AccessClient(sys.argv[1], sys.argv[2])
    c.io_begin("checkpoint")
    print("held", flush=True)
    sys.stdin.readline()
""")


def hold(endpoint: str, appid: str, token: str) -> subprocess.Popen:
    """An IO-Cop client that asks for a token and keeps it until its stdin closes."""
    return subprocess.Popen([sys.executable, "-c", HOLDER, endpoint, appid], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, IEZ_TOKEN=token))


def browser(p):
    chromium = need_tool("chromium", "apt-get install chromium (scripts/setup.sh)")
    return p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox"])


def test_dashboard_in_chromium(stack, tmp_path, iez_cmd, subenv):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: .venv/bin/pip install playwright")
    iocop = spawn(tmp_path / "iocop.db", token=stack.site, line_bind="")
    clients: list[subprocess.Popen] = []
    try:
        holder = hold(iocop.zmq, "1:vpic", stack.site)
        clients.append(holder)
        assert holder.stdout is not None and holder.stdout.readline() == "held\n", holder.stderr
        clients.append(hold(iocop.zmq, "2:hacc", stack.site))  # exclusive: it waits behind vpic
        metrics_port = free_port()
        stack.start_collectors()
        stack.start_controller("--no-gate", "--iocop", iocop.zmq, "--metrics-listen", f"127.0.0.1:{metrics_port}")

        # Who may read what.
        assert httpx.get(f"{stack.url}/dashboard").status_code == 200  # no data in it
        assert httpx.get(f"{stack.url}/dashboard/state").status_code == 401
        refused = httpx.get(f"{stack.url}/dashboard/state", headers={"Authorization": f"Bearer {stack.admin}"})
        assert refused.status_code == 403 and "admin token" in refused.json()["detail"]
        assert httpx.get(f"{stack.url}/metrics").status_code == 401
        free = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics")
        assert free.status_code == 200 and 'iez_stale{component="ost",target="iez-OST0000"} 0.0' in free.text

        with sync_playwright() as p:
            b = browser(p)
            try:
                page = b.new_page(viewport={"width": 1400, "height": 1300})
                page.goto(f"{stack.url}/dashboard?interval=0.5")
                page.fill("#token", stack.admin)  # the wrong token: the page says why
                page.click("button")
                page.wait_for_function("document.getElementById('error').textContent.includes('403')")
                page.fill("#token", stack.site)
                page.click("button")
                page.wait_for_function("document.querySelectorAll('#osts tr').length === 16 && "
                                       "document.querySelectorAll('#holders tr').length === 2 && "
                                       "document.querySelectorAll('#waiting tr').length === 2")
                assert page.text_content("#error") == ""
                assert re.search(r"OSTCost \d\.\d{3} ", page.text_content("#summary"))
                first = page.inner_text("#osts").splitlines()[1].split("\t")
                assert first[0] == "iez-OST0000" and first[1] == "oss0" and re.fullmatch(r"\d+\.\d %", first[3].strip())
                assert re.fullmatch(r"\d+\.\d", first[4]) and first[-1] == "fresh"
                assert page.inner_text("#holders").splitlines()[1].startswith("1:vpic\t")
                assert page.inner_text("#waiting").splitlines()[1].startswith("2:hacc\t1\t")
                before = tmp_path / "before.png"
                page.screenshot(path=str(before), full_page=True)
                page.locator("#osts").screenshot(path=str(tmp_path / "osts.png"))
                not_blank(before)
                not_blank(tmp_path / "osts.png")

                # The cluster changes: 300 MiB land on OST 3, a traced run with hits and misses
                # comes in, an OSS goes silent.
                big = stack.emu / "fs" / "big"
                r = subprocess.run(iez_cmd + ["setstripe", "-c", "1", "-i", "3", str(big)], capture_output=True,
                                   text=True, env=subenv, timeout=60)
                assert r.returncode == 0, r.stderr
                with open(big, "wb") as f:
                    for _ in range(300):
                        f.write(b"\1" * MiB)
                c = stack.client()
                c.upload_ingested("ior", requests_for("ior", stack.emu, 4, 8 * MiB, 2), plan_hits=3, plan_misses=1)
                stack.kill("oss1")
                page.wait_for_function("document.getElementById('apps').innerText.includes('ior') && "
                                       "document.getElementById('osts').innerText.split('stale').length - 1 >= 5 && "
                                       "document.getElementById('osts').innerText.includes('29.3 %')",
                                       timeout=30_000)
                app = page.inner_text("#apps").splitlines()[1].split("\t")
                assert app[0] == "ior" and app[3:5] == ["3", "1"]
                rows = {r.split("\t")[0]: r.split("\t") for r in page.inner_text("#osts").splitlines()[1:]}
                assert {n for n, r in rows.items() if r[-1] == "stale"} == {f"iez-OST{i:04X}" for i in range(5, 10)}
                assert rows["iez-OST0003"][3].strip() == "29.3 %"  # 300 MiB of 1 GiB
                assert re.search(r"OSTCost (\d+\.\d{3}) ", page.text_content("#summary")).group(1) != "1.000"
                after = tmp_path / "after.png"
                page.screenshot(path=str(after), full_page=True)
                not_blank(after)
                assert before.read_bytes() != after.read_bytes()
            finally:
                b.close()
    finally:
        for cl in clients:
            cl.kill()
            cl.wait(timeout=10)
        assert iocop.stop() == 0


def test_iocop_view_says_why_it_is_missing():
    assert iocop_state("", "x" * 32) == {"configured": False}
    endpoint = f"tcp://127.0.0.1:{free_port()}"  # nothing listens there
    got = iocop_state(endpoint, "site-" + "d" * 27)
    assert got["configured"] and got["endpoint"] == endpoint and "did not answer" in got["error"]
