"""
Tutorial 8: whole models, compiled and cached
=============================================

Tutorial 5 compiled small modules. This one takes the two kinds of model users bring --
a standard ResNet-18 and a transformer block (GPT-2's: LayerNorm, causal self-attention
through F.scaled_dot_product_attention, a GELU MLP) -- from eager PyTorch to compiled
modules whose kernels are kept on disk for the next process:

    compiled = schedlang.torch.compile(model, (x,))            # or torch.compile(model, backend="schedlang")
    compiled.fallback_ops()                                     # {} when no op runs in torch

Part 1 compiles both, says which ops (if any) still run in torch, and checks the outputs
against eager. Part 2 reads the kernels: how many, the convolution + batch norm + ReLU
kernels, the one fused attention kernel. Part 3 does the same through torch.compile under
torch.no_grad(). Part 4 is the on-disk kernel cache: where it is, what it holds, and a
second process that compiles the same model from it. Part 5 times compiled against eager.
Part 6 shows where a forward spends its time, kernel by kernel ("llvm -profile"). Part 7 runs
the GPT-2 block in bfloat16, as models are often shipped: on a CPU with avx512bf16 its
Linears multiply pairs of bfloat16 values per instruction (vdpbf16ps), as oneDNN does.

The models come from schedlang.torch.zoo (written in the package: torchvision does not
import beside the CPU torch), with random weights and batch-norm statistics from a seed.
Run it with  `python tutorials/08_models.py`  (`--quick`: the zoo's "tiny" models, which
compile in seconds, and a fresh temporary cache folder, so it starts cold; what CI runs).
"""

import atexit
import copy
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

from _common import best_time, format_seconds, header, parse_args, timing_note  # noqa: E402 (the tutorials' shared helpers)

args = parse_args(__doc__)
SIZE = "tiny" if args.quick else "full"
REPEAT = 2 if args.quick else 10
TOL = 1e-4                     # float32: sums reordered by blocking and vectors, not a wrong result
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if args.quick:                 # a cold cache, so CI shows (and tests) a first compile
    # a new folder inside the caller's cache folder where one is set (a test session's), so
    # that nothing is left in a shared temp folder; removed when the tutorial ends
    parent = os.path.expanduser(os.environ.get("SCHEDLANG_CACHE_DIR", ""))
    if parent:
        os.makedirs(parent, mode=0o700, exist_ok=True)
    cold = tempfile.mkdtemp(prefix="schedlang-tutorial08-", dir=parent or None)
    atexit.register(shutil.rmtree, cold, ignore_errors=True)
    os.environ["SCHEDLANG_CACHE_DIR"] = cold
os.environ["SCHEDLANG_KERNEL_CACHE"] = "1"     # the cache on even where a test runner turned it off

import torch  # noqa: E402

import schedlang.torch  # noqa: E402
from schedlang import build_cache, kernel_cache  # noqa: E402
from schedlang.torch import zoo  # noqa: E402


def max_diff(got, want) -> float:
    return (got - want).abs().max().item()


# ===========================================================================
# Part 1: compile, look for ops left in torch, check against eager
# ===========================================================================
# zoo.build returns the model in eval mode and example inputs. compile captures it with
# torch.export, lowers every op it can into Tensor IR, fuses and builds kernels; an op it
# cannot lower runs in torch between kernels (with a FallbackWarning) -- never a wrong
# result, but a split model. fallback_ops() lists those ops: op -> number of nodes.
models, first_call = {}, {}
for name in ("resnet18", "gpt2"):
    model, inputs = zoo.build(name, SIZE, seed=0)
    header(f"{name} ({SIZE}): schedlang.torch.compile, inputs {[tuple(t.shape) for t in inputs]}")
    stores, loads = kernel_cache.stats.stores, kernel_cache.stats.loads
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", schedlang.torch.FallbackWarning)   # fallback_ops() says it
        start = time.perf_counter()
        compiled = schedlang.torch.compile(model, inputs)
        with torch.no_grad():                          # the compiled module computes no gradients
            got = compiled(*inputs)
        t_first = time.perf_counter() - start          # compile + first call: what a user waits for
    fallback = compiled.fallback_ops()
    stored, loaded = kernel_cache.stats.stores - stores, kernel_cache.stats.loads - loads
    print(f"compile + first call {format_seconds(t_first)} ({stored} built modules compiled and stored "
          f"on disk, {loaded} loaded from it)")
    print(f"ops run in torch: {fallback or 'none'}")
    with torch.no_grad():
        want = model(*inputs)
    diff = max_diff(got, want)
    print(f"output {tuple(got.shape)}, largest difference from eager: {diff:.2e}")
    assert got.shape == want.shape and diff <= TOL * max(1.0, want.abs().max().item()), diff
    first_call[name] = (t_first, stored, loaded)
    models[name] = (model, inputs, compiled, want)
