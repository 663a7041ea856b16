"""The one SVD mechanism: ``svd_parametrize`` on any module weight, and the models built on it."""

import warnings

import pytest
import torch
from safetensors.torch import load_file
from torch import Tensor, nn

from spectral_analysis.linalg import SigmaMap, svd_compose
from spectral_analysis.nn import (
    build_model,
    constrain_,
    spectral_penalty,
    svd_factors,
    svd_parametrizations,
    svd_parametrize,
    svd_singular_values,
)
from spectral_analysis.train import TrainConfig, load_checkpoint, train
from spectral_analysis.train.checkpoint import save_checkpoint

D = torch.float64
LEGACY = "tests/data/legacy"


def test_linear_exact_init_keeps_the_weight_and_trains():
    torch.manual_seed(0)
    layer = nn.Linear(9, 5).double()
    before = layer.weight.detach().clone()
    svd_parametrize(layer, sigma=None, init="exact")
    assert torch.allclose(layer.weight, before, atol=1e-12)
    factors = svd_factors(layer)
    assert factors["u_reflectors"].shape == (5, 5) and factors["v_reflectors"].shape == (9, 5)
    assert torch.allclose(svd_singular_values(layer), torch.linalg.svdvals(before), atol=1e-12)
    layer(torch.randn(4, 9, dtype=D)).pow(2).sum().backward()
    params = layer.parametrizations.weight
    assert all(t.grad is not None and torch.isfinite(t.grad).all()
               for t in (params.original0, params.original1, params.original2))


def test_default_one_call_idiom_works_on_a_fresh_rnn_and_keeps_sigma_in_range():
    """The geotorch-like call: truncate init (works on any weight), sigmoid range (1.0, 0.1)."""
    torch.manual_seed(3)
    rnn = nn.RNN(4, 12, batch_first=True)
    svd_parametrize(rnn, "weight_hh_l0", m1=4, m2=4, sigma=(1.0, 0.1))
    optimizer = torch.optim.SGD(rnn.parameters(), lr=5.0)
    for _ in range(5):
        optimizer.zero_grad()
        out, _ = rnn(torch.randn(8, 6, 4))
        out.pow(2).sum().backward()
        optimizer.step()
    svals = torch.linalg.svdvals(rnn.weight_hh_l0.detach())
    assert bool((svals >= 0.9 - 1e-5).all() and (svals <= 1.1 + 1e-5).all())
    assert torch.allclose(svals, svd_singular_values(rnn, "weight_hh_l0"), atol=1e-5)


def test_forward_equals_the_dense_weight_and_gradcheck_on_rnn_lstm_linear():
    torch.manual_seed(1)
    rnn = nn.RNN(3, 6, batch_first=True).double()
    W = svd_compose([torch.randn(i, dtype=D) for i in range(1, 7)],
                    [torch.randn(i, dtype=D) for i in range(1, 7)], torch.full((6,), 0.9, dtype=D), (6, 6))
    with torch.no_grad():
        rnn.weight_hh_l0.copy_(W)
    svd_parametrize(rnn, "weight_hh_l0", sigma=SigmaMap("sigmoid", 1.0, 0.2), init="exact")
    x = torch.randn(2, 4, 3, dtype=D)
    out, _ = rnn(x)
    h = torch.zeros(2, 6, dtype=D)
    for t in range(4):
        h = torch.tanh(x[:, t] @ rnn.weight_ih_l0.T + rnn.bias_ih_l0
                       + h @ rnn.weight_hh_l0.T + rnn.bias_hh_l0)
    assert torch.allclose(out[:, -1], h, atol=1e-12)
    assert torch.allclose(rnn.weight_hh_l0, W, atol=1e-10)

    lstm = nn.LSTM(4, 5, batch_first=True).double()
    svd_parametrize(lstm, "weight_hh_l0", m1=3, m2=2)  # 20 x 5, rectangular
    linear = svd_parametrize(nn.Linear(6, 4).double(), m1=2, m2=3, sigma=None)
    for module, name, shape in ((rnn, "weight_hh_l0", (6, 6)), (lstm, "weight_hh_l0", (20, 5)),
                                (linear, "weight", (4, 6))):
        plist = module.parametrizations[name]
        param = plist[0]
        originals = tuple(getattr(plist, f"original{i}").detach().clone().requires_grad_() for i in range(3))
        assert param(*originals).shape == shape
        assert torch.autograd.gradcheck(param, originals)


