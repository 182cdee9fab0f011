"""``python -m ppsweep.analysis STORE``: the same command as ``python -m ppsweep.analyze`` (its only implementation)."""

import sys

from ppsweep.cli.analyze import main

if __name__ == "__main__":
    sys.exit(main())
