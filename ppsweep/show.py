"""``python -m ppsweep.show``: runs :mod:`ppsweep.viz.show` as the program (the command keeps its name)."""

import runpy

if __name__ == "__main__":
    runpy.run_module("ppsweep.viz.show", run_name="__main__", alter_sys=True)
