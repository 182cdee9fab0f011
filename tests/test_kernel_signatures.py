"""Each compiled kernel that builds a table, its program and its ``ports`` routing takes one set of
argument types over every schedule of ``+sweep=design``: numba compiles a kernel once per set of
types (and per literal argument), so a second set costs every cold run another compile (an array
in Fortran order where the others are in C order was one)."""

import subprocess
import sys

import yaml

from ppsweep.sweep.config import find_conf_dir

_PROBE = """
import sys
from numba.core.registry import CPUDispatcher
from ppsweep import build_schedule
from ppsweep.engine.comm import route
from ppsweep.engine.fast_program import PROGRAM
for label in sys.argv[1:]:
    for p, m in ((4, 16), (8, 64)):  # every design schedule runs at both
        route(PROGRAM(build_schedule(label, p, m)), "ports")
for name, module in sorted(sys.modules.items()):
    if name.startswith("ppsweep"):
        for attr, obj in vars(module).items():
            if isinstance(obj, CPUDispatcher) and obj.__module__ == name and obj.signatures:
                print(f"{name}.{attr} {len(obj.signatures)}")
"""


def test_table_kernels_compile_once_over_the_design_schedules():
    schedules = yaml.safe_load((find_conf_dir() / "sweep" / "design.yaml").read_text())["schedules"]
    done = subprocess.run([sys.executable, "-c", _PROBE, *schedules], capture_output=True, text=True, check=True)
    counts = dict(line.rsplit(" ", 1) for line in done.stdout.splitlines())
    assert len(counts) >= 5, done.stdout  # the kernels of realizing, checking, compiling and routing ran
    assert {name: n for name, n in counts.items() if n != "1"} == {}
