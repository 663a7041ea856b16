"""Models: transitions, recurrent and feed-forward nets, the registry and its parameter counts."""

import pytest
import torch
from torch import nn

from spectral_analysis.nn import (
    MODEL_NAMES,
    RECURRENT_MODELS,
    DenseTransition,
    HouseholderTransition,
    SpectralLinear,
    SpectralTransition,
    SVDParametrization,
    build_model,
)

D = torch.float64


def _inputs(name: str, batch: int = 4, time: int = 6, ni: int = 3, dtype=torch.float32) -> torch.Tensor:
    shape = (batch, time, ni) if name in RECURRENT_MODELS else (batch, ni)
    return torch.randn(*shape, dtype=dtype)


def _free_parameter_count(model: nn.Module) -> int:
    """Entries of the parameter tensors that the forward pass can see (packed reflectors are masked)."""
    total = 0
    for module in model.modules():
        for pname, p in module.named_parameters(recurse=False):
            if pname in ("original0", "original1") and isinstance(module[0], SVDParametrization):
                mask = module[0].mask_u if pname == "original0" else module[0].mask_v
                total += int(mask.sum())
            elif pname == "reflectors":
                total += int(module.mask.sum())
            else:
                total += p.numel()
    return total


@pytest.mark.parametrize("n,m1,m2,ni,ny", [(8, 8, 8, 3, 2), (16, 4, 7, 1, 10), (128, 16, 16, 1, 10),
                                           (32, 0, 5, 2, 1)])
def test_spectral_parameter_count_is_section_4_formula(n, m1, m2, ni, ny):
    model = build_model("spectral", ni, n, ny, m1=m1, m2=m2)
    counts = model.parameter_counts()
    assert counts["total"] == (ny + ni + m1 + m2 + 2) * n - (m1**2 + m2**2 - m1 - m2) // 2
    assert counts["transition"] == sum(range(n - m1 + 1, n + 1)) + sum(range(n - m2 + 1, n + 1)) + n
    assert counts["total"] == _free_parameter_count(model)


def test_rnn_parameter_count_and_full_reflector_spectral_count():
    n, ni, ny = 20, 3, 4
    assert build_model("rnn", ni, n, ny).parameter_counts()["total"] == (ny + ni + n + 1) * n
    # m1 = m2 = n: Section 4's (n_y + n_i + n + 3) n
    assert build_model("spectral", ni, n, ny).parameter_counts()["total"] == (ny + ni + n + 3) * n


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_counts_match_the_tensors_of_every_model(name):
    model = build_model(name, 5, 12, 3, num_layers=2)
    counts = model.parameter_counts()
    assert counts["total"] == sum(v for k, v in counts.items() if k != "total")
    assert counts["total"] == _free_parameter_count(model)


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_every_model_trains_on_cpu(name):
    torch.manual_seed(0)
    model = build_model(name, 3, 10, 2)
    x = _inputs(name)
    target = torch.randn(model(x).shape)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = (model(x) - target).square().mean()
        loss.backward()
        opt.step()
        model.constrain_()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("kind", ["sigmoid", "clip"])
def test_singular_values_stay_in_the_band_under_aggressive_training(kind):
    torch.manual_seed(1)
    model = build_model("spectral", 2, 12, 1, m1=6, m2=9, sigma_map=kind, sigma_star=1.0, r=0.05).double()
    x = torch.randn(8, 20, 2, dtype=D)
    opt = torch.optim.Adam(model.parameters(), lr=0.5)
    for _ in range(10):
        opt.zero_grad()
        (model(x) - 3.0).square().mean().backward()
        opt.step()
        model.constrain_()
    svals = torch.linalg.svdvals(model.transition_matrix().detach())
    assert bool((svals >= 0.95 - 1e-12).all() and (svals <= 1.05 + 1e-12).all())
    assert torch.allclose(model.singular_values(), svals, atol=1e-12)  # exact from sigma
    assert float(svals.max() - svals.min()) > 0.01  # training did move them


