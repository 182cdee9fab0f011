"""The explorer page: its content, the command line, and a real headless browser (Debian's chromium).

The browser tests load the self-contained page from a file (no network), catch the console
(``--enable-logging=stderr``) and take screenshots. A selection is applied through the page's
address (``#p=4&m=6``), which sets the selectors' values; the selectors' own change callback
then redraws every plot, as when a user picks a value.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import numpy as np
import pytest
import xarray as xr

import zarr

from ppsweep import analysis

from ppsweep.viz import explore, explore_cli
from ppsweep.store.integrity import record_layout
from ppsweep.store.units import CHECKSUM, done_units, read_unit, unit_checksum

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: The schedules' colours on the page (store order: gpipe, 1f1b, chimera).
CHIMERA_RGB = (0x55, 0xA8, 0x68)


@pytest.fixture(scope="module")
def store(small_store):
    return small_store


@pytest.fixture(scope="module")
def sample_store(store, tmp_path_factory):
    """The store with a ``sample`` dimension of three noisy copies of ``t_sim`` (seeded)."""
    ds = xr.open_zarr(store, chunks=None).load()
    rng = np.random.default_rng(7)
    noise = xr.DataArray(1 + 0.3 * rng.standard_normal((3,) + ds.t_sim.shape), dims=("sample",) + ds.t_sim.dims)
    noisy = (ds.t_sim * noise).transpose(*ds.t_sim.dims, "sample")
    out = ds.drop_vars([v for v in ds.data_vars if "bandwidth" in ds[v].dims]).assign(t_sim=noisy).assign_coords(sample=[0, 1, 2])
    path = tmp_path_factory.mktemp("explore") / "samples.zarr"
    out.to_zarr(path, zarr_format=3, consolidated=False)
    # A hand-made store: its units' checksums must cover the values written here.
    group = zarr.open_group(str(path))
    for i, j in np.argwhere(done_units(group)).tolist():
        group[CHECKSUM][i, j] = unit_checksum(read_unit(group, i, j), i, j, group.attrs["fingerprint"])
    record_layout(path)  # and its layout is this one
    return path


def test_a_selector_for_every_dimension_and_no_network(store):
    ds = analysis.load(store)
    document = explore.build_page(ds)
    names = {model.name for model in document.select({"type": _select_type()})}
    assert names == {"select_p", "select_m", "select_bandwidth", "select_latency", "select_x"}
    assert document.select_one({"name": "winner_map"}) is not None and document.select_one({"name": "memory"}) is not None
    assert document.select_one({"name": "pwin"}) is None  # no samples, no P(win) panel
    html = explore.page_html(ds)
    assert not re.search(r"<script[^>]*\bsrc=", html) and not re.search(r"<link[^>]*\bhref=\"?https?:", html)
    assert "gpipe" in html and "chimera" in html


def _select_type():
    from bokeh.models import Select

    return Select


def test_samples_add_pwin_and_regret(sample_store):
    ds = analysis.load(sample_store)
    document = explore.build_page(ds)
    assert document.select_one({"name": "pwin"}) is not None and document.select_one({"name": "regret"}) is not None
    assert document.select_one({"name": "select_sample"}) is not None
    data = explore.page_data(ds)
    raw = xr.open_zarr(sample_store, chunks=None, consolidated=False).load()
    # Independently, at p=2, m=2, the highest bandwidth, the lowest latency:
    t = raw.t_sim.sel(p=2, m=2).isel(bandwidth=-1, latency=0).values  # (schedule, sample)
    fastest = t <= t.min(axis=0) * (1 + 1e-9)
    rest = [d for d in data["dims"] if d != "sample"]
    at = {"p": 0, "m": 0, "bandwidth": raw.sizes["bandwidth"] - 1, "latency": 0}
    shape = [raw.sizes[d] for d in rest]
    k = int(np.ravel_multi_index([at[d] for d in rest], shape))
    n = int(np.prod(shape))
    np.testing.assert_allclose([data["pwin"][s * n + k] for s in range(3)], fastest.mean(axis=1))
    # The formula picks chimera (bubble 0) at p=2, m=2: regret = mean(t_chimera / t_fastest - 1).
    np.testing.assert_allclose(data["regret_formula"][k], np.mean(t[2] / t.min(axis=0) - 1), rtol=1e-12)


def test_command_line(store, tmp_path, capsys):
    page = tmp_path / "page.html"
    assert explore_cli.main([str(store), "--html", str(page)]) == 0
    assert "self-contained" in capsys.readouterr().out and page.stat().st_size > 100_000
    assert explore_cli.main([str(store), "--html", str(tmp_path / "p8.html"), "--sel", "p=4", "--sel", "latency=1e-05"]) == 0
    capsys.readouterr()
    for argv, message in [
        ([str(tmp_path / "missing.zarr"), "--html", str(page)], "no such store"),
        ([str(store), "--sel", "p=3", "--html", str(page)], "p has no value '3'; it has 2, 4"),
        ([str(store), "--sel", "warp=1", "--html", str(page)], "'warp' is not a dimension"),
    ]:
        assert explore_cli.main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and message in err[0], err


# ---- in a real browser -----------------------------------------------------------------------


def _need_chromium():
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing in CI: .ci/run installs it (apt-get install chromium)")
        pytest.skip("chromium not installed (apt-get install chromium); CI installs it and runs this test")


def _shoot(url: str, shot) -> list[str]:
    """Screenshot ``url``; returns the page's console lines."""
    run = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=15000", "--window-size=1300,1500", f"--screenshot={shot}", url],
        capture_output=True, text=True, timeout=180,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return [line for line in run.stderr.splitlines() if ":CONSOLE" in line]


