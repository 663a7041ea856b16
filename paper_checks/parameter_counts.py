"""Paper check: the parameter counts of the ICML paper's Tables 2, 3 and 4, from their configurations.

Run alone: ``python paper_checks/parameter_counts.py [--quick] [--json]``; all checks together:
``spectral-analysis check-paper``.
"""

import sys

from spectral_analysis.paper import script_main

if __name__ == "__main__":
    sys.exit(script_main("parameter-counts"))
