"""``python -m ppsweep.analyze``: runs :mod:`ppsweep.cli.analyze` as the program (the command keeps its name)."""

import runpy

if __name__ == "__main__":
    runpy.run_module("ppsweep.cli.analyze", run_name="__main__", alter_sys=True)
