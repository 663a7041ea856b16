"""Paper check: the ICML experiments' qualitative claims (addition, L = 300) at reduced size.

Run alone: ``python paper_checks/experiments.py [--quick] [--json]``; all checks together:
``spectral-analysis check-paper``.
"""

import sys

from spectral_analysis.paper import script_main

if __name__ == "__main__":
    sys.exit(script_main("experiments"))