def test_r_zero_spectral_and_ornn_are_orthogonal():
    torch.manual_seed(2)
    for model in (build_model("spectral", 2, 10, 1, m1=4, m2=7, r=0.0).double(),
                  build_model("ornn", 2, 10, 1, m=5).double()):
        W = model.transition_matrix().detach()
        assert torch.allclose(W @ W.T, torch.eye(10, dtype=D), atol=1e-12)
        assert torch.allclose(model.singular_values(), torch.ones(10, dtype=D))


def test_transitions_expose_dense_matrix_and_structure():
    torch.manual_seed(3)
    spectral = SpectralTransition(7, 3, 4).double()
    form = spectral.structured_form()
    W = spectral.matrix()
    recon = spectral.apply_reference(torch.eye(7, dtype=D)).T
    assert torch.allclose(W, recon, atol=1e-12)
    assert form["u_reflectors"].shape == (7, 3) and torch.all(form["u_reflectors"].triu(1) == 0)
    assert spectral.singular_value_bound() == pytest.approx(1.1)
    assert HouseholderTransition(5, 2).singular_value_bound() == 1.0
    dense = DenseTransition(6, "orthogonal")
    assert torch.allclose(dense.matrix() @ dense.matrix().T, torch.eye(6), atol=1e-5)
    assert torch.equal(DenseTransition(4, "identity").matrix(), torch.eye(4))
    assert dense.singular_value_bound() is None


def test_recurrence_equation_and_hidden_states():
    """Eq. 4-5 written out by hand; states are carried across calls (split run = full run)."""
    torch.manual_seed(4)
    model = build_model("spectral", 3, 6, 2, m1=3, m2=6, activation="leaky_relu", leak=0.3).double()
    x = torch.randn(2, 9, 3, dtype=D)
    y, hidden = model(x, return_hidden=True)
    W, M, b, Y = (model.transition_matrix(), model.input_weights[0], model.biases[0], model.output.weight)
    h = torch.zeros(2, 6, dtype=D)
    for t in range(9):
        z = h @ W.T + x[:, t] @ M.T + b
        h = torch.maximum(0.3 * z, z)
        assert torch.allclose(hidden[0, :, t], h, atol=1e-12)
        assert torch.allclose(y[:, t], h @ Y.T, atol=1e-12)
    first = model.run(x[:, :4])
    second = model.run(x[:, 4:], first.state)
    assert torch.allclose(second.outputs, y[:, 4:], atol=1e-12)


def test_lstm_matches_torch_lstm_and_its_loop():
    torch.manual_seed(5)
    model = build_model("lstm", 3, 5, 2, num_layers=2).double()
    ref = nn.LSTM(3, 5, num_layers=2, batch_first=True).double()
    with torch.no_grad():
        for layer in range(2):
            getattr(ref, f"weight_ih_l{layer}").copy_(model.input_weights[layer])
            getattr(ref, f"weight_hh_l{layer}").copy_(model.recurrent_weights[layer])
            getattr(ref, f"bias_ih_l{layer}").copy_(model.biases[layer])
            getattr(ref, f"bias_hh_l{layer}").zero_()
    x = torch.randn(4, 7, 3, dtype=D)
    out, (h, c) = ref(x)
    run = model.run(x)
    assert torch.allclose(run.hidden[-1], out, atol=1e-12)
    assert torch.allclose(run.state[0], h, atol=1e-12) and torch.allclose(run.state[1], c, atol=1e-12)
    loop = model.run(x, recurrence="loop")
    assert torch.allclose(loop.outputs, run.outputs, atol=1e-12)
    assert model.transition_matrix().shape == (20, 5)
    assert torch.allclose(model.biases[0][5:10], torch.ones(5, dtype=D))  # forget bias


