"""The task scheduler's choices (autoschedule/task_scheduler.py), with fake rounds whose
latencies are fixed curves: what each round measures is decided here, not by a clock."""
import pytest

from schedlang.autoschedule.task_scheduler import NO_COST, TaskScheduler


class FakeRounds:
    """Task i's best latency after its r-th round is curves[i][r - 1] (the last value once
    the curve runs out); a task listed in `exhausted` measures nothing from that round on."""

    def __init__(self, curves, exhausted=None):
        self.curves, self.exhausted = curves, exhausted or {}
        self.done = [0] * len(curves)
        self.calls = []

    def __call__(self, i, count):
        self.calls.append((i, count))
        if self.done[i] >= self.exhausted.get(i, 10 ** 9):
            return 0, self.curves[i][min(self.done[i], len(self.curves[i])) - 1]
        self.done[i] += 1
        return count, self.curves[i][min(self.done[i], len(self.curves[i])) - 1]


def falling(start, rate, n=60):
    return [start * rate ** r for r in range(n)]


def test_warm_up_visits_every_task_once_in_order():
    fake = FakeRounds([falling(1.0, 0.9)] * 3)
    ts = TaskScheduler([1, 1, 1], [1e6] * 3, seed=0)
    ts.tune(3 * 8 + 8, fake, per_round=8)
    assert ts.order[:3] == [0, 1, 2] and len(ts.order) == 4
    assert sum(ts.trials) == 32 and all(c == 8 for _, c in fake.calls)


def test_rounds_shrink_so_that_warm_up_reaches_every_task():
    fake = FakeRounds([falling(1.0, 0.9)] * 5)
    ts = TaskScheduler([1] * 5, [1e6] * 5, seed=0)
    ts.tune(12, fake, per_round=8)          # 12 // 5 = 2 per round
    assert ts.order[:5] == [0, 1, 2, 3, 4] and {c for _, c in fake.calls} == {2} and sum(ts.trials) == 12


def test_round_robin_takes_the_live_tasks_in_turn():
    fake = FakeRounds([falling(1.0, 0.9)] * 3, exhausted={1: 2})
    ts = TaskScheduler([1, 5, 1], [1e6] * 3, strategy="round-robin")
    ts.tune(4 * 8 * 3, fake, per_round=8)
    assert ts.order[:6] == [0, 1, 2, 0, 1, 2]
    assert ts.order[6:9] == [0, 1, 2] and fake.calls[7] == (1, 8)    # its third round measures nothing
    assert 1 in ts.dead and 1 not in ts.order[9:]          # exhausted: never picked again
    assert ts.order[9:13] == [0, 2, 0, 2]


def test_gradient_goes_where_the_weighted_latency_drops():
    """Same curves, one task runs ten times per forward: it gets the rounds."""
    fake = FakeRounds([falling(1.0, 0.8), falling(1.0, 0.8)])
    ts = TaskScheduler([1, 10], [1e6, 1e6], seed=0)
    ts.tune(8 * 12, fake, per_round=8)
    assert ts.order[:2] == [0, 1]
    assert ts.order[2:].count(1) > 3 * ts.order[2:].count(0)
    assert ts.estimate() == pytest.approx(1 * ts.best[0] + 10 * ts.best[1])


def test_gradient_prefers_the_task_still_improving():
    """Equal weights, bests and rounds: the one whose best dropped over its last rounds (the
    backward term) is picked over one that stayed flat, which only the optimistic forward
    term (equal for both) still speaks for."""
    ts = TaskScheduler([1, 1], [1e6, 1e6], seed=0)
    ts.rounds, ts.best = [5, 5], [1.0, 1.0]
    ts.history = [[1.0] * 5, [2.0, 1.8, 1.5, 1.2, 1.0]]
    assert ts.gradient(1) < ts.gradient(0) < 0
    assert ts.pick(-1) == 1


def test_gradient_formula_by_hand():
    ts = TaskScheduler([2.0, 1.0], [100.0, 100.0], alpha=0.2, beta=2.0, backward_window_size=2)
    hist = [8.0, 6.0, 5.0, 4.0]
    ts.rounds, ts.history, ts.best = [4, 1], [hist, [3.0]], [4.0, 3.0]
    backward = (hist[3] - hist[1]) / 2                       # -1 per round over the last two
    forward = (4.0 - 4.0 / 4) - 4.0                           # a 1/4 share of the rest: -1
    assert ts.gradient(0) == pytest.approx(2.0 * (0.2 * backward + 0.8 * forward))
    assert ts.gradient(1) == pytest.approx(1.0 * (0.2 * 0 + 0.8 * ((3.0 - 3.0) - 3.0)))
    assert ts.pick(0) == 1       # -2.4 beats -2.0


def test_similar_tasks_share_an_optimistic_estimate():
    """Tasks 0 and 1 are similar (one tag): task 0 reached 1 GFLOP/s; task 1 is at 0.1 and
    flat. The forward estimate of task 1 is beta * its FLOPs at the group's best speed, far
    below its own, so it is picked over task 2 (not similar, same weight and history)."""
    ts = TaskScheduler([1, 1, 1], [1e9, 1e9, 1e9], ["conv_1", "conv_1", ""], beta=2.0)
    ts.rounds, ts.best = [10, 10, 10], [1.0, 10.0, 10.0]
    ts.history = [[1.0] * 10, [10.0] * 10, [10.0] * 10]
    g1 = ts.gradient(1)
    assert g1 == pytest.approx(0.8 * (2.0 * 1e9 / (1e9 / 1.0) - 10.0))     # min(9, 2) - 10
    assert g1 < ts.gradient(2) == pytest.approx(0.8 * (9.0 - 10.0))
    assert ts.pick(-1) == 1


