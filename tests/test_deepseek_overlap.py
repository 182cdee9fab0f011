"""DualPipe's measured overlap credit: the script reproduces the committed numbers from the committed
excerpt of DeepSeek's trace, and the numbers are usable as ``system.fb_overlap=NAME``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from ppsweep.overlap_credits import DATA, named_credits, resolve_fb_overlap
from ppsweep.sweep.config import compose_config, spec_from_config

ROOT = Path(__file__).resolve().parents[1]
EXCERPT = ROOT / "tests" / "data" / "deepseek_train_excerpt.json.gz"


def script():
    spec = importlib.util.spec_from_file_location("deepseek_overlap", ROOT / "scripts" / "deepseek_overlap.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_reproduces_the_committed_numbers_from_the_excerpt():
    data = yaml.safe_load(DATA.read_text())
    assert EXCERPT.stat().st_size < 20_000
    s = script()
    spans = s.pair_spans(s.read_trace(EXCERPT))
    assert spans == data["spans_us"]
    for name, entry in data["credits"].items():
        key = name.removeprefix("deepseek_")
        got = s.credits(spans)
        assert (got[key], got[f"{key}_raw"]) == (entry["fb_overlap"], entry["raw"])
        assert named_credits()[name] == entry["fb_overlap"]


def test_a_named_credit_in_the_config():
    spec = spec_from_config(compose_config(["system.fb_overlap=deepseek_compute", "schedules=[dualpipev]"]))
    assert spec.system.fb_overlap == named_credits()["deepseek_compute"] == pytest.approx(0.0149, abs=1e-4)
    assert resolve_fb_overlap(0.25) == 0.25
    with pytest.raises(ValueError, match=r"^system.fb_overlap: must be a number in \[0, 1\] or one of deepseek_compute, deepseek_a2a, got 'deepseek'$"):
        spec_from_config(compose_config(["system.fb_overlap=deepseek"]))
