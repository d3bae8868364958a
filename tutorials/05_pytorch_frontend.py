"""
Tutorial 5: a PyTorch module, level by level
============================================

Tutorials 1 to 4 wrote programs in schedlang's own language. This one starts from an
ordinary `torch.nn.Module` and lets schedlang do everything: capture it with
torch.export, decompose it into Tensor IR, fuse, pick a default schedule for the target
and compile it. Nothing here is schedlang-specific except the call to compile:

    compiled = schedlang.torch.compile(module, (x,))        # target="llvm" | "cuda"
    y = compiled(x)                                         # like module(x)

Part 1 reads the six levels of SiluAndMul, the example of the design document, in the
order `schedlang compile --ir` prints them, and says what to look for in each.
Part 2 runs that command line. Part 3 compiles a module with parameters (a SwiGLU MLP),
directly and through `torch.compile(backend="schedlang")`. Part 4 times SiluAndMul against
eager PyTorch. Every result is checked against eager PyTorch.

Run it with  `python tutorials/05_pytorch_frontend.py`  (`--quick`: smaller shapes for the
timing part, two repeats; what CI runs). The same levels, for any module in a file:

    schedlang compile --ir examples/silu_and_mul.py --shape 1,32,4096   # or python -m schedlang
"""

import os
import warnings

import torch

import schedlang.torch
from schedlang.torch.zoo import SiluAndMul, SwiGLUMLP
from _common import best_time, format_seconds, header, parse_args, timing_note  # noqa: E402 (the tutorials' shared helpers)

args = parse_args(__doc__)
TOKENS = 256 if args.quick else 4096      # the timing part: x[1, TOKENS, 4096]
REPEAT = 2 if args.quick else 10
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ===========================================================================
# Part 1: SiluAndMul, the six levels
# ===========================================================================
# The gated activation of LLaMA-style MLPs: split the last dimension in two halves,
# silu(left) * right. In PyTorch eager this is three kernels (the chunk is a view,
# silu writes a temporary, mul reads it back); we want one pass over x.

# It is an ordinary nn.Module; schedlang.torch.zoo has it, so the examples, tests and
# benchmarks all compile the same one:
#
#     class SiluAndMul(nn.Module):
#         def forward(self, x):
#             left, right = x.chunk(2, dim=-1)
#             return F.silu(left) * right

model = SiluAndMul()
x = torch.randn(1, 32, 4096)
compiled = schedlang.torch.compile(model, (x,))          # the host CPU; target="cuda" for CUDA C
torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-6)

# Torch IR: what torch.export captured, decomposed to core ATen, one line per op with its
# result's shape and dtype. chunk(2, -1) has been resolved statically into two slices;
# silu and mul are still framework-level operators. Nothing says yet whether a slice
# copies, or how anything is computed.
header("Torch IR: the captured ops (schedlang compile --ir ... --level torch)")
torch_ir = compiled.ir("torch")
print(torch_ir)
assert "slice(x, dim=2, start=2048)" in torch_ir and "silu(chunk_0)" in torch_ir

# Tensor IR: every op decomposed into three kinds of stage. The slices are IndexMaps:
# chunk_1 reads x at k + 2048, a coordinate map, not a copy. silu became the Elementwise
# chain negative, exp, add, reciprocal, multiply (silu(v) = v / (1 + exp(-v))). From here
# on, a PyTorch module and a program written with sl.compute are the same thing.
header("Tensor IR: IndexMap and Elementwise stages (--level tensor)")
tensor_ir = compiled.ir("tensor")
print(tensor_ir)
assert "chunk_1[i, j, k] = x[i, j, k + 2048]" in tensor_ir and "# IndexMap" in tensor_ir

# Loop IR: the stages as loop nests. All of them are injective (each output element needs
# one element of each input), so they were fused into their consumer: one loop nest
# whose body reads x twice (both halves) and writes mul once. No intermediate buffer is
# left -- 8 bytes read and 4 written per output element, the least possible.
header("Loop IR: one fused loop nest, no temporaries (--level loop)")
loop_ir = compiled.ir("loop")
print(loop_ir)
assert loop_ir.count("func ") == 1, "SiluAndMul should fuse into one loop nest"

# Tile IR: the default schedule applied (schedlang/torch/schedules.py picks it from the
# stage's kind, its shape and the target). For a pointwise stage on the CPU: rows spread
# over the cores (`parallel`), each row split so that the inner loop is a vector as wide
# as the CPU's registers (`vectorized`). On CUDA the same stage is bound to blockIdx.x and
# threadIdx.x instead. This is the level to read when the speed is not what you expect.
header("Tile IR: the default schedule applied (--level tile)")
print(compiled.ir("tile"))

