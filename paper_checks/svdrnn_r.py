"""Paper check: the earlier version's Fig. 2(a) claims that svdRNN performs best on row MNIST and that
the choice of r has little influence on the final precision.

Run alone: ``python paper_checks/svdrnn_r.py [--quick] [--json]``; all checks together:
``spectral-analysis check-paper``.
"""

import sys

from spectral_analysis.paper import script_main

if __name__ == "__main__":
    sys.exit(script_main("svdrnn-r"))
