"""The architecture-peer z of the reuse score (issue 18): worked by hand on a small matrix, its undefined cases,
the rule's thresholds, and a real distilled student found in a zoo of two architectures by ``models compare``."""

from __future__ import annotations

import numpy as np
import pytest

from twinspect.dl.modelclones.reuse import (
    PEER_RULE_SCORE,
    PEER_STD_FLOOR,
    peer_outliers,
    with_peer_outlier,
)


def _sim(t: np.ndarray) -> np.ndarray:
    """Similarities whose ``t = −log(1 − x + 1e-6)`` is ``t``."""
    return 1.0 + 1e-6 - np.exp(-t)


def _zoo(t_ts: float = 2.0) -> tuple[np.ndarray, list[str]]:
    """Models 0-5 of architecture A, 6-11 of B; every t is 1 except model 0 (teacher) with 6 (student) at
    ``t_ts``, and model 6 with the A models 1-5 at 1.0, 1.2, 1.4, 1.6, 1.8."""
    t = np.ones((12, 12))
    t[0, 6] = t[6, 0] = t_ts
    for k, v in zip(range(1, 6), (1.0, 1.2, 1.4, 1.6, 1.8)):
        t[6, k] = t[k, 6] = v
    return _sim(t), ["A"] * 6 + ["B"] * 6


def test_peer_z_by_hand():
    zmin, zmax = peer_outliers(*_zoo())
    # seen from 0: the B peers 7-11 all at t = 1, spread 0 -> the floor; (2 - 1) / 0.15
    z_0_to_6 = (2.0 - 1.0) / PEER_STD_FLOOR
    # seen from 6: the A peers 1-5 at 1.0 .. 1.8, median 1.4, population sd sqrt(0.08)
    z_6_to_0 = (2.0 - 1.4) / np.sqrt(0.08)
    assert zmin[0, 6] == pytest.approx(z_6_to_0, rel=1e-4) and zmax[0, 6] == pytest.approx(z_0_to_6, rel=1e-4)
    assert zmin[6, 0] == zmin[0, 6] and zmax[6, 0] == zmax[0, 6]
    assert with_peer_outlier(0.1, zmin[0, 6], zmax[0, 6]) == PEER_RULE_SCORE
    # a pair of one architecture, and the diagonal: undefined
    assert np.isnan(zmin[0, 1]) and np.isnan(zmax[6, 7]) and np.isnan(zmin[3, 3])


def test_peer_z_needs_enough_peers_and_known_architectures():
    sim, groups = _zoo()
    # B with one model fewer: 6 has 4 peers left, under PEER_MIN
    zmin, zmax = peer_outliers(sim[:11, :11], groups[:11])
    assert np.isnan(zmin[0, 6]) and np.isnan(zmax[0, 6])
    # an unknown architecture gets no z and is nobody's peer: A's model 1 has 4 peers left, too few as well
    zmin, _ = peer_outliers(sim, [None] + groups[1:])
    assert np.isnan(zmin[0, 6]) and np.isnan(zmin[1, 6])
    assert np.isfinite(peer_outliers(sim, groups)[0][1, 6])
    with pytest.raises(ValueError, match="one group per model"):
        peer_outliers(sim, groups[:5])
    with pytest.raises(ValueError, match="square"):
        peer_outliers(sim[:3], groups)


def test_peer_rule_thresholds():
    assert with_peer_outlier(0.2, 0.8, 3.0) == PEER_RULE_SCORE
    assert with_peer_outlier(None, 0.8, 3.0) == PEER_RULE_SCORE
    assert with_peer_outlier(0.97, 0.8, 3.0) == 0.97  # never lowers a score
    assert with_peer_outlier(0.2, 0.6, 9.0) == 0.2  # the teacher does not stand out among its own mates
    assert with_peer_outlier(0.2, 2.0, 2.4) == 0.2
    assert with_peer_outlier(0.2, None, 3.0) == 0.2 and with_peer_outlier(0.2, float("nan"), 3.0) == 0.2
    # a lead of the teacher under the peers' spread: no rule
    zmin, zmax = peer_outliers(*_zoo(t_ts=1.5))
    assert with_peer_outlier(0.1, zmin[0, 6], zmax[0, 6]) == 0.1