def _pixels(path) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"))


def _count(pixels: np.ndarray, rgb: tuple[int, int, int]) -> int:
    return int(np.all(np.abs(pixels.astype(int) - rgb) <= 2, axis=-1).sum())


@pytest.fixture(scope="module")
def page(store, tmp_path_factory):
    path = tmp_path_factory.mktemp("page") / "page.html"
    assert explore_cli.main([str(store), "--html", str(path)]) == 0
    return path


@pytest.fixture(scope="module")
def default_shot(page, tmp_path_factory):
    """The page at its default selection, shot once: (its console lines, its pixels)."""
    _need_chromium()
    shot = tmp_path_factory.mktemp("shots") / "shot.png"
    console = _shoot(page.as_uri(), shot)
    return console, _pixels(shot)


def test_the_page_renders_without_console_errors(default_shot):
    console, pixels = default_shot
    assert any("[bokeh" in line for line in console), console  # BokehJS ran
    errors = [line for line in console if re.search(r"Uncaught|Error|error|failed", line)]
    assert not errors, errors
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 50  # not blank
    # Default selection p=2, m=2: chimera wins above a crossover bandwidth, so its colour fills map cells.
    assert _count(pixels, CHIMERA_RGB) > 5000


def test_changing_a_selector_changes_the_plot(page, default_shot, tmp_path):
    _, before = default_shot
    console = _shoot(page.as_uri() + "#p=4&m=6", tmp_path / "after.png")
    assert not [line for line in console if re.search(r"Uncaught|Error|error|failed", line)]
    after = _pixels(tmp_path / "after.png")
    assert before.shape == after.shape and np.any(before != after)
    # At p=4, m=6 chimera cannot run: its colour leaves the map, the lines and the bars
    # (what remains is the legend's swatch and line sample).
    assert _count(after, CHIMERA_RGB) < _count(before, CHIMERA_RGB) / 10


@pytest.mark.parametrize("stop, inherited", [("SIGINT", "default"), ("SIGINT", "ignored"), ("SIGTERM", "default")])
def test_serving_the_page(store, stop, inherited):
    """Served until Ctrl-C or SIGTERM, then ``stopped``; Ctrl-C also where the process started with SIGINT
    ignored (a shell's background job: ``sh -c "trap '' INT; exec ..."`` gives it that)."""
    import shlex
    import signal
    import sys
    import urllib.request
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    command = [sys.executable, "-X", "faulthandler", "-m", "ppsweep.explore", str(store), "--port", "0", "--no-browser"]
    if inherited == "ignored":
        command = ["sh", "-c", f"trap '' INT; exec {shlex.join(command)}"]
    process = subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stderr.readline()
        match = re.search(r"serving the explorer on (http://127\.0\.0\.1:\d+/)", line)
        assert match, line
        with urllib.request.urlopen(match.group(1), timeout=30) as response:
            html = response.read().decode()
        assert "ppsweep explorer: small.zarr" in html and "Bokeh" in html
    finally:
        process.send_signal(getattr(signal, stop))
        try:
            out, _ = process.communicate(timeout=120)  # stops within a second; the margin is for a loaded CI machine
        except subprocess.TimeoutExpired:  # say where it hangs (faulthandler prints every thread on SIGABRT)
            process.send_signal(signal.SIGABRT)
            _, err = process.communicate(timeout=30)
            pytest.fail(f"the served page did not stop within 120 s of {stop}; its threads:\n{err[:6000]}")
    assert process.returncode == 0 and out.strip() == "stopped"