def test_a_task_that_stays_slow_leaves_its_similarity_group():
    fake = FakeRounds([[0.001], [1.0]])              # both flat; task 1 is 1000x slower per FLOP
    ts = TaskScheduler([1, 1], [1e6, 1e6], ["matmul_3", "matmul_3"], seed=0)
    ts.tune(8 * 20, fake, per_round=8)
    assert ts.tags[1] == "" and ts.groups["matmul_3"] == [0]


def test_early_stopping_ends_a_converged_task_and_then_tuning():
    fake = FakeRounds([[1.0, 0.5], falling(1.0, 0.9, 3)])
    ts = TaskScheduler([1, 1], [1e6, 1e6], early_stopping=16, seed=0)
    ts.tune(8 * 100, fake, per_round=8)
    assert ts.dead == {0, 1} and sum(ts.trials) < 8 * 100
    assert ts.trials[0] - ts.improved_at[0] >= 16 and ts.trials[1] - ts.improved_at[1] >= 16


def test_a_retired_task_gets_no_more_rounds():
    ts = TaskScheduler([1, 1], [1e6] * 2, strategy="round-robin", seed=0)

    def rounds(i, count):
        if i == 0:
            ts.retire(0)                # what tune.py does with a hopeless search
        return count, 1.0
    ts.tune(40, rounds, per_round=4)
    assert ts.order.count(0) == 1 and ts.order[1:] == [1] * 9 and ts.dead == {0}


def test_gradient_reaches_95_percent_in_fewer_trials_than_round_robin():
    """A model of one heavy kernel (run 12 times) and six light ones."""
    curves = [falling(1.0, 0.85)] + [falling(0.05, 0.85)] * 6
    weights, per = [12, 1, 1, 1, 1, 1, 1], 8
    runs = {}
    for strategy in ("gradient", "round-robin"):
        ts = TaskScheduler(weights, [1e6] * 7, strategy=strategy, seed=0, initial_s=[c[0] for c in curves])
        estimates = []
        ts.callback = lambda info: estimates.append((info.trials, info.estimate_s))
        ts.tune(per * 60, FakeRounds(curves), per_round=per)
        runs[strategy] = estimates
    final = max(runs["gradient"][-1][1], runs["round-robin"][-1][1])     # a latency both reach
    start = sum(w * c[0] for w, c in zip(weights, curves))
    goal = start - 0.95 * (start - final)
    first = {k: next(t for t, e in v if e <= goal) for k, v in runs.items()}
    assert first["gradient"] <= 0.7 * first["round-robin"], first


def test_gradient_skips_the_warm_up_of_tasks_that_start_with_a_latency():
    """Every task starts from its default schedule's measured latency, so no warm-up round is
    needed to compare them: the heavy task gets the rounds and the five tiny ones (a model's
    pads) none in this budget. Round-robin still visits every task in order."""
    curves = [falling(1.0, 0.9)] + [falling(0.001, 0.9)] * 5
    runs = {}
    for strategy in ("gradient", "round-robin"):
        ts = TaskScheduler([1] * 6, [1e6] * 6, strategy=strategy, seed=0, initial_s=[c[0] for c in curves])
        ts.tune(8 * 6, FakeRounds(curves), per_round=8)
        runs[strategy] = ts.order
    assert runs["gradient"] == [0] * 6
    assert runs["round-robin"] == [0, 1, 2, 3, 4, 5]


def test_a_resumed_task_skips_the_warm_up():
    """Task 1's trials are in the log already: the warm-up visits only task 0, and task 1
    counts as having had 32 / 8 = 4 rounds (a smaller optimistic share 1/4 of its best)."""
    fake = FakeRounds([falling(1.0, 0.9), falling(1.0, 0.9)])
    ts = TaskScheduler([1, 1], [1e6, 1e6], initial_s=[None, 1.0], initial_trials=[0, 32], seed=0)
    ts.tune(16, fake, per_round=8)
    assert ts.order[0] == 0 and ts.rounds[1] >= 4 and ts.trials[0] + ts.trials[1] == 16
    assert ts.order[1] == 0              # 1.0 / 1 (one round of task 0) beats 1.0 / 4


def test_estimate_is_unknown_until_every_task_has_a_latency():
    seen = []
    ts = TaskScheduler([1, 1], [1.0, 1.0], callback=seen.append)
    ts.tune(16, FakeRounds([[2.0], [3.0]]), per_round=8)
    assert seen[0].estimate_s is None and seen[1].estimate_s == pytest.approx(5.0)
    assert seen[1].task == 1 and seen[1].trials == 16 and seen[0].best_s == 2.0
    assert TaskScheduler([1], [1.0]).best == [NO_COST]


@pytest.mark.parametrize("kwargs, match", [
    (dict(strategy="greedy"), "strategy must be one of"),
    (dict(alpha=1.5), "alpha"),
    (dict(early_stopping=0), "early_stopping"),
    (dict(tags=["a"]), "one entry per task"),
])
def test_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TaskScheduler([1, 1], [1.0, 1.0], **kwargs)
    with pytest.raises(ValueError, match="no tasks"):
        TaskScheduler([], [])
