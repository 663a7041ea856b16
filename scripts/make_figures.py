"""Regenerate figures/ from the kept results in results/ (no training): a thin call of
``spectral-analysis figures``, which takes the same options.

    python scripts/make_figures.py [--experiment NAME] [--out figures] [--results results]
"""

import sys

from spectral_analysis.cli import main

if __name__ == "__main__":
    sys.exit(main(["figures", *sys.argv[1:]]))
