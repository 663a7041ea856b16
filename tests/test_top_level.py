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
    from spectral_analysis.analysis.jacobians import jacobian_table, lyapunov_table
    from spectral_analysis.analysis.spectra import spectral_table
    from spectral_analysis.nn import svd_parametrize

    assert (sa.svd_parametrize, sa.spectra, sa.jacobians, sa.lyapunov, sa.bound, sa.certify) == (
        svd_parametrize, spectral_table, jacobian_table, lyapunov_table, bound_report, certify)
    assert sa.tables.__name__ == "spectral_analysis.tables" and "certify" in dir(sa)


def test_an_unknown_name_is_refused_with_the_names_there_are():
    with pytest.raises(AttributeError, match="no attribute 'spectrum'; the top level has .*'spectra'"):
        sa.spectrum  # noqa: B018


def test_the_top_level_example_runs():
    result = doctest.testmod(sa)
    assert result.attempted >= 6 and result.failed == 0


def test_the_analyzers_take_a_users_module():
    """Jacobians, Lyapunov exponents and the bound read a plain nn.LSTM / nn.RNN as they read the
    toolkit model it imports as."""
    import torch

    import spectral_analysis as sa

    torch.manual_seed(0)
    lstm, x = torch.nn.LSTM(3, 5, batch_first=True), torch.randn(2, 6, 3)
    imported = sa.load(lstm).model
    direct, via = sa.jacobians(lstm, x), sa.jacobians(imported, x)
    assert len(direct) == 2 * 7 and direct.equals(via)  # (batch, T + 1) rows, the same numbers
    assert (direct.loc[direct.t < 6, "log10_norm"] != 0).all()
    exponents = sa.lyapunov(lstm, x)
    assert exponents.equals(sa.lyapunov(imported, x)) and len(exponents) == 2 * 10  # d = 2n: h and c
    rnn = torch.nn.RNN(3, 5, nonlinearity="relu")
    inputs, labels = torch.randn(16, 6, 3), torch.randint(0, 5, (16,))
    from spectral_analysis.data.arrays import UserData

    report = sa.bound(rnn, user_data=UserData(inputs, labels, "in memory"), margin=0.5)
    assert report["subject"]["convention"] == "nn.Module"
    with pytest.raises(ValueError, match=r"no sequence length T: give --length \(length= in Python\)"):
        sa.bound(rnn)  # a module carries no task: the error names the Python argument too
