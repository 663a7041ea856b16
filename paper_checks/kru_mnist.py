"""Paper check: KRU's pixel-MNIST claims (Table 2): KRU ahead of the LSTM on permuted MNIST, the LSTM ahead
of KRU on unpermuted MNIST, both trained by KRU's recipe.

Run alone: ``python paper_checks/kru_mnist.py [--quick] [--json]``; all checks together:
``spectral-analysis check-paper``.
"""

import sys

from spectral_analysis.paper import script_main

if __name__ == "__main__":
    sys.exit(script_main("kru-mnist"))