def test_spectral_linear_rectangular_and_feedforward_shapes():
    torch.manual_seed(6)
    layer = SpectralLinear(9, 4, sigma_map=None).double()
    assert layer.m1 == 4 and layer.m2 == 4  # Theorem 4: min(r, c) on each side
    assert torch.allclose(torch.linalg.svdvals(layer.weight.detach()), layer.singular_values(), atol=1e-12)
    for name in ("mlp", "resnet", "spectral-mlp", "spectral-resnet"):
        model = build_model(name, 9, 8, 3, num_layers=4)
        y, hidden = model(torch.randn(5, 9), return_hidden=True)
        assert y.shape == (5, 3)
        assert hidden.shape == ((5 if name.endswith("mlp") else 3), 5, 8)
    for svals in build_model("spectral-mlp", 9, 8, 3, r=0.2).singular_values():
        assert bool((svals >= 0.8 - 1e-6).all() and (svals <= 1.2 + 1e-6).all())


def test_resnet_block_is_residual():
    torch.manual_seed(7)
    model = build_model("resnet", 3, 4, 2, num_layers=2, activation="identity").double()
    with torch.no_grad():
        model.hidden_layers[1].weight.zero_()
        model.hidden_layers[1].bias.zero_()
    x = torch.randn(2, 3, dtype=D)
    _, hidden = model(x, return_hidden=True)
    assert torch.allclose(hidden[1], hidden[0])  # zero residual branch: the block is the identity


