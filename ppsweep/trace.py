"""``python -m ppsweep.trace``: runs :mod:`ppsweep.viz.trace` as the program (the command keeps its name)."""

import runpy

if __name__ == "__main__":
    runpy.run_module("ppsweep.viz.trace", run_name="__main__", alter_sys=True)
