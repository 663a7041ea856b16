"""``python -m spectral_analysis.cli``."""

import sys

from spectral_analysis.cli import main

sys.exit(main())
