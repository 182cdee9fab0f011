"""``python -m ppsweep``: see :mod:`ppsweep.cli.main` (importing it is light: Ctrl-C is caught from here on)."""

from ppsweep.cli.main import main

main()
