"""Paper check: the addition and copy baselines of the ICML paper and KRU.

Run alone: ``python paper_checks/baselines.py [--quick] [--json]``; all checks together:
``spectral-analysis check-paper``.
"""

import sys

from spectral_analysis.paper import script_main

if __name__ == "__main__":
    sys.exit(script_main("baselines"))
