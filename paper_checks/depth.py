"""Paper check: Fig. 5's depth experiment (MLP, ResNet and their SVD versions on flattened MNIST).

Run alone: ``python paper_checks/depth.py [--quick] [--json]``; all checks together:
``spectral-analysis check-paper``.
"""

import sys

from spectral_analysis.paper import script_main

if __name__ == "__main__":
    sys.exit(script_main("depth"))
