"""The package's top level: the names a script reaches for first, imported on first use."""

import doctest
import subprocess
import sys

import pytest

import spectral_analysis as sa


def test_importing_the_package_loads_no_torch_and_each_name_is_its_modules_own():
    code = ("import sys, spectral_analysis as sa; assert 'torch' not in sys.modules; "
            "sa.svd_parametrize; assert 'torch' in sys.modules; print(sorted(sa.__all__))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "svd_parametrize" in out and "certify" in out
    from spectral_analysis.analysis.bound_report import bound_report
    from spectral_analysis.analysis.certify import certify
    from spectral_analysis.analysis.jacobians import jacobian_products
    from spectral_analysis.analysis.spectra import spectral_table
    from spectral_analysis.nn import svd_parametrize

    assert (sa.svd_parametrize, sa.spectra, sa.jacobians, sa.bound, sa.certify) == (
        svd_parametrize, spectral_table, jacobian_products, bound_report, certify)
    assert sa.tables.__name__ == "spectral_analysis.tables" and "certify" in dir(sa)


def test_an_unknown_name_is_refused_with_the_names_there_are():
    with pytest.raises(AttributeError, match="no attribute 'spectrum'; the top level has .*'spectra'"):
        sa.spectrum  # noqa: B018


def test_the_top_level_example_runs():
    result = doctest.testmod(sa)
    assert result.attempted >= 6 and result.failed == 0