# Convolution, eval-mode batch norm and the attention are lowered; if the printout above
# still names an op (a pooling op, say), that op runs in torch and splits the model into
# parts -- the kernels below are counted over all parts.


# ===========================================================================
# Part 2: the kernels
# ===========================================================================
# compiled.ir("kernel") prints every kernel with its arguments; compiled.modules holds the
# built module of each part (a part is what runs between two torch fallbacks). A batch
# norm that follows a convolution is folded into its weights when the module is compiled:
# the kernel reads a prepacked weight named ..._conv<lanes>_bn or, where its register tile spans
# several channel blocks (AVX2 3x3s), ..._conv_tiles<lanes>_bn (NCHWc-blocked, scaled by the
# batch norm), or, for a 3x3 computed as Winograd F(4 x 4, 3 x 3) (wide enough layers on
# AVX-512: its transforms are kernels of their own), ..._winograd<lanes>_bn, and a
# per-channel shift ..._bn_shift<n>, and the ReLU (and a residual add) is applied to the
# accumulator before the one store.
def kernel_heads(compiled):
    """(name, arguments) of each kernel, and each kernel's text."""
    bodies = compiled.ir("kernel").split("\nkernel ")[1:]
    return [(b[:b.index("(")], b[b.index("(") + 1:b.index(")")], b) for b in bodies]


header("ResNet-18: its kernels")
model, inputs, compiled, _ = models["resnet18"]
convs = sum(isinstance(m, torch.nn.Conv2d) for m in model.modules())
bns = sum(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())
heads = kernel_heads(compiled)
print(f"{convs} convolutions and {bns} batch norms in the model; {len(heads)} kernels in "
      f"{len(compiled.modules)} built part(s):")
conv_bn = folded_convs = 0
for kname, kargs, _body in heads:
    folded = sum(bool(re.search(r"_(conv(_tiles)?|winograd)\d+_bn$", a.split(":")[0])) for a in kargs.split(", "))
    conv_bn += folded > 0
    folded_convs += folded
    print(f"  {kname:55s} {folded} conv+bn" if folded else f"  {kname}")
print(f"{conv_bn} kernels compute convolutions with their batch norms folded, the ReLU and the residual "
      f"add in the epilogue (two convolutions where a downsampling shortcut is summed)")
assert folded_convs == convs == bns, "each convolution should be fused with the batch norm after it"
# a padded convolution reads a zero-padded copy of its input (a "_pad" kernel), so that its
# inner loop has no bounds checks; a Winograd one is three kernels: the input transform
# ("_wino_V"), the batched product that reads the folded weight ("_wino_M") and the output
# transform, whose epilogue adds the shift and applies the ReLU. A ReLU in a kernel of its own
# would make at least as many other kernels as conv kernels
pads = sum(kname.endswith("_pad") for kname, _, _ in heads)
wino = sum(kname.endswith("_wino_M") for kname, _, _ in heads)
print(f"{pads} kernels make the zero-padded inputs of the padded convolutions; {wino} convolutions run as Winograd")
assert len(heads) - conv_bn - pads - 2 * wino < conv_bn, "conv + bn + relu (+ the residual add) should be one kernel"
assert "rsqrt" not in str(compiled.program), "the batch norms are folded into the weights, not computed"

# Attention: scaled_dot_product_attention is one node in the Tensor IR and one kernel: the
# scores (q k^T, scaled), the causal mask (computed from the indices, not a [S, S] tensor),
# an online softmax and the value product, in blocks of keys -- the [S, S] score matrix is
# never stored. The kernel that computes the exp computes the scores and the product too.
header("GPT-2 block: its kernels")
model, inputs, compiled, _ = models["gpt2"]
heads = kernel_heads(compiled)
blocks = sum(type(m).__name__ == "GPT2Block" for m in model.modules())
attention = [kname for kname, _, body in heads if "_exp" in body and "_scores" in body and "_pv" in body]
print(f"{blocks} transformer block(s); {len(heads)} kernels:")
SHOWN = 10                     # a full GPT-2 has 12 blocks: the first one's kernels are enough
for kname, _, _ in heads[:SHOWN]:
    print(f"  {kname}" + ("   <- the fused attention" if kname in attention else ""))
