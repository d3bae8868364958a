"""
Tutorial 6: the auto-scheduler
==============================

Tutorials 1 to 4 wrote schedules by hand. `sl.auto_schedule` finds one from the
algorithm alone: it draws candidate schedules from sketch rules (tile the loops
with data reuse, inline elementwise stages, cache the output tile, parallelize
the outer loops, vectorize the inner one), evolves them under a learned cost
model, builds and times the most promising few in a worker process, and logs
every measurement as a line of JSON. Here we

1. tune a GEMM and check the winner against numpy,
2. tune a padded 3x3 conv2d the same way,
3. read the records file, and print the best schedule as Python (`sl.print_best`),
4. draw the tuning curve, best GFLOP/s against trials (`sl.plot_tuning`),
5. measure on a local Dask cluster, as one would on many machines.

Run it with  `python tutorials/06_autoschedule.py`  (a few minutes: 64 trials per
workload; `--trials N` for more or fewer, `--out DIR` keeps the records and the curve,
else they go to a temp dir;
`--quick`: tiny shapes and 4 trials each, seconds, what CI runs).

The measurement workers run schedlang's own entry point and never import this script,
so a tuning script needs no `if __name__ == "__main__":` guard (this one has one for its
command-line options).
"""

import json
import os

import numpy as np

import schedlang as sl
from schedlang import topi
from _common import format_seconds, fresh_log, header, parse_tuning_args, timing_note  # noqa: E402 (the tutorials' shared helpers)
from schedlang.autoschedule import SearchPolicy, records


def gemm(n):
    """A workload function, as in TVM: it returns the program's arguments in call order
    (the algorithm is schedlang.topi's, C[i, j] = sum over k of A[i, k] * B[k, j])."""
    A = sl.placeholder((n, n), name="A")
    B = sl.placeholder((n, n), name="B")
    return [A, B, topi.nn.matmul(A, B)]


def conv2d(batch, cin, cout, size):
    """A 3x3 NCHW convolution with one pixel of zero padding, a stage of its own (topi.nn.conv2d_nchw)."""
    X = sl.placeholder((batch, cin, size, size), name="X")
    W = sl.placeholder((cout, cin, 3, 3), name="W")
    return [X, W, topi.nn.conv2d_nchw(X, W, pad=1, name="Y")]


def conv2d_numpy(x, w):
    """The same convolution in numpy (float64), from shifted slices."""
    n, c, size, _ = x.shape
    p = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, w.shape[0], size, size))
    for dy in range(3):
        for dx in range(3):
            out += np.einsum("nchw,fc->nfhw", p[:, :, dy:dy + size, dx:dx + size], w[:, :, dy, dx])
    return out


def run(s, args, inputs):
    out = np.zeros(args[-1].shape, "float32")
    sl.build(s, args)(*inputs, out)
    return out


def main():
    args = parse_tuning_args(__doc__, "trials per workload (default 64; quick: 4)",
                             "directory for records.jsonl and curve.png (default: a temp dir)")
    trials = args.trials or (4 if args.quick else 64)
    # A small search per round when quick: few candidates lowered and scored.
    policy = SearchPolicy(population=8, generations=1) if args.quick else SearchPolicy()
    timing = dict(number=1, repeat=2) if args.quick else {}
    with fresh_log(args.out, "records.jsonl", keep=not args.quick) as (out_dir, log):   # the curve stays to look at
        tune_and_read(args, trials, policy, timing, out_dir, log)


