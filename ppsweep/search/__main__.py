"""``python -m ppsweep.search``: see :mod:`ppsweep.search.cli`."""

import sys

from ppsweep.search.cli import main

sys.exit(main())