def test_state_dicts_use_torchs_names_and_old_names_still_load():
    torch.manual_seed(5)
    layer = svd_parametrize(nn.Linear(5, 4), m1=4, m2=4, sigma=(1.0, 0.5), init="random")
    assert list(layer.state_dict()) == [name for name, _ in layer.named_parameters()]
    expected = load_file(f"{LEGACY}/expected.safetensors")
    old = load_file(f"{LEGACY}/svd_linear_state.safetensors")  # written with original0..2
    layer.load_state_dict(old)
    # to float32 rounding: MKL's kernels differ by CPU (AVX-512 against AVX2), so the bits do
    torch.testing.assert_close(layer.weight.detach(), expected["svd_linear_W"])
    renamed = {k.replace("original0", "u_reflectors").replace("original1", "v_reflectors")
               .replace("original2", "sigma_raw"): v for k, v in old.items()}  # as version 0.1 saved
    fresh = svd_parametrize(nn.Linear(5, 4), m1=4, m2=4, sigma=(1.0, 0.5), init="random")
    fresh.load_state_dict(renamed)
    assert torch.equal(fresh.weight, layer.weight)


def test_a_state_dict_drives_functional_call_and_round_trips_through_safetensors():
    from safetensors.torch import load, save
    from torch.func import functional_call

    torch.manual_seed(6)
    live = svd_parametrize(nn.Linear(6, 4), m1=3, m2=3, init="random")
    other = svd_parametrize(nn.Linear(6, 4), m1=3, m2=3, init="random")
    x = torch.randn(5, 6)
    out = functional_call(live, other.state_dict(), (x,))
    assert torch.equal(out, other(x)) and not torch.allclose(out, live(x))
    live.load_state_dict(load(save({k: v.contiguous() for k, v in other.state_dict().items()})))
    assert torch.equal(live(x), other(x))


