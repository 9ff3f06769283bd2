"""A D-optimal choice of tests from a candidate set (Fedorov's exchange), and what the chosen tests cannot tell
apart (aliasing). Pure numpy.

The criterion is Bayesian D-optimality (DuMouchel & Jones, Technometrics 1994): the main effects are the model's
primary terms, the two-factor interactions potential ones with a prior variance, so that among designs equally
good for the main effects the exchange prefers one that also separates interactions. The candidates are the
campaign's own valid tests (its [[exclude]] rules already applied), so a constrained matrix needs no special case.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tankbench.schedule.factors import Matrix

#: prior precision added to the primary terms so the greedy start can invert an empty design
EPS = 1e-6
MAX_EXCHANGES = 200


def standardise_potential(x: Matrix, z: Matrix) -> Matrix:
    """Potential terms made orthogonal to the primary ones over the candidates and scaled to a range of 1."""
    if z.shape[1] == 0:
        return z
    coef, *_ = np.linalg.lstsq(x, z, rcond=None)
    r = z - x @ coef
    span = r.max(axis=0) - r.min(axis=0)
    keep = span > 1e-9
    return np.asarray(r[:, keep] / span[keep], dtype=np.float64)


def choose(x: Matrix, z: Matrix, n: int, forced: Sequence[int] = ()) -> list[int]:
    """Indices of n distinct candidate rows maximising det(F'F + K), F = [x | z] (z: potential terms, prior
    precision 1; x: primary terms). `forced` rows are always in (and never exchanged). Deterministic."""
    n_cand = x.shape[0]
    if n >= n_cand:
        return list(range(n_cand))
    f = np.hstack([x, z])
    k = np.diag(np.r_[np.full(x.shape[1], EPS), np.ones(z.shape[1])])
    design = list(dict.fromkeys(forced))
    while len(design) < n:
        m_inv = np.linalg.inv(k + f[design].T @ f[design])
        d = np.einsum("ij,jk,ik->i", f, m_inv, f)
        d[design] = -np.inf
        design.append(int(np.argmax(d)))
    return _exchange(f, k, design, set(forced))


def _exchange(f: Matrix, k: Matrix, design: list[int], fixed: set[int]) -> list[int]:
    """Fedorov's exchange: swap the design row and candidate whose exchange raises the determinant most, until
    no exchange raises it (det(M - x_i x_i' + x_j x_j') / det(M) = (1 + d_j)(1 - d_i) + d_ij^2)."""
    for _ in range(MAX_EXCHANGES):
        m_inv = np.linalg.inv(k + f[design].T @ f[design])
        cross = f[design] @ m_inv @ f.T  # d_ij for every design row i and candidate j
        d_all = np.einsum("ij,jk,ik->i", f, m_inv, f)
        d_i = d_all[design]
        gain = (1 + d_all[None, :]) * (1 - d_i[:, None]) + cross**2
        gain[:, design] = 0.0
        for row, idx in enumerate(design):
            if idx in fixed:
                gain[row, :] = 0.0
        i, j = np.unravel_index(int(np.argmax(gain)), gain.shape)
        if gain[i, j] <= 1 + 1e-9:
            break
        design[int(i)] = int(j)
    return sorted(design)


def d_efficiency(x: Matrix) -> float:
    """D-efficiency of a design's primary model matrix, 0..1 (1: orthogonal, every run informs every effect)."""
    n, p = x.shape
    if n < p:
        return 0.0
    sign, logdet = np.linalg.slogdet(x.T @ x / n)
    return float(np.exp(logdet / p)) if sign > 0 else 0.0


def relative_d_efficiency(chosen: Matrix, every: Matrix) -> float:
    """D-efficiency of the chosen rows per run relative to running every candidate: (det(X_d'X_d/n) /
    det(X'X/N))^(1/p); 1.0 means each chosen test informs the main effects as well as the average test."""
    sd, ld = np.linalg.slogdet(chosen.T @ chosen / chosen.shape[0])
    sa, la = np.linalg.slogdet(every.T @ every / every.shape[0])
    if sd <= 0 or sa <= 0:
        return 0.0
    return float(np.exp((ld - la) / every.shape[1]))


def rank(m: Matrix) -> int:
    return int(np.linalg.matrix_rank(m)) if m.size else 0


@dataclass(frozen=True)
class Separation:
    """Whether an interaction's columns can be estimated beside the main effects: in the whole candidate set
    (`in_matrix`) and in the chosen tests (`in_design`); `aliases`: the main-effect columns it is confused with
    in the chosen tests (index, coefficient), largest first."""

    in_matrix: bool
    in_design: bool
    aliases: tuple[tuple[int, float], ...] = ()


class Projector:
    """Least squares on fixed columns x, factorised once (every interaction is projected on the same main effects)."""

    def __init__(self, x: Matrix) -> None:
        self.x = x
        self.pinv = np.linalg.pinv(x)

    def coef(self, z: Matrix) -> Matrix:
        return np.asarray(self.pinv @ z, dtype=np.float64)

    def added_rank(self, z: Matrix) -> int:
        """How many dimensions z adds beside x (the rank of z's residual after projecting on x)."""
        if z.shape[1] == 0:
            return 0
        resid = z - self.x @ self.coef(z)
        scale = max(1.0, float(np.abs(z).max()))
        return int(np.linalg.matrix_rank(resid, tol=1e-8 * scale * max(resid.shape)))


def separation(every: Projector, chosen: Projector, z_all: Matrix, rows: Sequence[int]) -> Separation:
    """What the chosen rows (`chosen`: their primary columns) can say about the interaction columns z beside the
    primary columns (`every`: over all candidates)."""
    gain_all = every.added_rank(z_all)
    if gain_all == 0:
        return Separation(False, False)
    zd = z_all[list(rows)]
    if chosen.added_rank(zd) == gain_all:
        return Separation(True, True)
    weight = np.abs(chosen.coef(zd)).max(axis=1)
    order = [int(i) for i in np.argsort(-weight) if i > 0 and weight[i] >= 0.25]  # 0 is the intercept
    return Separation(True, False, tuple((i - 1, float(weight[i])) for i in order))
