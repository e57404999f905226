"""Train one type's tree on its stored decisions, hold a fifth back to measure it, and export it to the file.

A single CART tree (scikit-learn's DecisionTreeClassifier) is what the policy needs: each leaf is a set of
situations with the model's choices in it, so its weighted share of each action *is* the confidence a cascade
compares with its threshold, and a leaf where the model tossed a coin stays near 50/50 and defers. Boosted
trees score better on accuracy but their leaves hold additive scores, not a distribution to defer on, and a
hundred of them are no longer something a game developer reads. Leaves are smoothed by one decision's weight
an action, so a small pure leaf is not taken for a sure one.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from npcmind.distill.features import encode, situation, to_feature
from npcmind.storage.base import TrainingRow
from npcmind_client.policy import Feature, Tree, TypePolicy

# how much a decision counts by its reported outcome: what worked is learnt more than what failed, so the policy
# can pick, where the model tossed a coin, the action that worked (docs/policy.md). Reports are the games' word,
# unchecked: each session's become one vote an action, and an action's weight is the sessions' agreed one
# (outcome_factors), so no one session steers the policy every other session gets (issue 29).
OUTCOME_WEIGHTS = {"done": 2.0, "failed": 0.25, "interrupted": 1.0, "rejected": 1.0, None: 1.0}
# |an encoded number| is kept to this: scikit-learn trains on float32 (at most 3.4e38), and a game's 1e300
# had stopped training for every type ("Input X contains infinity"). Clipped, a value beyond it still falls on
# the same side of every threshold the tree can learn (all of them lie within it), in training as in a game.
CLIP = 1e30
THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
HOLD_OUT = 5  # one decision in this many is held back to measure the policy
MAX_DEPTH = 12
MIN_LEAF = 12  # decisions a leaf holds at least
SMOOTHING = 1.0  # weight added to every action of a leaf
# In each leaf, no session weighs more than this times the mean of the other sessions that reached it (issue 39: one
# session with as many decisions as six honest ones together, all of an action none of them chose, had the policy
# act on it in 60 of 500 situations; bounded, a session is at most half of any leaf, its action never above 0.5)
LEAF_SESSION_FACTOR = 1.0


@dataclass(slots=True)
class TypeReport:
    """What training one type gave: its file entry, and how it agrees with the model on the held-back fifth."""

    name: str
    decisions: int
    trained: int
    held_back: int
    agreement: float
    table: list[tuple[float, float, float | None]]  # threshold, coverage, agreement among the covered
    entry: dict[str, Any] = field(default_factory=dict)


def split(rows: list[TrainingRow], seed: int = 0) -> tuple[list[TrainingRow], list[TrainingRow]]:
    """Four fifths to train on and one to measure, shuffled with a fixed seed so a run can be repeated."""
    shuffled = list(rows)
    random.Random(seed).shuffle(shuffled)
    cut = len(shuffled) // HOLD_OUT
    return shuffled[cut:], shuffled[:cut]


def _agreed(votes: list[float]) -> float:
    """The sessions' agreed factor: the median vote; of an even number, the middle one nearer to 1 (no pull), so
    one session against one other can lessen a pull, never make one."""
    if not votes:
        return 1.0
    votes = sorted(votes)
    n = len(votes)
    if n % 2:
        return votes[n // 2]
    low, high = votes[n // 2 - 1], votes[n // 2]
    return low if abs(math.log(low)) <= abs(math.log(high)) else high


def outcome_factors(rows: list[TrainingRow], actions: list[str]) -> dict[str, float]:
    """How much each action's decisions count by their outcomes, agreed across the sessions that reported any:
    each votes, for each action, its mean outcome weight over its mean across the actions it reported (1 for
    one it did not report, and for all when it reported one action only); the factor is the median vote."""
    by_session: dict[str | None, dict[str, list[float]]] = {}
    for r in rows:
        if r.outcome is not None:
            by_session.setdefault(r.session_id, {}).setdefault(r.action, []).append(OUTCOME_WEIGHTS.get(r.outcome, 1.0))
    votes: dict[str, list[float]] = {a: [] for a in actions}
    for reported in by_session.values():
        means = {a: sum(ws) / len(ws) for a, ws in reported.items()}
        overall = sum(means.values()) / len(means)
        for a in actions:
            votes[a].append(means.get(a, overall) / overall)
    return {a: _agreed(vs) for a, vs in votes.items()}


def row_weights(rows: list[TrainingRow], actions: list[str]) -> list[float]:
    """Each decision's weight: its action's agreed outcome factor."""
    factor = outcome_factors(rows, actions)
    return [factor.get(r.action, 1.0) for r in rows]


def fair_rows(rows: list[TrainingRow], seed: int = 0) -> list[TrainingRow]:
    """The decisions a tree is fit on: of a session with more than all the other sessions together, as many as
    they have, drawn at random (seeded), in their order; so one session's volume can neither outweigh the others
    in the fit nor cut the situations they share into leaves of its own (and a round's work is bounded by the
    others'). One session alone keeps all."""
    per_session: dict[str | None, list[int]] = {}
    for i, r in enumerate(rows):
        per_session.setdefault(r.session_id, []).append(i)
    if len(per_session) < 2:
        return rows
    keep: list[int] = []
    rng = random.Random(seed)
    for held in per_session.values():
        cap = len(rows) - len(held)
        keep += held if len(held) <= cap else rng.sample(held, cap)
    return [rows[i] for i in sorted(keep)]


def leaf_weights(leaves: Any, y: Any, w: Any, sessions: Any, nodes: int, actions: int) -> Any:
    """Each leaf's weight of each action, where no session weighs more than the mean of the other sessions that
    reached the leaf (LEAF_SESSION_FACTOR times it): what one session can add to what a leaf learns is bounded
    however many decisions it makes there, and a leaf only one session reached learns nothing (it defers). With
    one session among the type's decisions, nothing is bounded."""
    import numpy as np

    out = np.zeros((nodes, actions))
    if len(sessions) == 0 or sessions.max() == 0:  # one session: its leaves are its own
        np.add.at(out, (leaves, y), w)
        return out
    n_sessions = int(sessions.max()) + 1
    key, inverse = np.unique(leaves * n_sessions + sessions, return_inverse=True)
    inverse = inverse.reshape(-1)
    total = np.bincount(inverse, weights=w, minlength=len(key))  # each session's weight in each leaf
    leaf_of = key // n_sessions
    leaf_total = np.bincount(leaf_of, weights=total, minlength=nodes)
    leaf_sessions = np.bincount(leaf_of, minlength=nodes)
    others = np.maximum(leaf_sessions[leaf_of] - 1, 1)
    bound = LEAF_SESSION_FACTOR * (leaf_total[leaf_of] - total) / others  # the other sessions' mean weight there
    scale = np.where(total > bound, bound / np.where(total > 0, total, 1.0), 1.0)
    np.add.at(out, (leaves, y), w * scale[inverse])
    return out


def fit(
    rows: list[TrainingRow], specs: list[dict[str, Any]], actions: list[str], step: Callable[[str], None]
) -> dict[str, Any]:
    """One type's file entry: its tree, over the features it uses, with a smoothed distribution at each leaf."""
    import numpy as np
    from sklearn.tree import DecisionTreeClassifier

    features = [to_feature(s) for s in specs]
    rows = fair_rows(rows)
    step("encoding")
    x = encode(rows, features)
    np.clip(x, -CLIP, CLIP, out=x)
    index = {a: i for i, a in enumerate(actions)}
    y = np.asarray([index[r.action] for r in rows])
    w = np.asarray(row_weights(rows, actions))
    ids: dict[str | None, int] = {}
    sessions = np.asarray([ids.setdefault(r.session_id, len(ids)) for r in rows], dtype=np.int64)
    step("fitting")
    clf = DecisionTreeClassifier(max_depth=MAX_DEPTH, min_samples_leaf=MIN_LEAF, random_state=0)
    clf.fit(x, y, sample_weight=w)
    step("exporting")
    t = clf.tree_
    weights = leaf_weights(clf.apply(x), y, w, sessions, t.node_count, len(actions))
    used = sorted({int(f) for f in t.feature if f >= 0})
    remap = {old: new for new, old in enumerate(used)}
    leaves = t.children_left < 0
    value: list[list[float]] = [
        [float(v) for v in (row + SMOOTHING) / (row.sum() + SMOOTHING * len(actions))] if leaf else []
        for row, leaf in zip(weights, leaves, strict=True)
    ]
    tree = {
        "feature": [remap[int(f)] if not leaf else -1 for f, leaf in zip(t.feature, leaves, strict=True)],
        "threshold": [float(v) if not leaf else 0.0 for v, leaf in zip(t.threshold, leaves, strict=True)],
        "left": [int(v) for v in t.children_left],
        "right": [int(v) for v in t.children_right],
        "value": value,
    }
    return {"actions": actions, "features": [specs[i] for i in used], "trees": [tree], "trained_on": len(rows)}


def type_policy(entry: dict[str, Any]) -> TypePolicy:
    """A file entry as the evaluator reads it (to measure exactly what a game will run)."""
    trees = [Tree(t["feature"], t["threshold"], t["left"], t["right"], t["value"]) for t in entry["trees"]]
    features: list[Feature] = [to_feature(s) for s in entry["features"]]
    return TypePolicy(entry["actions"], features, trees)


def measure(tp: TypePolicy, held: list[TrainingRow]) -> tuple[float, list[tuple[float, float, float | None]]]:
    """Agreement with the model on the held-back decisions, and coverage and agreement by threshold."""
    chosen = [(tp.choose(situation(r)) or (None, 0.0), r.action) for r in held]
    n = len(chosen) or 1
    agree = sum(1 for (a, _), m in chosen if a == m) / n
    table: list[tuple[float, float, float | None]] = []
    for th in THRESHOLDS:
        covered = [(a, m) for (a, c), m in chosen if a is not None and c >= th]
        hits = sum(1 for a, m in covered if a == m)
        table.append((th, len(covered) / n, hits / len(covered) if covered else None))
    return agree, table
