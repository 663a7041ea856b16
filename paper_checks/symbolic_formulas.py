"""Paper check: every derivative formula and count, derived with SymPy.

Run alone: ``python paper_checks/symbolic_formulas.py [--quick] [--json]``; all checks together:
``spectral-analysis check-paper``.
"""

import sys

from spectral_analysis.paper import script_main

if __name__ == "__main__":
    sys.exit(script_main("symbolic"))
