"""The served explorer (Bokeh server) on a store past the embedding limit, in a real headless browser.

The store is a real sweep of 4.19 M points (2 schedules × p {2, 4} × m {2, 4} × 2,048 bandwidths ×
256 latencies): 21 M values in its five point variables, past the page's 4 M values of ``t_sim``,
so ``python -m ppsweep.explore STORE`` serves it. Chromium is driven through its DevTools protocol
(tornado's websocket client): a served page draws only once its data has come over the server's
websocket, which a plain ``--screenshot`` does not wait for.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import re
import subprocess
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import zarr

from ppsweep import analysis
from ppsweep.viz import explore, explore_cli, explore_served

from test_explore import CHROMIUM, _count, _need_chromium, _pixels, sample_store, store  # noqa: F401 - fixtures

GPIPE_RGB = (0x4C, 0x72, 0xB0)  # gpipe wins at m = 4
TIE_RGB = (0xB0, 0xC4, 0xDE)  # gpipe and 1f1b tie at m = 2 (the first tie colour)
SELECTION = {"p": 0, "m": 0, "bandwidth": 0, "latency": 0}


@pytest.fixture(scope="module")
def big_store(tmp_path_factory):
    from ppsweep.sweep.config import compose_config
    from ppsweep.sweep.evaluate import SweepSpec
    from ppsweep.sweep.runner import run_sweep

    path = tmp_path_factory.mktemp("served") / "big.zarr"
    # python -m ppsweep name=big schedules=[gpipe,1f1b] p=[2,4] m=[2,4] 'bandwidth={...}' 'latency={...}'
    overrides = ["name=big", "schedules=[gpipe,1f1b]", "p=[2,4]", "m=[2,4]",
                 "bandwidth={start: 1e9, stop: 1e12, num: 2048}", "latency={start: 1e-7, stop: 1e-5, num: 256}"]
    spec = SweepSpec.from_config(compose_config(overrides))
    run_sweep(spec, path, "", progress=False)
    return path


def test_the_store_is_past_the_limit(big_store):
    ds = analysis.load(big_store, verify=False)
    points = [v for v in ds.data_vars.values() if v.dims == ds["t_sim"].dims]
    assert ds["t_sim"].size > explore.MAX_VALUES and sum(v.size for v in points) >= 10_000_000


def test_a_selection_reads_a_small_lazy_part(big_store):
    ds = analysis.load(big_store, verify=False)
    part = explore_served.selection_part(ds, {**SELECTION, "bandwidth": 1000}, "bandwidth")
    assert part["t_sim"].chunks is not None  # still dask: nothing read yet
    assert dict(part["t_sim"].sizes) == {"schedule": 2, "p": 1, "m": 1, "bandwidth": 161, "latency": 160}
    assert 1000 in [list(ds.bandwidth.values).index(v) for v in part.bandwidth.values]  # the selected one is kept
    along_p = explore_served.selection_part(ds, SELECTION, "p")
    assert dict(along_p["t_sim"].sizes) == {"schedule": 2, "p": 2, "m": 1, "bandwidth": 160, "latency": 160}
    # The part's winner map, against the store's raw step times at the same points (a tie: within 1e-9).
    data = explore.page_data(part)
    raw = zarr.open_group(str(big_store), mode="r")["t_sim"]
    bw = [list(ds.bandwidth.values).index(v) for v in part.bandwidth.values]
    lat = [list(ds.latency.values).index(v) for v in part.latency.values]
    t = raw[:, 0, 0][:, bw][:, :, lat]  # (schedule, bandwidth, latency)
    fastest = t <= t.min(axis=0) * (1 + 1e-9)
    np.testing.assert_array_equal(data["winner"], (fastest[0] * 1 + fastest[1] * 2).ravel())


def test_selectors_recompute_the_part_and_the_store_stays_lazy(big_store):
    from bokeh.document import Document

    ds = analysis.load(big_store, verify=False)
    document = Document()
    explore_served.served_document(document, ds, "t")
    holder = document.select_one({"name": "page_data"})
    assert holder.data["labels"]["m"] == ["2"] and len(holder.data["labels"]["bandwidth"]) == 160
    document.select_one({"name": "select_m"}).value = "4"
    for callback in list(document.session_callbacks):  # the next-tick recomputation, as the server would run it
        callback.callback()
    assert holder.data["labels"]["m"] == ["4"] and set(holder.data["winner"]) == {1.0}  # gpipe everywhere at m = 4
    assert all(ds[v].chunks is not None for v in ds.data_vars)


def test_a_damaged_unit_is_named_not_drawn(small_store, tmp_path):
    """Each unit is checked against its checksum when a selection first reads it."""
    import shutil

    from bokeh.document import Document

    path = tmp_path / "small.zarr"
    shutil.copytree(small_store, path)
    group = zarr.open_group(str(path), mode="r+")
    group["t_sim"][0, 0, 1, 0, 0] = 1.0  # unit p=2, m=6, behind its checksum's back
    ds = analysis.load(path, verify=False)
    check = explore_served.UnitCheck(path)
    document = Document()
    explore_served.served_document(document, ds, "t", check)  # first part: p=2, m=2, intact
    assert document.select_one({"name": "page_data"}).data["labels"]["m"] == ["2"]
    document.select_one({"name": "select_m"}).value = "6"
    for callback in list(document.session_callbacks):
        callback.callback()
    status = document.select_one({"name": "status"}).text
    assert "damaged units" in status and "m=6" in status and "ppsweep.verify" in status, status
    assert document.select_one({"name": "page_data"}).data["labels"]["m"] == ["2"]  # the damaged part was not drawn


def test_a_served_part_keeps_every_sample(sample_store):  # noqa: F811 - the fixture
    """With a ``sample`` dimension the part keeps all samples: P(win) and regret as the static page has them."""
    from bokeh.document import Document

    ds = analysis.load(sample_store, verify=False)
    document = Document()
    explore_served.served_document(document, ds, "t")
    document.select_one({"name": "select_bandwidth"}).value = explore.coordinates(ds, ["bandwidth"])["labels"]["bandwidth"][-1]
    for callback in list(document.session_callbacks):
        callback.callback()
    served = document.select_one({"name": "page_data"}).data
    static = explore.page_data(ds)
    assert served["labels"]["sample"] == ["0", "1", "2"] and served["has_sample"]

    def at(data, point):  # flat index of point (dimension -> label) over the grid without sample
        rest = [d for d in data["dims"] if d != "sample"]
        shape = [len(data["labels"][d]) for d in rest]
        return int(np.ravel_multi_index([data["labels"][d].index(point[d]) for d in rest], shape)), int(np.prod(shape))

    point = {d: document.select_one({"name": f"select_{d}"}).value for d in static["dims"] if d != "sample"}
    (k, n), (k0, n0) = at(served, point), at(static, point)
    assert [served["pwin"][s * n + k] for s in range(3)] == [static["pwin"][s * n0 + k0] for s in range(3)]
    assert served["regret_formula"][k] == static["regret_formula"][k0] and served["regret_table"][k] == static["regret_table"][k0]


# ---- in a real browser, driven through the DevTools protocol ----------------------------------


async def _devtools(url: str, steps, shots: Path, timeout: float = 60) -> list:
    """Open ``url`` in headless Chromium and run ``steps``: (JS to run or None, JS condition to wait for, screenshot name)."""
    from tornado.websocket import websocket_connect

    process = subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", f"--user-data-dir={shots / 'profile'}", "--remote-debugging-port=0",
         "--window-size=1300,1500", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        for line in process.stderr:
            match = re.search(r"DevTools listening on ws://([\d.:]+)/", line)
            if match:
                break
        with urllib.request.urlopen(f"http://{match.group(1)}/json/list", timeout=30) as response:
            target = next(t for t in json.load(response) if t["type"] == "page")
        socket = await websocket_connect(target["webSocketDebuggerUrl"], max_message_size=1 << 28)
        ids = itertools.count(1)
        errors: list = []

        async def call(method: str, **params):
            key = next(ids)
            socket.write_message(json.dumps({"id": key, "method": method, "params": params}))
            while True:
                message = json.loads(await socket.read_message())
                event = message.get("method")
                if event == "Runtime.exceptionThrown" or (event == "Runtime.consoleAPICalled" and message["params"]["type"] == "error"):
                    errors.append(message["params"])
                if message.get("id") == key:
                    assert "error" not in message, message
                    return message["result"]

        async def evaluate(expression: str):
            result = await call("Runtime.evaluate", expression=expression, returnByValue=True)
            assert "exceptionDetails" not in result, result
            return result["result"].get("value")

        await call("Page.enable")
        await call("Runtime.enable")
        await call("Page.navigate", url=url)
        out = []
        for action, condition, name in steps:
            if action:
                await evaluate(action)
            deadline = time.monotonic() + timeout
            while not await evaluate(f"(() => {{ try {{ return Boolean({condition}); }} catch (e) {{ return false; }} }})()"):
                assert time.monotonic() < deadline, f"timed out waiting for {condition}"
                await asyncio.sleep(0.2)
            await asyncio.sleep(0.5)  # the canvas repaints
            shot = shots / f"{name}.png"
            shot.write_bytes(base64.b64decode((await call("Page.captureScreenshot", format="png"))["data"]))
            out.append(_pixels(shot))
        socket.close()
        assert not errors, errors  # no exception, no console error on the page
        return out
    finally:
        process.kill()
        process.wait()


STATUS = "Bokeh.documents[0].get_model_by_name('status').text"
LINE = "Bokeh.documents[0].get_model_by_name('line_gpipe').data"


def test_the_command_serves_a_store_past_the_limit(big_store, monkeypatch, capsys):
    served = []
    monkeypatch.setattr(explore_served, "serve_store", lambda dataset, title, port, **options: served.append((dataset, options)))
    assert explore_cli.main([str(big_store), "--port", "0", "--no-browser"]) == 0  # past the limit: served
    assert len(served) == 1 and served[0][0]["t_sim"].chunks is not None and served[0][1]["store"] == str(big_store)
    assert explore_cli.main([str(big_store), "--html", "page.html", "--serve"]) == 2
    assert "--serve: a served page cannot be written to a file" in capsys.readouterr().err
    assert explore_cli.main([str(big_store), "--html", "page.html"]) == 2
    assert "or serve it (no --html)" in capsys.readouterr().err


@pytest.fixture
def server(big_store):
    """The served page of the big store, on a thread of this process: (its URL, the lazily opened dataset)."""
    import queue
    import threading

    from tornado.ioloop import IOLoop

    dataset = analysis.load(big_store, verify=False)
    started: queue.Queue = queue.Queue()

    def run():
        asyncio.set_event_loop(asyncio.new_event_loop())
        server = explore_served.start_server(dataset, "ppsweep explorer: big.zarr", 0, store=big_store)
        started.put(server)
        IOLoop.current().start()
        server.stop()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    server = started.get(timeout=60)
    yield f"http://127.0.0.1:{server.port}/", dataset
    server.io_loop.add_callback(server.io_loop.stop)
    thread.join(timeout=30)


def test_served_page_renders_and_follows_the_selectors(server, tmp_path):
    _need_chromium()
    url, dataset = server
    steps = [
        # The address's selection reaches the server, which sends that part: the map redraws.
        (None, f"{STATUS}.includes('m=2') && {STATUS}.includes('p=4')", "first"),
        # A selector changed as a user would: the server recomputes, the page redraws.
        ("Bokeh.documents[0].get_model_by_name('select_m').value = '4'", f"{STATUS}.includes('m=4')", "second"),
        # The step time against latency: its 160 spread values (in seconds, below 1).
        ("Bokeh.documents[0].get_model_by_name('select_x').value = 'latency'", f"{LINE}.x.length == 160 && {LINE}.x[159] < 1", "third"),
    ]
    first, second, third = asyncio.run(_devtools(url + "#p=4", steps, tmp_path))
    colours = (first[..., 0].astype(np.int32) << 16) | (first[..., 1].astype(np.int32) << 8) | first[..., 2]
    assert len(np.unique(colours)) > 50  # not blank
    # At m = 2 gpipe and 1f1b tie everywhere: the tie colour fills the map (the thin cell borders
    # take the rest); at m = 4 gpipe wins: its colour fills the map, the tie colour is gone.
    assert _count(first, TIE_RGB) > 40_000 and _count(second, TIE_RGB) < 100
    assert _count(second, GPIPE_RGB) > _count(first, GPIPE_RGB) + 40_000
    assert np.any(third != second)  # the step-time panel redrew
    # The server read parts of the store on demand: the dataset it serves is still lazy (dask).
    assert all(dataset[v].chunks is not None for v in dataset.data_vars)