if len(heads) > SHOWN:
    print(f"  ... and {len(heads) - SHOWN} more")
assert len(attention) == blocks, "one fused attention kernel per block"
assert all(("_exp" in b) == ("_scores" in b) == ("_pv" in b) for _, _, b in heads), "attention split"


# ===========================================================================
# Part 3: the same through torch.compile
# ===========================================================================
# Under torch.no_grad() the backend treats parameters as constants, as Inductor's
# freezing does: weights are prepacked and batch norms folded, so it builds the same
# kernels as schedlang.torch.compile. Those are already built (and stored on disk), so a
# cache answers them; "compiled anew" counts built modules whose program came out
# different from Part 1's (another grouping or other names), which the caches cannot share.
import schedlang.torch.dynamo  # noqa: E402,F401  (registers backend="schedlang")

for name, (model, inputs, _, want) in models.items():
    header(f'{name}: torch.compile(model, backend="schedlang") under torch.no_grad()')
    hits, misses, loads = build_cache.stats.hits, build_cache.stats.misses, kernel_cache.stats.loads
    torch._dynamo.reset()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", schedlang.torch.FallbackWarning)
        dynamo_model = torch.compile(model, backend="schedlang", dynamic=False)
        start = time.perf_counter()
        got = dynamo_model(*inputs)            # compiles on the first call
        t_first = time.perf_counter() - start
    diff = max_diff(got, want)
    print(f"first call {format_seconds(t_first)}; largest difference from eager: {diff:.2e}")
    print(f"built modules: {build_cache.stats.hits - hits} from the in-memory cache, "
          f"{kernel_cache.stats.loads - loads} from disk, {build_cache.stats.misses - misses} compiled anew")
    assert diff <= TOL * max(1.0, want.abs().max().item()), diff


# ===========================================================================
# Part 4: the on-disk kernel cache
# ===========================================================================
# Every kernel built for the host is stored in $SCHEDLANG_CACHE_DIR/kernels (default
# ~/.cache/schedlang), keyed by the program, the schedule, the target and the versions that
# affect code. A later process compiling the same model loads each kernel from there --
# no lowering, no LLVM code generation. `schedlang cache info` shows it, `schedlang cache
# clear` empties it; SCHEDLANG_KERNEL_CACHE=0 turns it off.
header("schedlang cache info")
from schedlang import cli  # noqa: E402

print(f"this process: {kernel_cache.stats.stores} built modules stored, {kernel_cache.stats.loads} loaded from disk")
assert cli.main(["cache", "info"]) == 0
assert kernel_cache.info()["kernels"]["entries"] > 0, "the kernels should have been stored"

# A second process: a tiny script that builds the same ResNet and compiles it, timing the
# compile and the first call. This process compiled it cold (in quick mode the cache
# folder was new and empty); the second one should find every kernel on disk.
SCRIPT = f"""
import time, warnings, torch
import schedlang.torch
from schedlang import kernel_cache
from schedlang.torch import zoo
model, inputs = zoo.build("resnet18", {SIZE!r}, seed=0)
start = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore", schedlang.torch.FallbackWarning)
    compiled = schedlang.torch.compile(model, inputs)
    with torch.no_grad():
        compiled(*inputs)
print(time.perf_counter() - start, kernel_cache.stats.loads, kernel_cache.stats.stores)
"""
header("A second process compiles the same ResNet-18")
env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                      text=True, timeout=600)
assert proc.returncode == 0, proc.stdout
seconds, loads, stores = proc.stdout.split()[-3:]
t_first, stored, loaded = first_call["resnet18"]
print(f"this process (Part 1):  compile + first call {format_seconds(t_first):>9}  "
      f"({stored} modules compiled, {loaded} loaded from disk)")
print(f"the second process:     compile + first call {format_seconds(float(seconds)):>9}  "
      f"({stores} modules compiled, {loads} loaded from disk)")
