"""Real models from transformers and diffusers (small random configs, eval mode, float32)
compiled whole by schedlang.torch.compile and compared with eager: which ops run in torch,
how many parts, the largest difference, the compile time. Not a speed benchmark: what it
measures is coverage, on code nobody here wrote.

transformers and diffusers are not dependencies of the project; install them beside it
(transformers imports torchvision when it is installed, whose 0.28 wheel breaks next to the
CPU torch; keep it out):

    pip install --target /tmp/hfpkgs transformers diffusers requests && rm -rf /tmp/hfpkgs/numpy*
    PYTHONPATH=/tmp/hfpkgs python benchmarks/hf_models.py [--only gpt2 llama ...] [--dynamo] [--dtype bfloat16]

--dynamo compiles through torch.compile(model, backend="schedlang") instead; --sizes (with
--dynamo) calls it at three input sizes, the second making Dynamo recompile with symbolic sizes
(a size the model itself refuses in eager, such as ViT's other image sizes, is skipped).
Parameters a model starts at one constant (zero biases, unit norm weights) are spread by a
random 0.1 first (random_init.py), so that each reaches the compared output.
--dtype bfloat16 runs the models in bfloat16 (model.to, floating inputs too): eager bfloat16 is
no exact reference there, so both eager's and schedlang's distance from the float32 model are
given (relative to its largest magnitude), and a row is ok when schedlang's is at most twice
eager's plus 2^-8.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402

from random_init import unfold_constant_init  # noqa: E402  (beside this file)

T = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128)
GQA = dict(T, num_key_value_heads=2, vocab_size=100)


def cases():
    """name -> (a function making the model, the input kind)."""
    import transformers as tf
    return {
        "gpt2": (lambda: tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=100)), "ids"),
        "llama": (lambda: tf.LlamaForCausalLM(tf.LlamaConfig(**GQA)), "ids"),
        "mistral": (lambda: tf.MistralModel(tf.MistralConfig(**GQA, sliding_window=8)), "ids"),
        "qwen2": (lambda: tf.Qwen2Model(tf.Qwen2Config(**GQA)), "ids"),
        "gemma": (lambda: tf.GemmaModel(tf.GemmaConfig(**dict(GQA, num_key_value_heads=1), head_dim=16)), "ids"),
        "phi": (lambda: tf.PhiModel(tf.PhiConfig(**T, vocab_size=100)), "ids"),
        "gpt_neox": (lambda: tf.GPTNeoXModel(tf.GPTNeoXConfig(**T, vocab_size=100)), "ids"),
        "opt": (lambda: tf.OPTModel(tf.OPTConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                                 ffn_dim=128, vocab_size=100, word_embed_proj_dim=64)), "ids"),
        "bloom": (lambda: tf.BloomModel(tf.BloomConfig(n_layer=2, hidden_size=64, n_head=4, vocab_size=100)), "ids"),
        "falcon": (lambda: tf.FalconModel(tf.FalconConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                                          vocab_size=100)), "ids"),
        "mamba": (lambda: tf.MambaModel(tf.MambaConfig(num_hidden_layers=2, hidden_size=32, state_size=8,
                                                       vocab_size=100, use_mambapy=False)), "ids"),
        # mixtures of experts: grouped expert products (ops/grouped_mm.py), histc, scatter
        "mixtral": (lambda: tf.MixtralModel(tf.MixtralConfig(**GQA, num_local_experts=4, num_experts_per_tok=2)), "ids"),
        "qwen2_moe": (lambda: tf.Qwen2MoeModel(tf.Qwen2MoeConfig(**GQA, num_experts=4, num_experts_per_tok=2,
                                                                 moe_intermediate_size=64,
                                                                 shared_expert_intermediate_size=64)), "ids"),
        "qwen3_moe": (lambda: tf.Qwen3MoeModel(tf.Qwen3MoeConfig(**GQA, num_experts=4, num_experts_per_tok=2,
                                                                 moe_intermediate_size=64)), "ids"),
        "olmoe": (lambda: tf.OlmoeModel(tf.OlmoeConfig(**GQA, num_experts=4, num_experts_per_tok=2)), "ids"),
        "gpt_oss": (lambda: tf.GptOssModel(tf.GptOssConfig(**dict(GQA, num_key_value_heads=2), num_local_experts=4,
                                                           num_experts_per_tok=2, head_dim=16)), "ids"),
        "phimoe": (lambda: tf.PhimoeModel(tf.PhimoeConfig(**GQA, num_local_experts=4, num_experts_per_tok=2)), "ids"),
        # MoE and a complex rotary embedding (complex_pairs.py)
        "llama4": (lambda: tf.Llama4TextModel(tf.Llama4TextConfig(**GQA, num_local_experts=4, num_experts_per_tok=1,
                                                                  intermediate_size_mlp=128, head_dim=16)), "ids"),
        "bert": (lambda: tf.BertModel(tf.BertConfig(**T, vocab_size=100)), "ids"),
        "roberta": (lambda: tf.RobertaModel(tf.RobertaConfig(**T, vocab_size=100)), "ids"),
        "albert": (lambda: tf.AlbertModel(tf.AlbertConfig(**T, embedding_size=32, vocab_size=100)), "ids"),
        "distilbert": (lambda: tf.DistilBertModel(tf.DistilBertConfig(n_layers=2, dim=64, n_heads=4, hidden_dim=128,
                                                                      vocab_size=100)), "ids"),
        "deberta_v2": (lambda: tf.DebertaV2Model(tf.DebertaV2Config(**T, vocab_size=100)), "ids"),
        "convbert": (lambda: tf.ConvBertModel(tf.ConvBertConfig(**T, vocab_size=100, embedding_size=64)), "ids"),
        "electra": (lambda: tf.ElectraModel(tf.ElectraConfig(**T, vocab_size=100, embedding_size=32)), "ids"),
        "mpnet": (lambda: tf.MPNetModel(tf.MPNetConfig(**T, vocab_size=100)), "ids"),
        "t5": (lambda: tf.T5Model(tf.T5Config(num_layers=2, d_model=64, d_kv=16, num_heads=4, d_ff=128,
                                              vocab_size=100, decoder_start_token_id=0)), "t5"),
        "bart_encoder": (lambda: tf.BartModel(tf.BartConfig(encoder_layers=1, decoder_layers=1, d_model=64,
                                                            encoder_attention_heads=4, decoder_attention_heads=4,
                                                            encoder_ffn_dim=128, decoder_ffn_dim=128,
                                                            vocab_size=100)).encoder, "ids"),
        "clip_text": (lambda: tf.CLIPTextModel(tf.CLIPTextConfig(**T, vocab_size=100)), "ids"),
        "clip_vision": (lambda: tf.CLIPVisionModel(tf.CLIPVisionConfig(**T, image_size=32, patch_size=8)), "img"),
        "vit": (lambda: tf.ViTModel(tf.ViTConfig(**T, image_size=32, patch_size=8)), "img"),
        "deit": (lambda: tf.DeiTModel(tf.DeiTConfig(**T, image_size=32, patch_size=8)), "img"),
        "beit": (lambda: tf.BeitModel(tf.BeitConfig(**T, image_size=32, patch_size=8,
                                                    use_relative_position_bias=True)), "img"),
        "dinov2": (lambda: tf.Dinov2Model(tf.Dinov2Config(**T, image_size=32, patch_size=8)), "img48"),
        "swin": (lambda: tf.SwinModel(tf.SwinConfig(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1],
                                                    num_heads=[2, 2], window_size=4)), "img"),
        "segformer": (lambda: tf.SegformerModel(tf.SegformerConfig(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                                                                   hidden_sizes=[16, 32], num_attention_heads=[1, 2],
                                                                   patch_sizes=[7, 3], strides=[4, 2],
                                                                   mlp_ratios=[2, 2])), "img"),
        "mobilevit": (lambda: tf.MobileViTModel(tf.MobileViTConfig(image_size=32, hidden_sizes=[16, 24, 32],
                                                                   neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64])), "img"),
        "convnext": (lambda: tf.ConvNextModel(tf.ConvNextConfig(depths=[1, 1], hidden_sizes=[16, 32], num_stages=2)),
                     "img"),
        "convnextv2": (lambda: tf.ConvNextV2Model(tf.ConvNextV2Config(depths=[1, 1], hidden_sizes=[16, 32],
                                                                      num_stages=2)), "img"),
        "resnet": (lambda: tf.ResNetModel(tf.ResNetConfig(depths=[1, 1], hidden_sizes=[16, 32], embedding_size=16)),
                   "img"),
        "regnet": (lambda: tf.RegNetModel(tf.RegNetConfig(depths=[1, 1], hidden_sizes=[16, 32], embedding_size=16,
                                                          groups_width=8)), "img"),
        "mobilenet_v2": (lambda: tf.MobileNetV2Model(tf.MobileNetV2Config(image_size=32, depth_multiplier=0.25)), "img"),
        "poolformer": (lambda: tf.PoolFormerModel(tf.PoolFormerConfig(depths=[1, 1], hidden_sizes=[16, 32],
                                                                      num_encoder_blocks=2, patch_sizes=[7, 3],
                                                                      strides=[4, 2], padding=[2, 1])), "img"),
        "wav2vec2": (lambda: tf.Wav2Vec2Model(tf.Wav2Vec2Config(**T, conv_dim=(16, 16), conv_stride=(5, 2),
                                                                conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                                                                num_conv_pos_embedding_groups=4)), "wav"),
        "whisper_encoder": (lambda: tf.WhisperModel(tf.WhisperConfig(
            encoder_layers=1, decoder_layers=1, d_model=64, encoder_attention_heads=4, decoder_attention_heads=4,
            encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=16, max_source_positions=20, vocab_size=100,
            pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)).encoder, "mel"),
        "sd_unet": (_sd_unet, "unet"),
        "sd_vae_decoder": (_vae_decoder, "latent"),
    }


def _sd_unet():
    from diffusers import UNet2DConditionModel
    return UNet2DConditionModel(sample_size=16, in_channels=4, out_channels=4, layers_per_block=1,
                                block_out_channels=(32, 64), down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32,
                                attention_head_dim=8, norm_num_groups=8)


class _Decode(torch.nn.Module):
    def __init__(self, vae):
        super().__init__()
        self.vae = vae

    def forward(self, z):
        return self.vae.decode(z).sample


def _vae_decoder():
    from diffusers import AutoencoderKL
    return _Decode(AutoencoderKL(block_out_channels=(16, 32), down_block_types=("DownEncoderBlock2D",) * 2,
                                 up_block_types=("UpDecoderBlock2D",) * 2, latent_channels=4, norm_num_groups=8,
                                 sample_size=16))


class Main(torch.nn.Module):
    """The model called on its example inputs; its main output tensor."""

    def __init__(self, model, kind: str):
        super().__init__()
        self.model, self.kind = model, kind

    def forward(self, *xs):
        if self.kind == "t5":
            out = self.model(xs[0], decoder_input_ids=xs[0][:, :5])
        elif self.kind == "unet":
            out = self.model(xs[0], xs[1], encoder_hidden_states=xs[2])
        else:
            out = self.model(xs[0])
        if isinstance(out, torch.Tensor):
            return out
        if isinstance(out, tuple):
            return out[0]
        for field in ("sample", "logits", "last_hidden_state"):
            if getattr(out, field, None) is not None:
                return getattr(out, field)
        raise TypeError(f"no output tensor in {type(out).__name__}")


def inputs_of(kind: str):
    return {"ids": (torch.randint(3, 100, (1, 12)),), "t5": (torch.randint(3, 100, (1, 12)),),
            "img": (torch.randn(1, 3, 32, 32),), "img48": (torch.randn(1, 3, 48, 48),), "mel": (torch.randn(1, 16, 40),),
            "wav": (torch.randn(1, 400),), "latent": (torch.randn(1, 4, 8, 8),),
            "unet": (torch.randn(1, 4, 16, 16), torch.tensor([10]), torch.randn(1, 5, 32))}[kind]


def in_dtype(model, xs, dtype: str):
    """(model, inputs) in dtype ("float32": as they are): the module converted in place and the
    floating inputs (token ids stay integers)."""
    if dtype == "float32":
        return model, xs
    dt = getattr(torch, dtype)
    return model.to(dt), tuple(x.to(dt) if x.is_floating_point() else x for x in xs)


def relative(got, want) -> float:
    """max |got - want| over max |want|, in float32."""
    return float((got.float() - want.float()).abs().max()) / max(float(want.float().abs().max()), 1e-6)


def check(name: str, make, kind: str, dynamo: bool, dtype: str = "float32") -> str:
    import schedlang.torch as st
    torch.manual_seed(0)
    model = Main(make().eval(), kind).eval()
    with torch.no_grad():
        unfold_constant_init(model)    # zero biases, unit norm weights: spread, so each is checked
    xs = inputs_of(kind)
    want32 = None
    if dtype != "float32":
        with torch.no_grad():
            want32 = model(*xs).float()
        model, xs = in_dtype(model, xs, dtype)
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        if dynamo:
            import schedlang.torch.dynamo  # noqa: F401  (registers the backend)
            torch._dynamo.reset()          # else every model is a recompile of Main.forward: past
            before = compiled_graphs()     # the limit (8), Dynamo runs the model eagerly
            got = torch.compile(model, backend="schedlang")(*xs)
        else:
            compiled = st.compile(model, xs)
            got = compiled(*xs)
        seconds = time.perf_counter() - start
        want = model(*xs)
    err = (got.float() - want.float()).abs().max().item()
    fell = sorted({str(w.message).split(": ", 1)[-1][:80] for w in caught if type(w.message).__name__ == "FallbackWarning"})
    if dynamo and compiled_graphs() == before:
        return f"{name:16s} NOT COMPILED (Dynamo ran the model eagerly)"
    parts = "" if dynamo else f" parts={len(compiled.program.parts)}"
    if want32 is not None:
        ours, eager = relative(got, want32), relative(want, want32)
        verdict = "ok" if ours <= 2 * eager + 2 ** -8 else "MISMATCH"
        return (f"{name:16s} {verdict:8s} from float32: eager {eager:.1e} schedlang {ours:.1e}{parts} "
                f"in torch: {fell or 'none'}  ({seconds:.1f} s)")
    verdict = "ok" if err <= 1e-3 * max(1.0, want.abs().max().item()) else "MISMATCH"
    return f"{name:16s} {verdict:8s} max|diff|={err:.1e}{parts} in torch: {fell or 'none'}  ({seconds:.1f} s)"


def resized(kind: str, k: int):
    """Inputs of kind at its k-th of three sizes (k = 0 is inputs_of's)."""
    if kind in ("ids", "t5"):
        return (torch.randint(3, 100, (1, (12, 9, 7)[k])),)
    if kind in ("img", "img48"):
        r = {"img": (32, 40, 48), "img48": (48, 64, 56)}[kind][k]
        return (torch.randn(1, 3, r, r),)
    if kind == "mel":
        return (torch.randn(1, 16, (40, 48, 44)[k]),)
    if kind == "wav":
        return (torch.randn(1, (400, 480, 560)[k]),)
    if kind == "latent":
        return (torch.randn(1, 4, (8, 12, 16)[k], (8, 12, 16)[k]),)
    r = (16, 24, 32)[k]
    return (torch.randn(1, 4, r, r), torch.tensor([10]), torch.randn(1, (5, 7, 9)[k], 32))


def compiled_graphs() -> int:
    """Graphs Dynamo has compiled in this process (not reset by torch._dynamo.reset)."""
    return torch._dynamo.utils.counters["stats"]["unique_graphs"]


def check_sizes(name: str, make, kind: str) -> str:
    """torch.compile(backend="schedlang") called at three sizes: each result against eager."""
    import schedlang.torch.dynamo  # noqa: F401  (registers the backend)
    torch._dynamo.reset()              # one model's graphs do not count against the next's recompile limit
    before = compiled_graphs()
    torch.manual_seed(0)
    model = Main(make().eval(), kind).eval()
    with torch.no_grad():
        unfold_constant_init(model)
    fn = torch.compile(model, backend="schedlang")
    verdicts = []
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in range(3):
            xs = resized(kind, k)
            try:
                want = model(*xs)
            except Exception:             # the model refuses this size in eager
                verdicts.append("(eager refuses)")
                continue
            err = (fn(*xs) - want).abs().max().item()
            verdicts.append(f"{err:.0e}" if err <= 1e-3 * max(1.0, want.abs().max().item()) else f"MISMATCH {err:.1e}")
    fell = sorted({str(w.message).split(": ", 1)[-1][:80] for w in caught if type(w.message).__name__ == "FallbackWarning"})
    graphs = compiled_graphs() - before
    return f"{name:16s} {' | '.join(f'{v:15s}' for v in verdicts)} in torch: {fell or 'none'}  ({graphs} graphs)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", default=None)
    ap.add_argument("--dynamo", action="store_true")
    ap.add_argument("--sizes", action="store_true", help="with --dynamo: call each model at three input sizes")
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"),
                    help="the models' weights and floating inputs (not with --sizes)")
    args = ap.parse_args()
    if args.sizes and args.dtype != "float32":
        ap.error("--sizes checks float32 models")
    if args.sizes and not args.dynamo:
        ap.error("--sizes goes with --dynamo (schedlang.torch.compile takes dynamic_shapes instead)")
    import transformers
    print(f"torch {torch.__version__}, transformers {transformers.__version__}; "
          f"{'torch.compile(backend=schedlang)' if args.dynamo else 'schedlang.torch.compile'}; {args.dtype}")
    for name, (make, kind) in cases().items():
        if args.only and name not in args.only:
            continue
        try:
            row = check_sizes(name, make, kind) if args.sizes else check(name, make, kind, args.dynamo, args.dtype)
            print(row, flush=True)
        except Exception as err:            # a model that does not compile: reported, the rest still run
            print(f"{name:16s} ERROR    {type(err).__name__}: {str(err)[:200]}", flush=True)


if __name__ == "__main__":
    main()
