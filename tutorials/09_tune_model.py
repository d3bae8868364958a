"""
Tutorial 9: tuning a whole model
================================

Tutorial 6 tuned one kernel at a time; tutorial 8 compiled whole models with default
schedules. This one tunes a model the way Ansor tunes a network:

    compiled = schedlang.torch.compile(model, (x,), tune=200, log="model.jsonl")

1. Tasks: every kernel of the compiled model (a convolution with its batch norm, ReLU and
   residual add; the pooling; the classifier's matmul ...) is a task of its own, and equal
   kernels (the same block repeated) are one task whose weight is how often it runs.
2. Tuning: a task scheduler gives the trials to the tasks a round at a time: first one round
   each, then the task where the model's estimated latency (sum of weight x best latency)
   is expected to drop most (Ansor's gradient strategy; `strategy="round-robin"` for the
   plain alternative). Each task starts from its default schedule, measured first.
3. The tuned model: each kernel built with its best record, checked against eager PyTorch
   and timed against the untuned model.
4. Records travel: another model with the same layers finds them in the log.
5. The same from the command line: `schedlang tune`.

Run it with  `python tutorials/09_tune_model.py`  (a few minutes: 200 trials; `--trials N`;
`--quick`: a tiny model and 2 trials per task, what CI runs).
"""


import torch

import schedlang.torch as st
from _common import format_seconds, fresh_log, header, parse_tuning_args, timing_note  # noqa: E402 (the tutorials' shared helpers)
from schedlang.autoschedule import SearchPolicy, records
from schedlang.torch.tune import extract_tasks, task_table, time_call

TOL = dict(rtol=1e-4, atol=1e-4)     # float32: sums reordered by blocking and vectors


class Block(torch.nn.Module):
    """A ResNet basic block: two 3x3 conv + batch norm, ReLU, the input added back."""

    def __init__(self, c):
        super().__init__()
        self.c1, self.b1 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False), torch.nn.BatchNorm2d(c)
        self.c2, self.b2 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False), torch.nn.BatchNorm2d(c)

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        return torch.relu(self.b2(self.c2(y)) + x)


class Net(torch.nn.Module):
    """A stem convolution, `blocks` equal residual blocks, global pooling and a classifier."""

    def __init__(self, c, blocks, classes=10):
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, c, 3, padding=1, bias=False), torch.nn.BatchNorm2d(c),
                                        torch.nn.ReLU())
        self.blocks = torch.nn.Sequential(*[Block(c) for _ in range(blocks)])
        self.fc = torch.nn.Linear(c, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1))


def make(c, blocks, seed=0):
    torch.manual_seed(seed)
    model = Net(c, blocks).eval()
    for m in model.modules():            # batch norms that are not identities
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    return model


def main():
    args = parse_tuning_args(__doc__, "trials in all (default 200; quick: 2 per task)",
                             "directory for the log (default: a temp dir)")
    channels, size = (8, 8) if args.quick else (64, 56)
    with fresh_log(args.out, "model.jsonl", prefix="schedlang_tune_model_") as (_, log):
        run(args, channels, size, log)


def run(args, channels, size, log):
    model, x = make(channels, blocks=2), torch.randn(1, 3, size, size)

    # -----------------------------------------------------------------------
    header("1. The tasks: one per distinct kernel, weighted by how often it runs")
    untuned = st.compile(model, (x,))
    tasks = extract_tasks(untuned.program, untuned.target)
    for i, t in enumerate(tasks):
        print(f"task {i}: {t.kind:9} {t.name:48} weight {t.weight}  {t.task.flops / 1e6:8.3f} MFLOP")
    shared = [t.name for t in tasks if t.weight > 1]
    print(f"{len(tasks)} tasks for {sum(t.weight for t in tasks)} kernels: the blocks' first convolutions (with "
          f"their batch norm) are one kernel run twice ({', '.join(shared)}); the second ones are lowered "
          "differently in the last block (its result feeds the pooling), so they are two tasks")
    assert shared

    # -----------------------------------------------------------------------
    trials = args.trials or (2 * len(tasks) if args.quick else 200)
    header(f"2. Tuning with the gradient task scheduler ({trials} trials)")
    # quick: 2 variants of each conv's default (not 15: each is lowered, hashed and timed) and 1
    # population of the elites' children a round (not 4: each child is lowered for its features)
    quick = dict(number=1, repeat=2, per_round=2, policy=SearchPolicy(population=8, generations=1, local_breadth=1),
                 final=0, variants=2) if args.quick else {}
    with torch.no_grad():
        tuned = st.compile(model, (x,), tune=trials, log=log, strategy="gradient", seed=0, **quick)
    print(task_table(tuned.tuning))
    print(f"rounds went to the tasks in this order: {tuned.tuning.order}")

    # -----------------------------------------------------------------------
    header("3. The tuned model: checked against eager, timed against the untuned one")
    with torch.no_grad():
        want = model(x)
        torch.testing.assert_close(tuned(x), want, **TOL)
        other = torch.randn_like(x)
        torch.testing.assert_close(tuned(other), model(other), **TOL)
        print("tuned model matches eager PyTorch")
        timing_note(args.quick)
        t_tuned, t_untuned, t_eager = time_call(lambda: tuned(x), lambda: untuned(x), lambda: model(x),
                                                rounds=3 if args.quick else 7)
    print(f"tuned {format_seconds(t_tuned)}, untuned {format_seconds(t_untuned)}, eager {format_seconds(t_eager)} "
          "per call (timed in alternation)")

    # -----------------------------------------------------------------------
    header("4. Records travel: a deeper model with the same blocks reads the same log")
    deeper = make(channels, blocks=3, seed=1)
    with torch.no_grad():
        built = st.compile(deeper, (x,), log=log)       # a log without tune= is only read
        torch.testing.assert_close(built(x), deeper(x), **TOL)
    keys = {r["workload"] for r in records.load(log)}
    found = [t for t in extract_tasks(built.program, built.target) if t.workload_key in keys]
    print(f"{sum(t.weight for t in found)} of its {sum(t.weight for t in extract_tasks(built.program, built.target))} "
          "kernels were built from records made for the first model (the stem, the blocks' first convolutions, now "
          "three, ...); it matches eager PyTorch")
    print(f"runs per forward of the kernels found in the log: {sorted(t.weight for t in found)}")
    # a kernel of the blocks (or the padded copy feeding their convolutions) runs at least once per block
    assert found and max(t.weight for t in found) >= 3

    # -----------------------------------------------------------------------
    header("5. From the command line")
    print("schedlang tune model.py --model Net --shape 1,3,56,56 --trials 200 --log model.jsonl --timeout 1800\n"
          "tunes the same way, prints a line per round, this table, and the model's latency tuned and untuned.")


if __name__ == "__main__":
    main()
