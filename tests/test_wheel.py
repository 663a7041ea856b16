"""The package as a researcher installs it: a built wheel in a clean venv beside the current NumPy 2,
geotorch and WeightWatcher; the README's ten lines and the spectra of a plain ``nn.LSTM`` and an MLP run
there, the catalog comes with the wheel, and results stay out of site-packages."""

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

IN_THE_VENV = textwrap.dedent('''
    import json, os, subprocess, sys
    from pathlib import Path
    import numpy, torch
    import geotorch, weightwatcher
    import spectral_analysis as sa
    from spectral_analysis.experiments import load_catalog
    from spectral_analysis.io import default_results_dir

    exec(Path(sys.argv[1]).read_text())  # the README's ten lines
    mlp = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
    site = Path(sa.__file__).resolve().parents[1]
    print(json.dumps({
        "numpy": numpy.__version__,
        "package": sa.__file__,
        "lstm": sa.spectra(torch.nn.LSTM(3, 8))[["name", "gate"]].values.tolist(),
        "mlp": sa.spectra(mlp)["name"].tolist(),
        "catalog": len(load_catalog()),
        "results_in_site_packages": site in default_results_dir().resolve().parents,
        "results": str(default_results_dir()),
    }))
''')


def _readme_python() -> str:
    return re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)


@pytest.mark.slow
def test_the_wheel_installs_beside_numpy_2_geotorch_and_weightwatcher(tmp_path):
    wheels = tmp_path / "wheels"
    build = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels), str(ROOT)]
    subprocess.run(build, check=True, timeout=600)
    (wheel,) = wheels.glob("spectral_analysis-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", f"{wheel}", "numpy>=2", "geotorch",
                    "weightwatcher"], check=True, timeout=1200)
    (tmp_path / "readme.py").write_text(_readme_python())
    (tmp_path / "check.py").write_text(IN_THE_VENV)
    work = tmp_path / "work"  # not the checkout: the installed package is what imports
    work.mkdir()
    done = subprocess.run([str(python), str(tmp_path / "check.py"), str(tmp_path / "readme.py")], cwd=work,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    import json

    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["numpy"].startswith("2."), found["numpy"]
    assert str(venv) in found["package"]
    assert found["lstm"][:4] == [["weight_ih_l0", g] for g in ("input", "forget", "cell", "output")]
    assert found["mlp"] == ["0.weight", "2.weight"]
    assert found["catalog"] >= 20  # every experiment of the catalog, from the wheel's package data
    assert not found["results_in_site_packages"] and found["results"] == str(work / "results")
    run = [str(venv / "bin" / "spectral-analysis"), "run", "fig1-addition", "--scale", "smoke"]
    cli = subprocess.run(run, cwd=work, capture_output=True, text=True, timeout=300)  # Ray Tune is an extra
    assert cli.returncode == 1 and "pip install 'spectral-analysis[sweep]'" in cli.stderr, cli.stderr
