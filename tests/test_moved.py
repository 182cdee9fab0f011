"""Old module paths import, with a DeprecationWarning naming the new path, as the module at its new path."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from ppsweep.moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_path_imports_the_new_module_with_a_warning(old):
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=MOVED[old].replace(".", r"\.")):
        module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old])


def test_the_first_rounds_import_line_works():
    run = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", "from ppsweep.interchange import write_csv"],
                         capture_output=True, text=True)
    assert run.returncode == 1 and "ppsweep.interchange moved to ppsweep.tables.interchange" in run.stderr
    run = subprocess.run([sys.executable, "-c", "from ppsweep.interchange import write_csv; print(write_csv.__module__)"],
                         capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip() == "ppsweep.tables.interchange"


def test_new_paths_exist_and_old_ones_are_not_files():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    for old, new in MOVED.items():
        assert importlib.util.find_spec(new) is not None
        assert not (root / (old.replace(".", "/") + ".py")).exists()
