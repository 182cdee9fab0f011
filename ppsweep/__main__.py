"""``python -m ppsweep``: see :mod:`ppsweep.cli` (importing it is light: Ctrl-C is caught from here on)."""

from ppsweep.cli import main

main()
