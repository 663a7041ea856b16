"""Paper check: Fig. 3's claim that Spectral-RNN has the highest pixel and permuted MNIST accuracy.

Run alone: ``python paper_checks/mnist_ranking.py [--quick] [--json]``; all checks together:
``spectral-analysis check-paper``.
"""

import sys

from spectral_analysis.paper import script_main

if __name__ == "__main__":
    sys.exit(script_main("mnist"))
