"""Every bad key or value is one line and exit 2 before any store exists or any table is built (issues 31 and 34).

Unknown keys (Hydra's ``+foo=1``, ``+engine.bogus=1``) name the closest valid keys; values out of
range (workers, chunk, straggler workers, samples with noise settings, ``p=[inf]``, option values,
``cv=1e308``, physical bandwidth and latency) and values whose size follows from them
(``hanayo@waves=100000``, ``slots.f=1000000``, ``noise.samples=1e9``, a million-value logspace)
are refused with ``dry_run=true`` too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ppsweep.cli.main import run
from ppsweep.sweep import estimate as estimate_mod
from ppsweep.sweep.config import compose_config, known_keys

ROOT = Path(__file__).resolve().parent.parent
GRID = ["name=grid", "schedules=[gpipe,1f1b]", "p=[4]", "m=[8]", "engine.compilation_cache=null", "results_dir=out"]

CASES = [
    ("+foo=1", "foo: unknown config key; valid keys: "),
    ("+engine.bogus=1", "engine.bogus: unknown config key; closest: engine."),
    ("+engine.chunks=1", "engine.chunks: unknown config key; closest: engine.chunk"),
    ("+comm.mod=overlap", "comm.mod: unknown config key; closest: comm.mode"),
    ("+noise.sample=2", "noise.sample: unknown config key; closest: noise.samples"),
    ("+model.layer=2", "model.layer: unknown config key; closest: model.layers"),
    ("+system.bandwith=1e9", "system.bandwith: unknown config key; closest: system.bandwidth"),
    ("+slots.g=1", "slots.g: unknown config key; closest: slots.f"),
    ("p=[inf]", "p: must be an integer >= 2, got inf"),
    ('schedules=["hanayo@waves=0"]', "schedule 'hanayo@waves=0': waves: must be an integer >= 1, got 0"),
    ("schedules=[hanayo] schedule_options={hanayo:{waves:-1}}", "schedule 'hanayo': waves: must be an integer >= 1, got -1"),
    ('schedules=["interleaved_1f1b@v=0"]', "schedule 'interleaved_1f1b@v=0': v: must be an integer >= 1"),
    ('schedules=["chimera@split=abc"]', "schedule 'chimera@split=abc': split: must be a string 'a:b'"),
    ('schedules=["hanayo@waves=100000"]', "schedule 'hanayo@waves=100000': option waves must be at most 64"),
    ('schedules=["interleaved_1f1b@v=100000"]', "schedule 'interleaved_1f1b@v=100000': option v must be at most 64"),
    ("slots.f=1000000", "slots.f: must be an integer from 1 to 64"),
    ("noise.samples=1000000000", "noise.samples: must be at most 100,000"),
    ("noise.samples=2 noise.compute.cv=1e308", "noise.compute.cv: must be in [0, 10]"),
    ("noise.samples=0 noise.compute.cv=0.1", "noise.samples: 0 turns noise off, but noise.compute.cv=0.1 is set"),
    ("noise.samples=2 noise.straggler.prob=0.1 noise.straggler.workers=[100]", "noise.straggler.workers: worker 100 exists at no p"),
    ("engine.workers=1000", "engine.workers: at most 4 per core"),
    ("engine.chunk=1e12", "engine.chunk: must be an integer from 1 to 4,194,304"),
    ("bandwidth=[1e-300]", "bandwidth: 1e-300 bytes/s is outside the physical range"),
    ("latency=[1e300]", "latency: 1e+300 s is outside the physical range"),
    ("bandwidth=${logspace:1e9,1e12,1000000}", "bandwidth: logspace.num: must be an integer from 1 to 10,000"),
    ("schedules=[a_directory.csv]", "schedule: 'a_directory.csv' is a directory, not a CSV file"),
]


#: Values whose cost follows from them: refused with dry_run=true too (the estimate never sees them).
SIZES = ("waves=100000", "v=100000", "slots.f=1000000", "noise.samples=1000000000", "1000000}")


@pytest.mark.parametrize("overrides, message", CASES)
def test_one_line_exit_2_before_any_store_or_table(overrides, message, tmp_path, capsys, monkeypatch):
    dry_run = any(size in overrides for size in SIZES)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a_directory.csv").mkdir()

    def no_table(*args, **kwargs):
        raise AssertionError("a table was built")

    monkeypatch.setattr(estimate_mod, "build_schedule", no_table)
    status = run(compose_config([*GRID, *overrides.split(" "), f"dry_run={str(dry_run).lower()}"]))
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert status == 2 and len(lines) == 1 and lines[0].startswith(f"error: {message}"), lines
    assert not (tmp_path / "out").exists()


def test_a_bad_scan_environment_variable_is_one_line_before_any_store(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PPSWEEP_SCAN", "bogus")
    assert run(compose_config(GRID)) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert lines == ["error: PPSWEEP_SCAN: unknown scan 'bogus'; accepted: auto, jax, native"]
    assert not (tmp_path / "out").exists()


def test_the_valid_keys_come_from_the_schema():
    """A key added to conf/config.yaml or to the model/system dataclasses is accepted without a hand list."""
    from dataclasses import fields

    from ppsweep.cost_model import ModelConfig, SystemConfig

    known = known_keys()
    assert set(known["engine"]) >= {"dtype", "chunk", "method", "compilation_cache", "workers"}
    assert set(known["model"]) == {f.name for f in fields(ModelConfig)}
    assert set(known["system"]) == {f.name for f in fields(SystemConfig)}
    assert known["schedule_options"] is None  # free keys, checked by the schedules


def test_hydra_plus_typo_on_the_command_line_is_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "ppsweep", *GRID, "+engine.bogus=1"], cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, timeout=120)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: engine.bogus: unknown config key; closest:"), lines
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("module", ["show", "trace"])
def test_show_and_trace_refuse_a_table_beyond_the_machine(module, capsys, tmp_path):
    import importlib

    main = importlib.import_module(f"ppsweep.viz.{module}").main
    extra = [] if module == "show" else ["--trace", str(tmp_path / "t.json")]
    assert main(["gpipe", "p=100000", "m=8", *extra]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "the gpipe table needs about" in lines[0] and "over this machine's memory" in lines[0], lines
    assert not (tmp_path / "t.json").exists()


@pytest.mark.parametrize("body, message", [
    ("raise RuntimeError('boom')", "schedule 'ubounds:make': raised RuntimeError at p=4, m=8: boom"),
    ("return 42", "schedule 'ubounds:make': returned a int at p=4, m=8"),
    (None, "schedule: cannot load 'ubounds:make' as module:function (ZeroDivisionError"),
])
def test_a_user_schedule_that_fails_is_one_line_before_any_store(body, message, tmp_path, capsys, monkeypatch):
    from ppsweep.schedules import user

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    source = "1 / 0\n" if body is None else f"def make(p, m):\n    {body}\n"
    (tmp_path / "ubounds.py").write_text(source)
    monkeypatch.delitem(sys.modules, "ubounds", raising=False)
    user._callable_schedule.cache_clear()
    assert run(compose_config([*GRID, "schedules=[gpipe,ubounds:make]"])) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {message}"), lines
    assert not (tmp_path / "out").exists()
    user._callable_schedule.cache_clear()