# Kernel IR: kernels with their launch geometry (on the CPU, `workers(...)` is the
# parallel loop), flat buffers with memory scopes, and vectors: `ramp(base, 1, n)` is n
# consecutive elements, so the two loads of x and the store of mul are whole-vector
# accesses.
header("Kernel IR: one kernel (--level kernel)")
kernel_ir = compiled.ir("kernel")
print(kernel_ir)
assert kernel_ir.count("launch ") == 1, "one fused kernel"

# Target code: the LLVM IR schedlang hands to LLVM (the vector exp is schedlang's own
# polynomial, defined first); with target="cuda" this level is CUDA C, compiled by NVRTC,
# no GPU needed. We print the kernel's definition line and count the rest.
header("Target code: LLVM IR (--level target)")
llvm_ir = compiled.ir("target").splitlines()
print("\n".join(line for line in llvm_ir if line.startswith("define")))
print(f"... {len(llvm_ir)} lines of LLVM IR in all")

# ===========================================================================
# Part 2: the command line
# ===========================================================================
# `schedlang compile --ir FILE` does Part 1 for the nn.Module in a file: it makes random
# inputs of the --shape given (one per forward() argument), compiles, prints the levels
# chosen with --level (default: all six), and runs the compiled module once against eager
# PyTorch, printing the largest difference. Here it runs in this process through the
# same function the `schedlang` script calls.
header("schedlang compile --level torch examples/silu_and_mul.py --shape 1,8,64")
from schedlang import cli  # noqa: E402

example = os.path.relpath(os.path.join(ROOT, "examples", "silu_and_mul.py"))
status = cli.main(["compile", example, "--level", "torch", "--shape", "1,8,64"])
assert status == 0, "the compiled module should match eager PyTorch"

# ===========================================================================
# Part 3: a module with parameters, and torch.compile
# ===========================================================================
# A SwiGLU MLP: three Linears without bias. Parameters become named inputs of the Torch IR
# (`gate_weight`, with a comment saying which parameter it is), taken from the module
# when it is compiled. `compiled_mlp.ir("kernel")` shows how the three matmuls and the
# elementwise ops between them were grouped into kernels. An op that schedlang cannot
# lower runs in torch instead, with one warning naming it: never a wrong result.

# The model zoo's SwiGLUMLP is
#
#     class SwiGLUMLP(nn.Module):
#         def __init__(self, hidden=256, intermediate=688):
#             super().__init__()
#             self.gate = nn.Linear(hidden, intermediate, bias=False)
#             self.up = nn.Linear(hidden, intermediate, bias=False)
#             self.down = nn.Linear(intermediate, hidden, bias=False)
#
#         def forward(self, x):
#             return self.down(F.silu(self.gate(x)) * self.up(x))

torch.manual_seed(0)
mlp = SwiGLUMLP(64, 172).eval()
tokens = torch.randn(16, 64)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", schedlang.torch.FallbackWarning)
    compiled_mlp = schedlang.torch.compile(mlp, (tokens,))
for w in caught:
    print(f"(warning: {w.message})")
header("SwiGLU MLP, Torch IR: parameters are named inputs")
print(compiled_mlp.ir("torch"))
with torch.no_grad():
    want = mlp(tokens)
torch.testing.assert_close(compiled_mlp(tokens), want, rtol=1e-4, atol=1e-5)
print("\nschedlang.torch.compile(mlp) matches eager PyTorch")

# The same module behind torch.compile: Dynamo captures the Python, AOT autograd turns it
# into an ATen graph with the parameters as inputs, and schedlang compiles that graph.
# backend="schedlang" is found through the package's entry point once schedlang is
# installed (pip install -e .); importing schedlang.torch.dynamo registers it as well.
import schedlang.torch.dynamo  # noqa: E402,F401

with torch.no_grad(), warnings.catch_warnings():
    warnings.simplefilter("ignore", schedlang.torch.FallbackWarning)
    dynamo_mlp = torch.compile(mlp, backend="schedlang", dynamic=False)
    torch.testing.assert_close(dynamo_mlp(tokens), want, rtol=1e-4, atol=1e-5)
print('torch.compile(mlp, backend="schedlang") matches eager PyTorch')

# ===========================================================================
# Part 4: timing
# ===========================================================================
header(f"Timing SiluAndMul x[1, {TOKENS}, 4096] (torch uses {torch.get_num_threads()} threads)")
timing_note(args.quick)
x = torch.randn(1, TOKENS, 4096)
compiled = schedlang.torch.compile(model, (x,))
torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-6)
nbytes = x.numel() * 4 + x.numel() // 2 * 4        # read x once, write the output once
t_sl = best_time(lambda: compiled(x), repeat=REPEAT)
t_torch = best_time(lambda: model(x), repeat=REPEAT)
# Both allocate their output on every call, as a module call does.
print(f"schedlang {format_seconds(t_sl):>9} ({nbytes / t_sl / 1e9:5.1f} GB/s)   "
      f"torch eager {format_seconds(t_torch):>9} ({nbytes / t_torch / 1e9:5.1f} GB/s)")
