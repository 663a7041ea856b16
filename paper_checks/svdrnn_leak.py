"""Paper check: the earlier version's Fig. 2(c, f) claims that svdRNN resists the leaky ReLU's
non-linearity (higher accuracy, faster convergence at every leak) and that its gradient at the first
cell does not vanish while RNN's does when the non-linearity is higher.

Run alone: ``python paper_checks/svdrnn_leak.py [--quick] [--json]``; all checks together:
``spectral-analysis check-paper``.
"""

import sys

from spectral_analysis.paper import script_main

if __name__ == "__main__":
    sys.exit(script_main("svdrnn-leak"))
