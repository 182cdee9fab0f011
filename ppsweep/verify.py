"""``python -m ppsweep.verify``: runs :mod:`ppsweep.store.verify` as the program (the command keeps its name)."""

import runpy

if __name__ == "__main__":
    runpy.run_module("ppsweep.store.verify", run_name="__main__", alter_sys=True)