def test_compare_finds_a_distilled_student_among_two_architectures(mnist_train_512, tmp_path, capsys):
    """Six TinyCNNs (seeds 0-5), five MLPs trained from labels and one MLP distilled from CNN 0 (soft labels, T = 2):
    the student and its teacher get the rule's score; no CNN with a label-trained MLP does."""
    import torch
    from torch import nn

    from tests.dl.conftest import adam_steps, make_tiny_cnn
    from twinspect.dl.adapters.metadata import write_metadata
    from twinspect.dl.modelclones import CompareConfig, compare_models

    x, y = mnist_train_512

    def mlp():
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10))

    cnns = []
    for s in range(6):
        torch.manual_seed(s)
        cnns.append(adam_steps(make_tiny_cnn(), x, y, steps=60, lr=3e-3, seed=s))
    mlps = []
    for s in range(5):
        torch.manual_seed(10 + s)
        mlps.append(adam_steps(mlp(), x, y, steps=120, lr=3e-3, seed=10 + s))
    xt = torch.from_numpy(x.astype(np.float32).transpose(0, 3, 1, 2) / 255.0)
    with torch.no_grad():
        soft = cnns[0](xt)
    torch.manual_seed(20)
    student = mlp()
    opt = torch.optim.Adam(student.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(20)
    student.train()
    for _ in range(120):
        i = torch.randint(0, len(xt), (64,), generator=gen)
        opt.zero_grad()
        kd = nn.functional.kl_div(nn.functional.log_softmax(student(xt[i]) / 2, 1),
                                  nn.functional.softmax(soft[i] / 2, 1), reduction="batchmean") * 4
        kd.backward()
        opt.step()
    paths = []
    for k, m in enumerate([*cnns, *mlps, student.eval()]):
        p = tmp_path / f"m{k}.pt"
        torch.jit.save(torch.jit.trace(m.eval(), torch.zeros(1, 1, 28, 28)), str(p))
        write_metadata(p, {"input_shape": [28, 28, 1], "num_classes": 10, "output": "logits",
                           "preprocess": {"scale": 255.0, "mean": [], "std": [], "layout": "NCHW"}})
        paths.append(p)
    cfg = dict(data="mnist", n_inputs=200, cka_inputs=32, modeldiff_pairs=32, levels=("weights", "io", "reuse"))
    r = compare_models(paths, config=CompareConfig(**cfg, peer_rule=True))
    zmin, zmax, score = r.matrix("io_peer_z_min"), r.matrix("io_peer_z_max"), r.matrix("reuse")
    teacher, st = 0, 11
    assert zmin[teacher, st] >= 0.7 and zmax[teacher, st] >= 2.5 and score[teacher, st] >= PEER_RULE_SCORE
    cross = zmax[:6, 6:11]
    assert np.isfinite(cross).all() and (cross < 2.5).all() and (score[:6, 6:11] < 0.5).all()
    assert np.isnan(zmin[:6, :6]).all()  # one architecture: no peer z
    assert any(s["measure"] == "io_peer_z_min" and "architecture-peer z" in s["reason"] for s in r.skipped)
    # by default the same measures are reported and the rule lifts nothing: the scores differ exactly where it holds
    plain = compare_models(paths, config=CompareConfig(**cfg))
    base = plain.matrix("reuse")
    np.testing.assert_array_equal(plain.matrix("io_peer_z_max"), zmax)
    holds = np.nan_to_num(zmax, nan=-9) >= 2.5
    holds &= np.nan_to_num(zmin, nan=-9) >= 0.7
    differ = ~np.isclose(np.nan_to_num(base, nan=-1), np.nan_to_num(score, nan=-1))
    assert differ.any() and not (differ & ~holds).any()
    assert (score[differ] == PEER_RULE_SCORE).all() and (base[differ] < PEER_RULE_SCORE).all()

    # the terminal summary says why the pair is suspected
    from twinspect.dl.modelclones.report import print_summary

    print_summary(r, 0.5)
    out = capsys.readouterr().out
    assert "m0.pt  <->  m11.pt" in out and "stands out among the other's architecture-mates" in out

    # the CLI option reaches the comparison and is recorded in the JSON report
    import json

    from twinspect.cli import main

    out_json = tmp_path / "r.json"
    with pytest.raises(SystemExit) as exc:
        main(["models", "compare", *map(str, paths[:2]), "--data", "uniform", "--inputs", "40", "--cka-inputs", "20",
              "--peer-rule", "--format", "json", "-o", str(out_json), "-q"])
    assert exc.value.code in (0, None)
    assert json.loads(out_json.read_text())["config"]["peer_rule"] is True
