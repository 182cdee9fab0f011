"""``python -m ppsweep``: see :mod:`ppsweep.cli`."""

from ppsweep.cli import main

main()
