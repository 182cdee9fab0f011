"""``python -m ppsweep.explore``: runs :mod:`ppsweep.viz.explore_cli` as the program (the command keeps its name)."""

import runpy

if __name__ == "__main__":
    runpy.run_module("ppsweep.viz.explore_cli", run_name="__main__", alter_sys=True)