@pytest.mark.parametrize("call,match", [
    (lambda: build_model("transformer", 1, 2, 3), "unknown model"),
    (lambda: build_model("rnn", 1, 4, 1, m1=2), r"does not take option\(s\) \['m1'\]"),
    (lambda: build_model("spectral", 1, 4, 1, m1=5), "m1=5 reflectors"),
    (lambda: build_model("ornn", 1, 4, 1, m=-1), "m=-1 reflectors"),
    (lambda: build_model("rnn", 1, 4, 1, leak=1.5), "leak must lie"),
    (lambda: build_model("rnn", 1, 4, 1, activation="gelu"), "unknown activation"),
    (lambda: build_model("spectral", 1, 4, 1, r=-0.1), "r must be"),
    (lambda: build_model("resnet", 1, 4, 1, num_layers=3), "must be even"),
    (lambda: build_model("rnn", 1, 0, 1), "hidden size"),
    (lambda: build_model("rnn", 1, 4, 1, num_layers=0), "num_layers"),
    (lambda: build_model("rnn", 1, 4, 1, recurrence="cudnn"), "unknown recurrence"),
    (lambda: build_model("lstm", 1, 4, 1, recurrence="scan"), "the LSTM supports"),
    (lambda: build_model("rnn", 3, 4, 1)(torch.randn(2, 3)), r"shape \(batch, time, 3\)"),
    (lambda: build_model("rnn", 3, 4, 1)(torch.randn(2, 5, 2)), r"shape \(batch, time, 3\)"),
    (lambda: build_model("rnn", 3, 4, 1)(torch.randn(2, 5, 3, dtype=D)), "float64"),
    (lambda: build_model("rnn", 3, 4, 1)(torch.randn(2, 5, 3), torch.zeros(3, 4)), "initial hidden state"),
    (lambda: build_model("mlp", 3, 4, 1)(torch.randn(2, 5, 3)), r"shape \(batch, 3\)"),
    (lambda: build_model("lstm", 3, 4, 1)(torch.randn(2, 5, 3), torch.zeros(1, 2, 4)), r"pair \(h0, c0\)"),
])
def test_bad_input_names_the_problem(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("name", MODEL_NAMES)
@pytest.mark.parametrize("sizes,match", [((0, 8, 2), "input_size must be a positive integer, got 0"),
                                         ((True, 8, 2), "input_size must be a positive integer, got True"),
                                         ((3, 8, 2.0), "output_size must be a positive integer, got 2.0")])
def test_every_model_names_a_size_that_is_not_a_positive_integer(name, sizes, match):
    """A bool, a float or a zero size is refused by name before any weight is drawn, by every model."""
    with pytest.raises(ValueError, match=match):
        build_model(name, *sizes)


def test_config_rebuilds_the_same_architecture():
    model = build_model("spectral", 2, 9, 3, m1=4, sigma_map="clip", r=0.3)
    config = model.config
    again = build_model(config["name"], config["input_size"], config["hidden_size"], config["output_size"],
                        **config["options"])
    assert again.config == config
    assert [p.shape for p in again.parameters()] == [p.shape for p in model.parameters()]
    assert config["options"]["m2"] is None and config["options"]["sigma_map"] == "clip"


def test_penalty_of_the_unconstrained_map_and_its_gradient():
    torch.manual_seed(8)
    free = build_model("spectral", 2, 5, 1, sigma_map="none").double()
    with torch.no_grad():
        sigma_raw = free.transitions[0].parametrizations.weight.original2
        sigma_raw.copy_(torch.tensor([1.0, 2.0, 0.5, 1.0, -1.0], dtype=D))
    penalty = free.spectral_penalty()
    assert penalty.item() == pytest.approx(0.0 + 1.0 + 0.25 + 0.0 + 4.0)
    penalty.backward()
    assert torch.allclose(free.transitions[0].parametrizations.weight.original2.grad,
                          2 * torch.tensor([0.0, 1.0, -0.5, 0.0, -2.0], dtype=D))
    assert build_model("spectral", 2, 5, 1).spectral_penalty().item() == 0.0
    mlp = build_model("spectral-mlp", 3, 4, 2, sigma_map="none")
    with torch.no_grad():
        mlp.input_layer.parametrizations.weight.original2.fill_(2.0)
    assert mlp.spectral_penalty().item() == pytest.approx(3.0)  # input layer: min(4, 3) values


# one-hot input (10 symbols <= 4n = 24) and columns of w_ih (30 > 16)
@pytest.mark.parametrize(("symbols", "hidden"), [(10, 6), (30, 4)])
def test_lstm_symbol_ids_give_the_one_hot_outputs_and_gradients_on_both_input_paths(symbols, hidden):
    torch.manual_seed(4)
    model = build_model("lstm", symbols, hidden, 3, num_layers=2).double()
    ids = torch.randint(0, symbols, (3, 9))
    grads = []
    for x in (ids, nn.functional.one_hot(ids, symbols).double()):
        model.zero_grad()
        out = model.run(x).outputs
        out.square().sum().backward()
        grads.append((out.detach(), [p.grad.clone() for p in model.parameters()]))
    (out_ids, grad_ids), (out_hot, grad_hot) = grads
    assert torch.allclose(out_ids, out_hot, atol=1e-12)
    assert all(torch.allclose(a, b, atol=1e-12) for a, b in zip(grad_ids, grad_hot, strict=True))


@pytest.mark.parametrize("name", ["spectral", "rnn", "lstm"])
def test_symbol_ids_equal_their_one_hot_vectors(name):
    torch.manual_seed(9)
    model = build_model(name, 10, 6, 4, activation="relu") if name != "lstm" else build_model(name, 10, 6, 4)
    model = model.double()
    ids = torch.randint(0, 10, (3, 7))
    one_hot = nn.functional.one_hot(ids, 10).double()
    routes = ["torch", "loop"] + (["scan"] if name != "lstm" else [])
    for route in routes:
        assert torch.allclose(model.run(ids, recurrence=route).outputs,
                              model.run(one_hot, recurrence=route).outputs, atol=1e-12)
    with pytest.raises(ValueError, match=r"symbol ids must lie in \[0, 10\)"):
        model(torch.tensor([[3, 10]]))


@pytest.mark.parametrize("shape, bias", [((5, 7, 2), True), ((7, 5, 10), False), ((3, 1), True)])
def test_input_projection_is_f_linear_in_value_and_gradient(shape, bias):
    from spectral_analysis.nn.recurrent import input_projection

    torch.manual_seed(0)
    x = torch.randn(*shape, dtype=D, requires_grad=True)
    M = torch.randn(6, shape[-1], dtype=D, requires_grad=True)
    b = torch.randn(6, dtype=D, requires_grad=True) if bias else None
    G = torch.randn(*shape[:-1], 6, dtype=D)
    leaves = (x, M) + ((b,) if bias else ())
    fast = torch.autograd.grad(input_projection(x, M, b), leaves, G)
    reference = torch.autograd.grad(nn.functional.linear(x, M, b), leaves, G)
    assert torch.allclose(input_projection(x, M, b), nn.functional.linear(x, M, b), atol=1e-14)
    assert all(torch.allclose(f, r, atol=1e-12) for f, r in zip(fast, reference, strict=True))
    strided = (lambda x: x.transpose(0, 1)) if x.dim() == 3 else (lambda x: x)  # as the time loop hands it in
    assert torch.autograd.gradcheck(lambda x, M: input_projection(strided(x), M), (x, M))


@pytest.mark.parametrize("bias", [True, False])
def test_input_projection_of_symbol_ids_is_the_one_hot_product(bias):
    from spectral_analysis.nn.recurrent import input_projection

    torch.manual_seed(0)
    ids = torch.tensor([[3, 0, 3], [9, 1, 2]])
    M = torch.randn(6, 10, dtype=D, requires_grad=True)
    b = torch.randn(6, dtype=D, requires_grad=True) if bias else None
    G = torch.randn(2, 3, 6, dtype=D)
    leaves = (M,) + ((b,) if bias else ())
    one_hot = nn.functional.one_hot(ids, 10).to(D)
    assert torch.allclose(input_projection(ids, M, b), nn.functional.linear(one_hot, M, b), atol=1e-14)
    fast = torch.autograd.grad(input_projection(ids, M, b), leaves, G)
    reference = torch.autograd.grad(nn.functional.linear(one_hot, M, b), leaves, G)
    assert all(torch.allclose(f, r, atol=1e-12) for f, r in zip(fast, reference, strict=True))


@pytest.mark.parametrize("name", ["spectral", "lstm", "gru", "urnn", "kru"])
def test_a_last_step_read_out_scores_and_trains_as_the_full_one(name):
    """A last-step task reads out only y_T: the same loss and the same gradients as reading every step."""
    from spectral_analysis.data.objectives import loss_and_metrics
    from spectral_analysis.train.evaluation import model_outputs

    torch.manual_seed(1)
    model = build_model(name, 2, 8, 3).double()
    x, y = torch.randn(4, 9, 2, dtype=D), torch.randint(0, 3, (4,))
    grads = []
    for last_step in (False, True):
        outputs, run = model_outputs(model, x, last_step=last_step)
        assert outputs.shape == ((4, 1, 3) if last_step else (4, 9, 3))
        loss, _ = loss_and_metrics("classification-last", outputs, y)
        grads.append((loss.detach(), torch.autograd.grad(loss, list(model.parameters()), allow_unused=True)))
    (full_loss, full), (last_loss, last) = grads
    assert torch.allclose(full_loss, last_loss, atol=1e-14)
    for f, g in zip(full, last, strict=True):
        assert (f is None and g is None) or torch.allclose(f, g, atol=1e-12)
    assert torch.allclose(model.last_outputs(x), model(x)[:, -1], atol=1e-14)


@pytest.mark.parametrize("name, options", [("spectral-mlp", {}), ("spectral-resnet", {"plain_ends": True}),
                                           ("spectral-mlp", {"m1": 3, "sigma_map": "clip"})])
def test_batched_hidden_weights_train_as_the_layer_by_layer_twin(name, options):
    """Training composes the hidden SVD weights in one batched call; each layer's own weight is the twin:
    the same outputs and every gradient (float64)."""
    from unittest.mock import patch

    from spectral_analysis.nn import feedforward

    torch.manual_seed(2)
    model = build_model(name, 10, 6, 3, num_layers=4, **options).double()
    x = torch.randn(7, 10, dtype=D)
    stacked = feedforward.stacked_svd_weights(list(model.hidden_layers))
    assert stacked.shape == (4, 6, 6)
    assert torch.allclose(stacked, torch.stack([layer.weight for layer in model.hidden_layers]), atol=1e-14)
    batched = model(x)
    batched_grads = torch.autograd.grad(batched.square().sum(), list(model.parameters()))
    with patch.object(feedforward, "stacked_svd_weights", lambda layers: None):
        twin = model(x)
        twin_grads = torch.autograd.grad(twin.square().sum(), list(model.parameters()))
    assert torch.allclose(batched, twin, atol=1e-13)
    assert all(torch.allclose(b, t, atol=1e-12) for b, t in zip(batched_grads, twin_grads, strict=True))
    with torch.no_grad():
        assert torch.allclose(model(x), batched, atol=1e-13)


def test_stacked_svd_weights_only_stacks_alike_spectral_layers():
    from spectral_analysis.nn.feedforward import stacked_svd_weights

    assert stacked_svd_weights([SpectralLinear(4, 4), nn.Linear(4, 4)]) is None
    assert stacked_svd_weights([SpectralLinear(4, 4), SpectralLinear(4, 5)]) is None
    assert stacked_svd_weights([SpectralLinear(4, 4), SpectralLinear(4, 4, m1=2)]) is None
    assert stacked_svd_weights([]) is None
    assert stacked_svd_weights([SpectralLinear(4, 4), SpectralLinear(4, 4)]).shape == (2, 4, 4)


@pytest.mark.parametrize(("name", "gates"), [("lstm", 4), ("gru", 3)])
def test_gated_models_take_the_input_weights_standard_deviation(name, gates):
    """``input_std`` sets the gated models' input weights as it does the Eq. 4 nets' (pixel MNIST's single
    input otherwise starts at std 1.0); a bad value is refused by name."""
    torch.manual_seed(4)
    default = build_model(name, 1, 128, 10).input_weights[0]
    chosen = build_model(name, 1, 128, 10, input_std=0.056).input_weights[0]
    assert default.shape == chosen.shape == (gates * 128, 1)
    assert abs(float(default.std()) - 1.0) < 0.1 and abs(float(chosen.std()) - 0.056) < 0.006
    with pytest.raises(ValueError, match="input_std must be a finite number > 0"):
        build_model(name, 1, 8, 2, input_std=0.0)


def test_the_lstm_recurrent_start_is_the_one_named():
    """``init`` sets every layer's recurrent weight as Cooijmans et al.'s released code does: orthonormal
    columns (``orthogonal``), or the cell block the identity and the three gates' orthonormal
    (``identity-orthogonal``); ``gaussian`` keeps N(0, 1/n); an unknown name is refused by name."""
    torch.manual_seed(5)
    n = 32
    eye = torch.eye(n)
    for layer in build_model("lstm", 1, n, 10, num_layers=2, init="orthogonal").recurrent_weights:
        assert torch.allclose(layer.T @ layer, eye, atol=1e-5)
    for layer in build_model("lstm", 1, n, 10, num_layers=2, init="identity-orthogonal").recurrent_weights:
        gates = torch.cat([layer[:2 * n], layer[3 * n:]])
        assert torch.equal(layer[2 * n:3 * n], eye) and torch.allclose(gates.T @ gates, eye, atol=1e-5)
    gaussian = build_model("lstm", 1, 128, 10).recurrent_weights[0]
    assert abs(float(gaussian.std()) - 128 ** -0.5) < 0.005 and build_model("lstm", 1, 4, 1).config[
        "options"]["init"] == "gaussian"
    with pytest.raises(ValueError, match="unknown LSTM init 'identity'; expected one of"):
        build_model("lstm", 1, 8, 2, init="identity")