def tune_and_read(args, trials, policy, timing, out_dir, log):
    rng = np.random.default_rng(0)

    # -----------------------------------------------------------------------
    header(f"1. Tuning a GEMM ({trials} trials)")
    n = 32 if args.quick else 512
    task = sl.SearchTask(gemm, (n,), "llvm")
    print(task, f"- {task.flops / 1e6:.3g} MFLOP per call")
    # verbose=1 shows a progress bar with the best GFLOP/s on a terminal, a line per round elsewhere.
    s, arg_list = sl.auto_schedule(task, trials=trials, log=log, seed=0, policy=policy, **timing)
    a, b = rng.uniform(-1, 1, (n, n)).astype("float32"), rng.uniform(-1, 1, (n, n)).astype("float32")
    c = run(s, arg_list, [a, b])
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4 * n)
    print("the tuned GEMM matches numpy")

    # -----------------------------------------------------------------------
    header(f"2. Tuning a padded 3x3 conv2d ({trials} trials)")
    shape = (1, 4, 4, 8) if args.quick else (1, 64, 64, 56)
    conv = sl.SearchTask(conv2d, shape, "llvm")
    print(conv, f"- {conv.flops / 1e6:.3g} MFLOP per call")
    s_conv, conv_args = sl.auto_schedule(conv, trials=trials, log=log, seed=0, policy=policy, **timing)
    batch, cin, cout, size = shape
    x = rng.uniform(-1, 1, (batch, cin, size, size)).astype("float32")
    w = rng.uniform(-1, 1, (cout, cin, 3, 3)).astype("float32")
    y = run(s_conv, conv_args, [x, w])
    np.testing.assert_allclose(y, conv2d_numpy(x, w), rtol=1e-4, atol=1e-4 * cin * 9)
    print("the tuned conv2d matches numpy")
    print("its schedule's steps:", ", ".join(st.primitive for st in s_conv.steps))

    # -----------------------------------------------------------------------
    header("3. The records: one JSON object per measured candidate")
    recs = records.load(log)
    searched = [r for r in recs if "final" not in r]
    assert len(searched) == 2 * trials, f"expected {2 * trials} records, found {len(searched)}"
    # When a search ends, its best few candidates are timed again side by side, and logged
    # once more with "final": on a shared machine, times taken minutes apart drift more than
    # the best candidates differ. That last comparison picks the winner.
    final = [r for r in recs if "final" in r]
    print(f"{len(searched)} searched candidates and {len(final)} records of the final comparisons")
    first = dict(recs[0])
    first["steps"] = f"<{len(first['steps']['steps'])} schedule steps>"
    first["decisions"] = "<the sketch's random choices>"
    print(json.dumps(first, indent=2, sort_keys=True))
    timing_note(args.quick)
    for name, t in (("GEMM", task), ("conv2d", conv)):
        ok = records.ranked(records.load(log, t.workload_key, str(t.target)))
        best = ok[0]
        print(f"{name}: {len(ok)} candidates ran; the best takes {format_seconds(best['median_s'])} "
              f"({best['gflops']:.3g} GFLOP/s)")
    print()
    # The winner as Python using the public primitives: paste it after create_schedule.
    text = sl.print_best(log, task)
    assert "s = sl.create_schedule" in text
    again, _ = sl.apply_best(log, task)      # replaying the record gives the same schedule
    assert again.to_json() == s.to_json()

    # -----------------------------------------------------------------------
    header("4. The tuning curve: best throughput against trials, per workload")
    curves = sl.autoschedule.tuning_curves(log)
    for (key, target), curve in curves.items():
        shown = ["-" if y is None else f"{y:.3g}" for y in curve[:8]]
        print(f"{key[:12]} on {target.split()[0]}: best GFLOP/s after each trial {' '.join(shown)}"
              f"{' ...' if len(curve) > 8 else ''}")
        assert all(a <= b for a, b in zip(curve, curve[1:]) if a is not None)   # never worse
    try:
        png = os.path.join(out_dir, "curve.png")
        sl.plot_tuning(log, png)
        print(f"wrote {png}")
    except ImportError as err:          # matplotlib is optional: pip install 'schedlang[plot]'
        print(f"(no plot: {err})")

    # -----------------------------------------------------------------------
    header("5. Measuring on a Dask cluster")
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        print("(skipped: pip install 'schedlang[dask]' for Dask)")
        return
    # A local cluster stands in for a real one (Client("tcp://scheduler:8786")). A round's
    # candidates build in parallel on its workers; timed runs take a lock per machine, so
    # they never overlap on one machine. The same log resumes: nothing is measured twice.
    more = 2 if args.quick else 16
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        s_dask, _ = sl.auto_schedule(task, trials=more, log=log, executor=client, seed=1, policy=policy,
                                     **timing)
    c = run(s_dask, arg_list, [a, b])
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4 * n)
    gemm_recs = [r for r in records.load(log, task.workload_key) if "final" not in r]
    hashes = [r["kernel_hash"] for r in gemm_recs]
    assert len(gemm_recs) == trials + more and len(set(hashes)) == len(hashes)
    print(f"{more} more GEMM candidates measured on the cluster; {len(gemm_recs)} searched in the log, "
          "no kernel searched twice; the result still matches numpy")


if __name__ == "__main__":
    main()
