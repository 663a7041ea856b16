"""Every Python example of the README runs, in order, in a scratch directory, within its time."""

import os
import re
import time
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.S | re.M)


def test_readme_python_examples_run(tmp_path):
    assert len(BLOCKS) >= 5
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        namespace: dict = {}
        for number, block in enumerate(BLOCKS, start=1):
            started = time.perf_counter()
            exec(compile(block, f"README python block {number}", "exec"), namespace)  # noqa: S102
            assert time.perf_counter() - started < 30, f"README block {number} is slow"
    finally:
        os.chdir(cwd)
