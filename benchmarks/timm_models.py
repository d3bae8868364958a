"""timm's image models (random weights, eval mode, float32, batch 1 at each model's own input
size) compiled whole and compared with eager: which ops run in torch, the largest relative
difference, the compile time. Not a speed benchmark: it measures coverage on code nobody here
wrote, one model per process (a crash or a hang costs one row).

timm is not a dependency of the project; install it beside it, without its dependencies
(torchvision's 0.28 wheel breaks next to the CPU torch):

    pip install --target /tmp/timmpkgs timm --no-deps
    PYTHONPATH=/tmp/timmpkgs:/tmp/hfpkgs python benchmarks/timm_models.py [--dynamo] [--only NAME ...]

(huggingface_hub and safetensors, which timm imports, come with the transformers install of
hf_models.py.) timm imports a few torchvision names at import time (FrozenBatchNorm2d,
transforms, InterpolationMode); when torchvision does not import, this script puts a stub of
those names first on the path of each model's process (made in a temporary folder; the models
themselves never call torchvision). The default list: timm's own test models (test_*), then the
smallest model of each of timm's model families (by parameter count, up to 60 M).
--dynamo compiles through torch.compile(model, backend="schedlang") under no_grad instead;
--batches (with --dynamo) calls it at batch 3, then 2 (Dynamo recompiles with a symbolic batch);
--sizes (with --dynamo) calls it again 32 pixels larger each way, where eager accepts that size.
--speed also times eager, Inductor (freezing, as models.py) and the compiled model, side by side.
--dtype bfloat16 runs the model and its input in bfloat16 and checks the compiled model as close
to the float32 model as eager bfloat16 is (at most twice eager's largest difference, plus 2^-8,
relative to the largest logit: roundings between kernels make eager's values no exact reference).
Parameters timm starts at one constant (zero gammas closing residual branches, layer scales of
1e-5) are spread by a random 0.1 first, so that every branch reaches the logits
(unfold_constant_init; --plain-init keeps timm's).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# timm's test models, then the smallest model of each family (timm 1.0.31, Zen 4 session 42).
DEFAULT = """test_byobnet test_coatnet test_convnext test_convnext2 test_convnext3 test_efficientnet
test_efficientnet_evos test_efficientnet_gn test_efficientnet_ln test_mambaout test_maxvit test_nfnet test_resnet
test_vit test_vit2 test_vit3 test_vit4 test_vit_relpos starnet_s050 dla46x_c mobilevit_xxs edgenext_xx_small lcnet_035
ese_vovnet19b_slim_dw repghostnet_050 efficientvit_m0 ghostnet_050 regnetx_002 cspnext_tiny iformer_t
xcit_nano_12_p8_224 cs3darknet_focus_s efficientvit_b0 swiftformer_xs efficientformerv2_s0 pvt_v2_b0
convnext_atto_rms fasternet_t0 lcnetv2_small inception_next_atto rexnet_100 pit_ti_224 hardcorenas_b efficientnet_b0
repvit_m1 coat_tiny eva02_tiny_patch14_224 convit_tiny deit_tiny_patch16_224 gmlp_ti16_224 hgnetv2_b0 shvit_s1
vit_tiny_r_s16_p8_224 cpubone_nano efficientvim_m1 mambaout_femto levit_128s densenet121 halonet_h1 gernet_s
crossvit_9_240 nf_regnet_b0 dpn48b fastvit_s12 visformer_tiny resnest14d csatv2 resnetv2_18 legacy_seresnet18
poolformer_s12 cait_xxs24_224 skresnet18 gcvit_xxtiny tiny_vit_5m_224 hrnet_w18_small vit_dwee_patch16_reg1_gap_256
lowformer_b0 ecaresnext26t_32x4d nest_tiny convmixer_768_32 vit_srelpos_small_patch16_224 vitamin_small_224
legacy_xception tnt_s_legacy_patch16_224 inception_v3 rdnet_tiny twins_svt_small mvitv2_tiny res2next50
coatnet_0_224 volo_d1_224 sam2_hiera_tiny xception41p sequencer2d_s hiera_tiny_224 swin_tiny_patch4_window7_224
swinv2_cr_tiny_224 swinv2_tiny_window8_256 davit_tiny focalnet_tiny_srf selecsls42 nextvit_small inception_v4
inception_resnet_v2""".split()

_STUB = '''from torchvision._stub import make
def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return make(name)
'''
_STUB_BASE = '''class _Meta(type):
    def __getattr__(cls, name):
        return name.lower()
def make(name):
    return _Meta(name, (), {"__init__": lambda self, *a, **k: None})
'''
_FROZEN_BN = '''
import torch
class FrozenBatchNorm2d(torch.nn.Module):
    def __init__(self, n, eps=1e-5):
        super().__init__()
        for k in ("weight", "bias", "running_mean", "running_var"):
            self.register_buffer(k, torch.ones(n) if k in ("weight", "running_var") else torch.zeros(n))
        self.eps = eps
    def forward(self, x):
        scale = self.weight * (self.running_var + self.eps).rsqrt()
        shift = self.bias - self.running_mean * scale
        return x * scale[None, :, None, None] + shift[None, :, None, None]
'''


def torchvision_stub() -> str:
    """A folder holding a stand-in torchvision package with the names timm imports."""
    root = tempfile.mkdtemp(prefix="tvstub-")
    for sub in ("", "transforms", "ops", "datasets", "models"):
        os.makedirs(os.path.join(root, "torchvision", sub), exist_ok=True)
    with open(os.path.join(root, "torchvision", "_stub.py"), "w") as f:
        f.write(_STUB_BASE)
    for path in ("__init__.py", "transforms/__init__.py", "transforms/functional.py", "ops/__init__.py",
                 "datasets/__init__.py", "models/__init__.py", "models/feature_extraction.py"):
        with open(os.path.join(root, "torchvision", path), "w") as f:
            f.write(_STUB)
    with open(os.path.join(root, "torchvision", "ops", "misc.py"), "w") as f:
        f.write(_STUB + _FROZEN_BN)
    return root


def run_one(name: str, dynamo: bool, batches: bool, sizes: bool = False, speed: bool = False,
            plain_init: bool = False, dtype: str = "float32") -> str:
    """Compile one model in this process; the result's line."""
    import torch
    import timm

    import schedlang.torch as st
    import schedlang.torch.dynamo  # noqa: F401  (registers the backend)
    torch.manual_seed(0)
    warnings.simplefilter("ignore")
    model = timm.create_model(name, pretrained=False, num_classes=10).eval()
    size = model.pretrained_cfg.get("input_size", (3, 224, 224))
    x = torch.randn(1, *size)
    with torch.no_grad():
        if not float(model(x).abs().max()) > 0 and hasattr(model, "reset_classifier"):
            model.reset_classifier(10)    # timm starts some heads at zero: logits that check nothing
            model.eval()
        if not plain_init:
            from random_init import unfold_constant_init
            unfold_constant_init(model)
    model, x = model.to(getattr(torch, dtype)), x.to(getattr(torch, dtype))
    check = _checker(model)
    try:
        with warnings.catch_warnings(record=True) as caught, torch.no_grad():
            warnings.simplefilter("always")
            start = time.perf_counter()
            compiled = torch.compile(model, backend="schedlang") if dynamo else st.compile(model, (x,))
            if dynamo and batches:
                x3 = torch.randn(3, *size, dtype=x.dtype)
                check(compiled(x3), x3, "batch 3")
                x = torch.randn(2, *size, dtype=x.dtype)
            got = compiled(x)
            seconds = time.perf_counter() - start
            rel = check(got, x, "")
            if dynamo and sizes:                 # a second image size: Dynamo recompiles symbolically
                bigger = torch.randn(1, size[0], size[1] + 32, size[2] + 32, dtype=x.dtype)
                try:
                    want = model(bigger)
                except Exception:                # the model takes its own size only
                    want = None
                if want is not None:
                    check(compiled(bigger), bigger, f"{size[1] + 32}x{size[2] + 32}")
        fallbacks = sorted({str(w.message).split(": ", 1)[-1][:120] for w in caught
                            if type(w.message).__name__ == "FallbackWarning"})
        times = _speeds(model, compiled, x, check) if speed else ""
        left = "in torch: " + "; ".join(fallbacks) if fallbacks else ""
        return f"ok  rel {rel:.1e}  {seconds:5.1f} s  {times}{left}"
    except Exception as e:      # the row says what failed; the sweep goes on
        return f"FAILED {type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:240]}"


