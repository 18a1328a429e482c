"""The recipe objectives (issue 21), each against an independent computation on a fixed batch:
Plackett-Luce by explicit sequential softmax in plain math, Davidson from its probability formula in
numpy, the scaled margin by hand, the SFT term by a manual log-softmax gather, ODIN's terms with
numpy.corrcoef, the ensemble reductions with numpy."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.stats
import torch

from rmspec.train.losses import bradley_terry_loss
from rmspec.train.objectives.ensemble import bootstrap_indices, ensemble_std, reduce_ensemble
from rmspec.train.objectives.listwise import plackett_luce_loss, ranking_metrics
from rmspec.train.objectives.margins import INF_ORM_MARGIN_MAP, margin_bradley_terry_loss, remap_margin
from rmspec.train.objectives.odin import normalized_head_weight, odin_loss, orthogonality_loss, pearson
from rmspec.train.objectives.sft import chosen_lm_loss, response_labels, sft_regularized_loss
from rmspec.train.objectives.ties import TieParameter, davidson_log_probs, davidson_loss, tie_calibration

TOL = 1e-6

# ------------------------------------------------------------------ Plackett-Luce

# Three prompts, up to five responses; -1 marks padding. Prompt 1 has a tie (two 3.0), prompt 2 only
# three responses, with the padding in the middle.
REWARDS = [[0.3, -1.2, 2.0, 0.7, -0.4], [1.1, 0.2, -0.5, 0.9, 1.6], [0.4, 9.9, -0.8, 1.3, 9.9]]
SCORES = [[5.0, 1.0, 4.0, 3.0, 2.0], [3.0, 1.0, 3.0, 2.0, 5.0], [2.0, -1, 1.0, 4.0, -1]]
MASK = [[True] * 5, [True] * 5, [True, False, True, True, False]]


def pl_by_hand(rewards, scores, mask, top_k=None):
    """-log P(order) per prompt by walking the labelled order group by group (Breslow for ties)."""
    losses = []
    for rs, ss, ms in zip(rewards, scores, mask):
        items = sorted([(s, r) for r, s, m in zip(rs, ss, ms) if m], key=lambda t: -t[0])
        if len(items) < 2:
            continue
        total, position = 0.0, 0
        remaining = list(items)
        for _, group in itertools.groupby(items, key=lambda t: t[0]):
            group = list(group)
            denom = math.log(sum(math.exp(r) for _, r in remaining))
            if top_k is None or position < top_k:
                total += sum(r for _, r in group) - len(group) * denom
            position += len(group)
            remaining = remaining[len(group) :]
        losses.append(-total)
    return sum(losses) / len(losses)


def t(x, dtype=torch.float32):
    return torch.tensor(x, dtype=dtype)


@pytest.mark.parametrize("top_k", [None, 1, 2, 3])
def test_plackett_luce_matches_the_sequential_softmax_by_hand(top_k):
    got = plackett_luce_loss(t(REWARDS), t(SCORES), torch.tensor(MASK), top_k=top_k).item()
    assert got == pytest.approx(pl_by_hand(REWARDS, SCORES, MASK, top_k), abs=TOL)


def test_plackett_luce_without_ties_is_minus_log_of_the_product_of_softmaxes():
    rewards, order = [0.5, -0.3, 1.7, 0.2], [2, 0, 3, 1]  # labelled best-to-worst
    scores = [0.0] * 4
    for rank, idx in enumerate(order):
        scores[idx] = float(10 - rank)
    prob = 1.0
    for k in range(4):
        rest = order[k:]
        prob *= math.exp(rewards[order[k]]) / sum(math.exp(rewards[j]) for j in rest)
    got = plackett_luce_loss(t([rewards]), t([scores])).item()
    assert got == pytest.approx(-math.log(prob), abs=TOL)
    # Ranks (1 = best) go in as -ranks.
    ranks = [0] * 4
    for rank, idx in enumerate(order):
        ranks[idx] = rank + 1
    assert plackett_luce_loss(t([rewards]), -t([ranks])).item() == pytest.approx(-math.log(prob), abs=TOL)


def test_plackett_luce_with_two_responses_is_bradley_terry():
    chosen, rejected = t([1.5, -0.2, 0.3, 2.0]), t([0.5, 0.4, 0.3, -1.0])
    rewards = torch.stack([rejected, chosen], dim=1)  # chosen second: the order comes from the scores
    scores = t([[0.0, 1.0]] * 4)
    assert plackett_luce_loss(rewards, scores).item() == pytest.approx(
        bradley_terry_loss(chosen, rejected).item(), abs=TOL
    )


def test_plackett_luce_padding_and_response_order_do_not_matter():
    full = plackett_luce_loss(t(REWARDS), t(SCORES), torch.tensor(MASK))
    perm = [4, 2, 0, 3, 1]
    shuffled = plackett_luce_loss(t(REWARDS)[:, perm], t(SCORES)[:, perm], torch.tensor(MASK)[:, perm])
    assert shuffled.item() == pytest.approx(full.item(), abs=TOL)
    # Each prompt alone, unpadded, averages to the batch's loss.
    alone = []
    for rs, ss, ms in zip(REWARDS, SCORES, MASK):
        keep = [i for i, m in enumerate(ms) if m]
        alone.append(plackett_luce_loss(t([[rs[i] for i in keep]]), t([[ss[i] for i in keep]])).item())
    assert full.item() == pytest.approx(sum(alone) / len(alone), abs=TOL)


def test_plackett_luce_gradient_is_finite_and_zero_on_padding():
    rewards = t(REWARDS).requires_grad_()
    plackett_luce_loss(rewards, t(SCORES), torch.tensor(MASK)).backward()
    assert torch.isfinite(rewards.grad).all()
    assert rewards.grad[2, 1] == 0 and rewards.grad[2, 4] == 0
    # A tie keeps its members apart from each other: swapping two tied rewards leaves the loss as is.
    swapped = [row[:] for row in REWARDS]
    swapped[1][0], swapped[1][2] = swapped[1][2], swapped[1][0]
    a = plackett_luce_loss(t(REWARDS), t(SCORES), torch.tensor(MASK)).item()
    b = plackett_luce_loss(t(swapped), t(SCORES), torch.tensor(MASK)).item()
    assert a == pytest.approx(b, abs=TOL)


def test_plackett_luce_rejects_bad_shapes_and_top_k():
    with pytest.raises(ValueError, match="batch, N"):
        plackett_luce_loss(t([1.0, 2.0]), t([1.0, 2.0]))
    with pytest.raises(ValueError, match="top_k"):
        plackett_luce_loss(t([[1.0, 2.0]]), t([[1.0, 2.0]]), top_k=0)


def test_ranking_metrics_match_brute_force_and_scipy():
    got = ranking_metrics(t(REWARDS), t(SCORES), torch.tensor(MASK))
    correct = total = 0
    taus = []
    for rs, ss, ms in zip(REWARDS, SCORES, MASK):
        keep = [i for i, m in enumerate(ms) if m]
        for i, j in itertools.combinations(keep, 2):
            if ss[i] != ss[j]:
                total += 1
                correct += (rs[i] - rs[j]) * (ss[i] - ss[j]) > 0
        taus.append(scipy.stats.kendalltau([rs[i] for i in keep], [ss[i] for i in keep]).statistic)
    assert got["ranked_pairs"] == total
    assert got["pair_accuracy"] == pytest.approx(correct / total, abs=TOL)
    assert got["kendall_tau"] == pytest.approx(float(np.mean(taus)), abs=TOL)


# ------------------------------------------------------------------ Davidson ties

CHOSEN = [1.2, -0.3, 0.5, 2.0, 0.1, -1.0]
REJECTED = [0.2, 0.4, 0.5, -1.0, 0.0, -0.8]
TIE = [False, False, True, False, True, True]


def davidson_numpy(chosen, rejected, nu):
    pc, pr = np.exp(np.array(chosen, dtype=np.float64)), np.exp(np.array(rejected, dtype=np.float64))
    denom = pc + pr + nu * np.sqrt(pc * pr)
    return pc / denom, pr / denom, nu * np.sqrt(pc * pr) / denom


@pytest.mark.parametrize("nu", [0.3, 1.0, 2.5])
def test_davidson_matches_its_probability_formula(nu):
    win, lose, tie = davidson_numpy(CHOSEN, REJECTED, nu)
    np.testing.assert_allclose(win + lose + tie, 1.0, atol=1e-12)
    lw, ll, lt = davidson_log_probs(t(CHOSEN), t(REJECTED), math.log(nu))
    np.testing.assert_allclose(lw.exp().numpy(), win, atol=TOL)
    np.testing.assert_allclose(ll.exp().numpy(), lose, atol=TOL)
    np.testing.assert_allclose(lt.exp().numpy(), tie, atol=TOL)
    expected = -np.mean(np.where(TIE, np.log(tie), np.log(win)))
    got = davidson_loss(t(CHOSEN), t(REJECTED), torch.tensor(TIE), torch.tensor(math.log(nu))).item()
    assert got == pytest.approx(expected, abs=TOL)


def test_davidson_with_nu_near_zero_is_bradley_terry_on_the_non_ties():
    no_ties = torch.zeros(len(CHOSEN), dtype=torch.bool)
    got = davidson_loss(t(CHOSEN), t(REJECTED), no_ties, -40.0).item()
    assert got == pytest.approx(bradley_terry_loss(t(CHOSEN), t(REJECTED)).item(), abs=TOL)


def test_tie_parameter_learned_or_fixed():
    learned, fixed = TieParameter(nu=0.5, learn=True), TieParameter(nu=0.5, learn=False)
    assert [n for n, _ in learned.named_parameters()] == ["log_nu"]
    assert list(fixed.parameters()) == [] and fixed.nu == pytest.approx(0.5)
    davidson_loss(t(CHOSEN), t(REJECTED), torch.tensor(TIE), learned.log_nu).backward()
    # d loss / d log_nu = mean(P(tie)) - share of ties, from the formula (the tie term is
    # log nu - log D, and d log D / d log nu = P(tie)).
    _, _, p_tie = davidson_numpy(CHOSEN, REJECTED, 0.5)
    assert learned.log_nu.grad.item() == pytest.approx(p_tie.mean() - np.mean(TIE), abs=TOL)
    with pytest.raises(ValueError, match="nu must be > 0"):
        TieParameter(nu=0.0)


def test_tie_calibration_against_numpy():
    nu = 0.8
    got = tie_calibration(t(CHOSEN), t(REJECTED), torch.tensor(TIE), math.log(nu))
    _, _, p = davidson_numpy(CHOSEN, REJECTED, nu)
    tie = np.array(TIE)
    assert got["tie_rate"] == pytest.approx(tie.mean(), abs=TOL)
    assert got["mean_p_tie"] == pytest.approx(p.mean(), abs=TOL)
    assert got["p_tie_on_ties"] == pytest.approx(p[tie].mean(), abs=TOL)
    assert got["p_tie_on_non_ties"] == pytest.approx(p[~tie].mean(), abs=TOL)
    assert got["tie_brier"] == pytest.approx(np.mean((p - tie) ** 2), abs=TOL)
    assert got["nu"] == pytest.approx(nu)


# ------------------------------------------------------------------ margins


def test_scaled_margin_by_hand_and_subtract_is_todays_margin():
    c, r, d = [1.5, -0.2, 0.3], [0.5, 0.4, 0.3], [1.0, 3.0, 10.0]
    alpha = 0.7
    by_hand = sum(-alpha * dd * math.log(1 / (1 + math.exp(-(a - b)))) for a, b, dd in zip(c, r, d)) / 3
    got = margin_bradley_terry_loss(t(c), t(r), t(d), mode="scale", alpha=alpha).item()
    assert got == pytest.approx(by_hand, abs=TOL)
    # REFERENCE.md: margin subtracted (Llama 2) -log sigma(r_c - r_r - m); none: -log sigma(r_c - r_r)
    subtract = sum(math.log1p(math.exp(-(a - b - dd))) for a, b, dd in zip(c, r, d)) / 3
    plain = sum(math.log1p(math.exp(-(a - b))) for a, b in zip(c, r)) / 3
    assert margin_bradley_terry_loss(t(c), t(r), t(d), mode="subtract").item() == pytest.approx(subtract, abs=TOL)
    assert margin_bradley_terry_loss(t(c), t(r), t(d), mode="none").item() == pytest.approx(plain, abs=TOL)
    with pytest.raises(ValueError, match="needs a margin"):
        margin_bradley_terry_loss(t(c), t(r), None, mode="scale")
    with pytest.raises(ValueError, match="one of"):
        margin_bradley_terry_loss(t(c), t(r), t(d), mode="multiply")


def test_margin_map_remaps_strengths():
    assert remap_margin(torch.tensor([1, 3, 2, 1]), INF_ORM_MARGIN_MAP).tolist() == [1.0, 10.0, 3.0, 1.0]
    assert remap_margin([1.0, 2.0], {"1": 1, "2": 3}) == [1.0, 3.0]
    assert remap_margin(3, INF_ORM_MARGIN_MAP) == 10.0
    with pytest.raises(ValueError, match="margin 4 is not in margin_map"):
        remap_margin([1, 4], INF_ORM_MARGIN_MAP)


# ------------------------------------------------------------------ SFT term


def test_chosen_lm_loss_is_the_mean_nll_of_the_response_tokens():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 6, 11, generator=gen)
    input_ids = torch.randint(0, 11, (2, 6), generator=gen)
    response = torch.tensor([[0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 1]], dtype=torch.bool)  # row 0 ends padded
    labels = response_labels(input_ids, response)
    got = chosen_lm_loss(logits, labels).item()
    lg, ids = logits.double().numpy(), input_ids.numpy()
    nll = []
    for b in range(2):
        for pos in range(1, 6):  # token pos is predicted by the logits at pos - 1
            if response[b, pos]:
                row = lg[b, pos - 1]
                log_softmax = row - (row.max() + math.log(np.exp(row - row.max()).sum()))
                nll.append(-log_softmax[ids[b, pos]])
    assert got == pytest.approx(float(np.mean(nll)), abs=TOL)
    # Aligned targets (shift=False) read the label at the same position.
    aligned = torch.full_like(input_ids, -100)
    aligned[:, :-1] = labels[:, 1:]
    assert chosen_lm_loss(logits, aligned, shift=False).item() == pytest.approx(got, abs=TOL)
    assert sft_regularized_loss(torch.tensor(0.5), torch.tensor(got), 0.1).item() == pytest.approx(0.5 + 0.1 * got)
    assert chosen_lm_loss(logits, torch.full_like(input_ids, -100)).item() == 0.0


# ------------------------------------------------------------------ ODIN


def test_odin_terms_against_numpy():
    gen = torch.Generator().manual_seed(1)
    qc, qr, lc, lr = (torch.randn(8, generator=gen) for _ in range(4))
    len_c = torch.randint(5, 200, (8,), generator=gen)
    len_r = torch.randint(5, 200, (8,), generator=gen)
    w = torch.randn(2, 16, generator=gen)
    total, parts = odin_loss(
        qc, qr, lc, lr, len_c, len_r, w[0], w[1], lambda_length=0.5, lambda_quality=2.0, lambda_ortho=0.3
    )
    lengths = np.concatenate([len_c.numpy(), len_r.numpy()]).astype(np.float64)
    rho_l = np.corrcoef(np.concatenate([lc.numpy(), lr.numpy()]), lengths)[0, 1]
    rho_q = np.corrcoef(np.concatenate([qc.numpy(), qr.numpy()]), lengths)[0, 1]
    wn = w.double().numpy()
    cos = abs(wn[0] @ wn[1]) / (np.linalg.norm(wn[0]) * np.linalg.norm(wn[1]))
    diff = (qc + lc - qr - lr).double().numpy()
    bt = np.mean(np.log1p(np.exp(-diff)))
    assert parts["length_head_corr"] == pytest.approx(rho_l, abs=TOL)
    assert parts["quality_head_corr"] == pytest.approx(rho_q, abs=TOL)
    assert parts["ortho_loss"] == pytest.approx(cos, abs=TOL)
    assert parts["bt_loss"] == pytest.approx(bt, abs=TOL)
    assert total.item() == pytest.approx(bt + 0.5 * (1 - rho_l) + 2.0 * abs(rho_q) + 0.3 * cos, abs=1e-5)


def test_odin_helpers():
    x = torch.tensor([1.0, 2.0, 4.0, 7.0])
    assert pearson(x, x * 3 + 1).item() == pytest.approx(1.0, abs=TOL)
    assert pearson(x, torch.full_like(x, 5.0)).item() == 0.0  # constant lengths: no correlation, no NaN
    w = torch.tensor([[1.0, 2.0, 3.0], [0.0, 4.0, -1.0]])
    wn = w.numpy() - w.numpy().mean(axis=1, keepdims=True)
    wn /= np.linalg.norm(wn, axis=1, keepdims=True)
    np.testing.assert_allclose(normalized_head_weight(w).numpy(), wn, atol=TOL)
    assert orthogonality_loss(torch.tensor([1.0, 0.0]), torch.tensor([0.0, -3.0])).item() == pytest.approx(0.0, abs=TOL)
    # Gradients reach both heads' outputs and weights.
    qc, qr, lc, lr = (torch.randn(6, requires_grad=True) for _ in range(4))
    wq, wl = torch.randn(5, requires_grad=True), torch.randn(5, requires_grad=True)
    total, _ = odin_loss(qc, qr, lc, lr, torch.arange(6) + 3, torch.arange(6) * 2 + 1, wq, wl)
    total.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in (qc, lc, wq, wl))


# ------------------------------------------------------------------ ensembles


def test_ensemble_reductions_against_numpy():
    r = np.array([[0.5, -1.0, 2.0], [0.1, 0.3, 2.5], [0.9, -0.2, 1.0], [0.2, 0.0, 1.8]])
    rt = torch.tensor(r, dtype=torch.float32)
    np.testing.assert_allclose(reduce_ensemble(rt, "mean").numpy(), r.mean(0), atol=TOL)
    np.testing.assert_allclose(reduce_ensemble(rt, "min").numpy(), r.min(0), atol=TOL)
    np.testing.assert_allclose(ensemble_std(rt).numpy(), r.std(0, ddof=0), atol=TOL)
    np.testing.assert_allclose(
        reduce_ensemble(rt, "mean_minus_std", coef=0.5).numpy(), r.mean(0) - 0.5 * r.std(0, ddof=0), atol=TOL
    )
    with pytest.raises(ValueError, match="one of"):
        reduce_ensemble(rt, "max")
    with pytest.raises(ValueError, match="members, batch"):
        reduce_ensemble(rt[0], "mean")


def test_bootstrap_indices_are_seeded_and_per_member():
    a = bootstrap_indices(1000, 4, seed=7)
    assert a.shape == (4, 1000) and a.dtype == torch.long and a.min() >= 0 and a.max() < 1000
    assert torch.equal(a, bootstrap_indices(1000, 4, seed=7))
    assert not torch.equal(a, bootstrap_indices(1000, 4, seed=8))
    assert torch.equal(a[:2], bootstrap_indices(1000, 2, seed=7))  # adding members keeps the first ones
    assert not torch.equal(a[0], a[1])
    distinct = [len(set(row.tolist())) / 1000 for row in a]
    assert all(0.58 < d < 0.68 for d in distinct)  # 1 - 1/e of the rows, about 63%
    assert torch.equal(bootstrap_indices(5, 3, seed=0, bootstrap=False), torch.arange(5).expand(3, 5))