assert int(loads) > 0 and int(stores) == 0, "the second process should load every kernel from disk"

# ===========================================================================
# Part 5: timing
# ===========================================================================
# Latency of one call at batch 1, compiled against eager, both in this process. Measured,
# not promised: on a machine shared with other work these numbers are noisy.
header(f"Timing: eager vs compiled (torch uses {torch.get_num_threads()} threads)")
timing_note(args.quick)
for name, (model, inputs, compiled, _) in models.items():
    with torch.no_grad():
        t_eager = best_time(lambda: model(*inputs), repeat=REPEAT)
        t_sl = best_time(lambda: compiled(*inputs), repeat=REPEAT)
    print(f"{name:9s} eager {format_seconds(t_eager):>9}   schedlang {format_seconds(t_sl):>9}   "
          f"({t_eager / t_sl:.2f}x)")

# ===========================================================================
# Part 6: where a forward spends its time, kernel by kernel
# ===========================================================================
# Compiled for "llvm -profile", every kernel reads the clock before and after it runs, inside
# the model, after the kernel before it (TVM's debug executor times each operator so).
# profile() calls the model and returns each kernel's time per forward, slowest first,
# and what the forward spent outside the kernels (binding the call, torch steps, Python).
# The kernels are the same as without the option: two clock reads each is all it adds.
header("ResNet-18 compiled for 'llvm -profile': compiled.profile(*inputs)")
model, inputs, _, want = models["resnet18"]
with warnings.catch_warnings():
    warnings.simplefilter("ignore", schedlang.torch.FallbackWarning)
    profiled = schedlang.torch.compile(model, inputs, target="llvm -profile")
prof = profiled.profile(*inputs, number=REPEAT)
print(prof.table(top=8))
with torch.no_grad():
    diff = max_diff(profiled(*inputs), want)
assert diff <= TOL * max(1.0, want.abs().max().item()), diff
assert len(prof.rows) == sum(len(m.kernel_names) for m in profiled.modules.values())
assert 0 < prof.kernels_ms <= prof.forward_ms * 1.05, "the kernels run within the forward"

# ===========================================================================
# Part 7: bfloat16
# ===========================================================================
# model.to(torch.bfloat16) compiles as it is: bfloat16 loads and stores, float32 sums. Where
# the target's features have avx512bf16 (Zen 4, Sapphire Rapids and later; "llvm" is this
# machine), a Linear's weight is packed with pairs of k side by side and its register tile
# runs vdpbf16ps, two multiply-adds per lane and instruction (topi.x86_intrin.dot_bf16_intrin,
# tensorized); elsewhere the float32 tile reads the bfloat16 values. Eager bfloat16 is no
# exact reference, so both are measured against the float32 model.
from schedlang.topi.x86_intrin import bf16_dot_lanes  # noqa: E402

header("The GPT-2 block in bfloat16")
model, inputs, _, want32 = models["gpt2"]
model16 = copy.deepcopy(model).to(torch.bfloat16)
inputs16 = tuple(x.to(torch.bfloat16) if x.is_floating_point() else x for x in inputs)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", schedlang.torch.FallbackWarning)
    compiled16 = schedlang.torch.compile(model16, inputs16)
with torch.no_grad():
    got16, eager16 = compiled16(*inputs16), model16(*inputs16)
scale = want32.abs().max().item()
ours, eager = (max_diff(x.float(), want32) / scale for x in (got16, eager16))
dots = compiled16.ir("target").count("@llvm.x86.avx512bf16.dpbf16ps.512(")
print(f"this CPU has avx512bf16: {bool(bf16_dot_lanes('llvm'))}; vdpbf16ps calls in the LLVM IR: {dots}")
print(f"distance from the float32 model: schedlang {ours:.1e}, eager bfloat16 {eager:.1e}")
assert ours <= 2 * eager + 2 ** -8, (ours, eager)
assert (dots > 0) == bool(bf16_dot_lanes("llvm"))
with torch.no_grad():
    t_eager = best_time(lambda: model16(*inputs16), repeat=REPEAT)
    t_sl = best_time(lambda: compiled16(*inputs16), repeat=REPEAT)
print(f"gpt2 bfloat16: eager {format_seconds(t_eager):>9}   schedlang {format_seconds(t_sl):>9}   "
      f"({t_eager / t_sl:.2f}x)")