def test_a_band_that_moves_an_existing_weight_warns():
    torch.manual_seed(7)
    moved = r"changed Linear.weight by 0\.\d+ .*clamped into the band \[0.9, 1.1\]"
    with pytest.warns(UserWarning, match=moved):
        svd_parametrize(nn.Linear(6, 4), sigma=(1.0, 0.1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        svd_parametrize(nn.Linear(6, 4), sigma=None)  # the full factorization: the weight as it was
        svd_parametrize(nn.Linear(6, 4), init="random")  # asks for a new weight


def test_checkpoints_written_before_the_refactor_load_unchanged():
    """Spectral-RNN / Spectral-MLP files of the earlier layout (u_reflectors, sigma_hat on the module)."""
    expected = load_file(f"{LEGACY}/expected.safetensors")
    rnn = load_checkpoint(f"{LEGACY}/spectral_rnn.safetensors").model
    # to float32 rounding: the expected values were written on a CPU whose MKL kernels round differently
    torch.testing.assert_close(rnn.transition_matrix(0).detach(), expected["spectral_rnn_W"])
    mlp = load_checkpoint(f"{LEGACY}/spectral_mlp.safetensors").model
    torch.testing.assert_close(mlp(torch.ones(1, 4)).detach(), expected["spectral_mlp_out"])


def test_toolkit_spectral_models_are_the_mechanism_and_round_trip(tmp_path):
    torch.manual_seed(4)
    model = build_model("spectral", 3, 8, 2, m1=3, m2=5, sigma_map="clip", r=0.2)
    owners = list(svd_parametrizations(model))
    assert len(owners) == 1 and owners[0][1] == "weight"
    with torch.no_grad():
        model.transitions[0].parametrizations.weight.original2.uniform_(-3, 3)
    constrain_(model)
    assert bool((svd_singular_values(model.transitions[0]) <= 1.2 + 1e-6).all())
    metadata = {"task": {"name": "addition"}, "step": 0, "metrics": {}, "train": {}}
    save_checkpoint(tmp_path / "m.safetensors", model, metadata)
    again = load_checkpoint(tmp_path / "m.safetensors").model
    assert torch.equal(again.transition_matrix(0), model.transition_matrix(0))
    mlp = build_model("spectral-mlp", 4, 6, 3, num_layers=2, sigma_map="none")
    assert len(list(svd_parametrizations(mlp))) == 4
    with torch.no_grad():
        mlp.hidden_layers[0].parametrizations.weight.original2.fill_(2.0)
    assert spectral_penalty(mlp).item() == pytest.approx(6 * 1.0)


def test_trainer_trains_the_spectral_rnn_and_sigma_stays_in_range(tmp_path):
    config = TrainConfig(task="addition", task_options={"length": 6, "train_size": 64, "test_size": 32},
                         progress=False,
                         model="spectral", model_options={"m1": 2, "m2": 2, "sigma_map": "clip", "r": 0.05},
                         hidden=6, steps=20, batch_size=16, lr=0.05, out=str(tmp_path / "run"),
                         eval_every=10)
    result = train(config)
    model = load_checkpoint(tmp_path / "run" / "last.safetensors").model
    before = build_model("spectral", 2, 6, 1, m1=2, m2=2, sigma_map="clip", r=0.05)
    assert not torch.equal(model.transition_matrix(0), before.transition_matrix(0))
    svals = torch.linalg.svdvals(model.transition_matrix(0).detach())
    assert bool((svals >= 0.95 - 1e-5).all() and (svals <= 1.05 + 1e-5).all())
    assert result is not None


def _reflector_lengths(module: nn.Module) -> list[Tensor]:
    raw = module.parametrizations.weight
    return [raw.original0.norm(dim=0), raw.original1.norm(dim=0)]


def test_unit_reflectors_keep_the_weight_and_project_after_each_step(tmp_path):
    torch.manual_seed(3)
    layer = svd_parametrize(nn.Linear(7, 5).double(), m1=4, m2=3, sigma=(1.0, 0.5), unit_reflectors=True)
    assert all(torch.allclose(lengths, torch.ones_like(lengths)) for lengths in _reflector_lengths(layer))
    raw = layer.parametrizations.weight
    with torch.no_grad():  # a step off the unit sphere, above the trapezoid included
        raw.original0.mul_(torch.rand_like(raw.original0) * 5 + 0.5).add_(0.3)
        raw.original1.mul_(torch.linspace(0.2, 3.0, 3, dtype=D))
        raw.original1[:, 2] = 0.0  # a zero reflector is the identity and stays zero
    W = layer.weight.detach().clone()
    constrain_(layer)
    assert torch.allclose(layer.weight.detach(), W, atol=1e-12)  # H(u) sees only u's direction (Eq. 1)
    u_lengths, v_lengths = _reflector_lengths(layer)
    assert torch.allclose(u_lengths, torch.ones(4, dtype=D))
    assert torch.allclose(v_lengths, torch.tensor([1.0, 1.0, 0.0], dtype=D))
    assert float(raw.original0.detach().triu(1).abs().max()) == 0.0  # nothing left above the trapezoid
    plain = svd_parametrize(nn.Linear(7, 5).double(), m1=4, m2=3, sigma=(1.0, 0.5), init="random")
    plain_lengths = _reflector_lengths(plain)[0]
    constrain_(plain)
    assert torch.equal(_reflector_lengths(plain)[0], plain_lengths)  # off by default
    assert not torch.allclose(plain_lengths, torch.ones_like(plain_lengths))  # N(0, 1) entries

    config = TrainConfig(task="addition", task_options={"length": 6, "train_size": 64, "test_size": 32},
                         progress=False, model="spectral",
                         model_options={"m1": 3, "m2": 2, "unit_reflectors": True, "input_std": 0.05},
                         hidden=6, steps=5, batch_size=16, lr=0.05, out=str(tmp_path / "run"), eval_every=5)
    train(config)
    model = load_checkpoint(tmp_path / "run" / "last.safetensors").model
    assert model.config["options"]["unit_reflectors"] is True
    transition = model.transitions[0]
    assert all(torch.allclose(lengths, torch.ones_like(lengths), atol=1e-6)
               for lengths in _reflector_lengths(transition))
    assert transition.svd.unit_reflectors


def test_ornn_unit_reflectors_keep_w_and_project_after_each_training_step(tmp_path):
    from spectral_analysis.nn.transitions import HouseholderTransition

    torch.manual_seed(4)
    unit = HouseholderTransition(6, 4, unit_reflectors=True).double()
    assert torch.allclose(unit.reflectors.norm(dim=0), torch.ones(4, dtype=D))
    with torch.no_grad():
        unit.reflectors.mul_(torch.linspace(0.3, 4.0, 4, dtype=D))
    W = unit.matrix().detach().clone()
    unit.constrain_()
    assert torch.allclose(unit.matrix().detach(), W, atol=1e-12)  # H(u) sees only u's direction (Eq. 1)
    assert torch.allclose(unit.reflectors.norm(dim=0), torch.ones(4, dtype=D))
    plain = HouseholderTransition(6, 4).double()
    lengths = plain.reflectors.detach().norm(dim=0)
    plain.constrain_()
    assert torch.equal(plain.reflectors.detach().norm(dim=0), lengths)  # off by default
    assert not torch.allclose(lengths, torch.ones_like(lengths))

    config = TrainConfig(task="addition", task_options={"length": 6, "train_size": 64, "test_size": 32},
                         progress=False, model="ornn", model_options={"m": 4, "unit_reflectors": True},
                         hidden=6, steps=5, batch_size=16, lr=0.05, out=str(tmp_path / "run"), eval_every=5)
    train(config)
    model = load_checkpoint(tmp_path / "run" / "last.safetensors").model
    assert model.config["options"]["unit_reflectors"] is True and model.transitions[0].unit_reflectors
    trained = model.transitions[0].reflectors.detach()
    assert torch.allclose(trained.norm(dim=0), torch.ones(4), atol=1e-6)


def test_input_std_scales_the_input_weights_and_refuses_nonsense():
    torch.manual_seed(0)
    wide = build_model("spectral", 4, 256, 2, m1=2, m2=2)
    narrow = build_model("spectral", 4, 256, 2, m1=2, m2=2, input_std=0.01)
    assert float(wide.input_weights[0].detach().std()) == pytest.approx(0.5, rel=0.1)  # 1/sqrt(fan-in 4)
    assert float(narrow.input_weights[0].detach().std()) == pytest.approx(0.01, rel=0.1)
    # input_std is the network's input matrix's (a word embedding's); the layers above read hidden states
    for model, rows in (("rnn", 64), ("lstm", 256), ("gru", 192)):
        two = build_model(model, 3, 64, 2, num_layers=2, input_std=2.0)
        assert [float(M.detach().std()) for M in two.input_weights] == pytest.approx([2.0, 0.125], rel=0.1)
        assert two.input_weights[1].shape == (rows, 64)
    for bad in (0.0, -1.0, float("nan"), True, "0.1"):
        with pytest.raises(ValueError, match="input_std must be a finite number > 0"):
            build_model("rnn", 3, 8, 2, input_std=bad)


def test_partial_counts_exact_init_explains_and_truncate_works():
    torch.manual_seed(2)
    layer = nn.Linear(16, 16).double()
    with pytest.raises(ValueError, match="not in the image"):
        svd_parametrize(layer, m1=2, m2=2, sigma=None, init="exact")
    layer = nn.Linear(16, 16).double()
    W = layer.weight.detach().clone()
    svd_parametrize(layer, m1=4, m2=3, sigma=(0.5, 0.45))
    svals = torch.linalg.svdvals(layer.weight.detach())
    assert bool((svals >= 0.05).all() and (svals <= 0.95).all())
    # Lemma 1: the leading m - 1 singular directions survive the truncation exactly
    U0, _, V0t = torch.linalg.svd(W)
    U1, _, V1t = torch.linalg.svd(layer.weight.detach())
    assert torch.allclose((U0[:, :3] * U1[:, :3]).sum(0).abs(), torch.ones(3, dtype=D), atol=1e-8)
    assert torch.allclose((V0t[:2] * V1t[:2]).sum(1).abs(), torch.ones(2, dtype=D), atol=1e-8)


def test_exact_init_rejects_singular_values_outside_the_map():
    layer = nn.Linear(4, 4).double()
    with torch.no_grad():
        layer.weight.copy_(3 * torch.eye(4))
    with pytest.raises(ValueError, match="outside"):
        svd_parametrize(layer, sigma=(1.0, 0.1), init="exact")


def test_parametrize_rejects_bad_targets():
    with pytest.raises(ValueError, match="2-D"):
        svd_parametrize(nn.Linear(3, 3), "bias")
    with pytest.raises(ValueError, match="no tensor attribute"):
        svd_parametrize(nn.Linear(3, 3), "kernel")
    with pytest.raises(ValueError, match="m1=9"):
        svd_parametrize(nn.Linear(3, 3), m1=9)
    with pytest.raises(ValueError, match="not parametrized"):
        svd_singular_values(nn.Linear(3, 3))
    with pytest.raises(ValueError, match="already parametrized"):
        svd_parametrize(svd_parametrize(nn.Linear(3, 3)))
    with pytest.raises(ValueError, match="sigma must be"):
        svd_parametrize(nn.Linear(3, 3), sigma=(1.0,))
    bad = nn.Linear(3, 3)
    with torch.no_grad():
        bad.weight[0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN or inf"):
        svd_parametrize(bad)


def test_zero_reflector_counts_give_a_scaled_diagonal_family():
    layer = nn.Linear(5, 5).double()
    diagonal = torch.diag(torch.tensor([2.0, 1.5, 1.0, 0.5, 0.25], dtype=D))
    with torch.no_grad():
        layer.weight.copy_(diagonal)
    svd_parametrize(layer, m1=0, m2=0, sigma=None, init="exact")
    assert svd_factors(layer)["u_reflectors"].shape == (5, 0)
    assert torch.allclose(layer.weight, diagonal)


def test_random_init_is_section_4s_and_later_assignment_decomposes():
    torch.manual_seed(5)
    layer = svd_parametrize(nn.Linear(6, 6).double(), m1=6, m2=6, sigma=(1.0, 0.3), init="random")
    assert torch.allclose(svd_singular_values(layer), torch.ones(6, dtype=D), atol=1e-12)
    target = torch.diag(torch.tensor([1.2, 1.1, 1.0, 0.9, 0.8, 0.75], dtype=D))
    layer.weight = target
    assert torch.allclose(layer.weight, target, atol=1e-8)


def test_parameter_count_is_the_papers():
    """Reflector lengths sum to m n - (m^2 - m)/2 per factor (Section 4), plus min(r, c) sigmas."""
    layer = svd_parametrize(nn.Linear(9, 6), m1=4, m2=3)
    param = layer.parametrizations.weight[0]
    expected = (4 * 6 - (16 - 4) // 2) + (3 * 9 - (9 - 3) // 2) + 6
    assert param.parameter_count() == expected == 18 + 24 + 6