def _speeds(model, compiled, x, check) -> str:
    """Latency (ms, median of interleaved rounds, harness.measure) of eager, Inductor (with
    freezing, as models.py runs it) and the compiled model, at torch's thread count."""
    import torch
    import harness
    from models import inductor
    with torch.no_grad():
        fast, _ = inductor(model, (x,))
        check(fast(), x, "Inductor")
        times = harness.measure([lambda: model(x), fast, lambda: compiled(x)], harness.Timing(repeat=5))
    eager_ms, inductor_ms, ours_ms = (1e3 * median for _, median in times)
    return (f"eager {eager_ms:7.2f}  inductor {inductor_ms:7.2f}  schedlang {ours_ms:7.2f} ms "
            f"({ours_ms / inductor_ms:4.2f}x Inductor)  ")


def _check(got, want, what: str) -> float:
    rel = float((got - want).abs().max()) / max(float(want.abs().max()), 1e-6)
    if rel > 1e-3:
        raise AssertionError(f"{what} differs from eager: max relative difference {rel:.1e}")
    return rel


def _checker(model):
    """check(got, x, what): got, a compiled model's result for x, against model's (_check); for a
    model in bfloat16 or float16, its largest difference from the model in float32 (the same
    rounded weights), relative to that result's largest value, at most twice eager's plus 2^-8
    (roundings between kernels make eager's values no exact reference). Returns the difference."""
    import copy
    import torch
    dtype = next(model.parameters()).dtype
    if dtype == torch.float32:
        return lambda got, x, what: _check(got, model(x), what)
    exact = copy.deepcopy(model).float()

    def check(got, x, what: str) -> float:
        want = exact(x.float())
        scale = max(float(want.abs().max()), 1e-6)
        ours, eager = (float((y.float() - want).abs().max()) / scale for y in (got, model(x)))
        if ours > 2 * eager + 2 ** -8:
            raise AssertionError(f"{what} is {ours:.1e} from the float32 model, eager {dtype} {eager:.1e}")
        return ours
    return check


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="+", default=None)
    ap.add_argument("--dynamo", action="store_true")
    ap.add_argument("--batches", action="store_true")
    ap.add_argument("--sizes", action="store_true", help="with --dynamo: also a second image size (+32), "
                    "where the model takes one")
    ap.add_argument("--speed", action="store_true", help="also time eager, Inductor and schedlang "
                    "(batch 1, torch's thread count; Inductor compiles each model too)")
    ap.add_argument("--plain-init", action="store_true", help="keep timm's constant initialisations "
                    "(zero gammas of residual branches: see unfold_constant_init)")
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per model")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        sys.path.insert(0, HERE)
        print("RESULT", run_one(args.one, args.dynamo, args.batches, args.sizes, args.speed, args.plain_init,
                                args.dtype), flush=True)
        return
    env = dict(os.environ)
    try:
        import torchvision  # noqa: F401
    except Exception:
        env["PYTHONPATH"] = os.pathsep.join([torchvision_stub(), ROOT, env.get("PYTHONPATH", "")])
    sys.path.insert(0, HERE)
    import harness
    import schedlang as sl
    print(f"timm models in {args.dtype} through {'torch.compile' if args.dynamo else 'schedlang.torch.compile'}"
          f"{' at batch 3 then 2' if args.batches else ''}{' and 32 pixels larger' if args.sizes else ''}; "
          f"{harness.cpu_model()} "
          f"({harness.vector_isa(sl.Target.create('llvm'))}), {harness.core_count()} cores", flush=True)
    failed = 0
    for name in args.only or DEFAULT:
        cmd = [sys.executable, os.path.abspath(__file__), "--one", name] + (["--dynamo"] if args.dynamo else []) \
            + (["--batches"] if args.batches else []) + (["--sizes"] if args.sizes else []) \
            + (["--speed"] if args.speed else []) + (["--plain-init"] if args.plain_init else []) \
            + ["--dtype", args.dtype]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
            lines = [line[7:] for line in r.stdout.splitlines() if line.startswith("RESULT ")]
            row = lines[-1] if lines else f"CRASHED (exit {r.returncode}): {r.stderr.strip()[-240:]}"
        except subprocess.TimeoutExpired:
            row = f"TIMED OUT after {args.timeout:.0f} s"
        failed += not row.startswith("ok")
        print(f"{name:34s} {row}", flush=True)
    print(f"{failed} of {len(args.only or DEFAULT)} failed")


if __name__ == "__main__":
    main()
