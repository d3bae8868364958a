"""transformers models at their real widths (each config's published base size, random weights,
eval mode, float32 or --dtype bfloat16, batch 1), timed side by side: eager, Inductor (freezing,
as models.py runs it) and schedlang.torch.compile, at torch's thread count; one model per process. Where
hf_models.py checks coverage on tiny configs, this finds the speed cliffs of architectures the
default schedules were not tuned on (relative position biases, disentangled attention, long
audio sequences, 1-d convolutions).

    pip install --target /tmp/hfpkgs transformers diffusers requests && rm -rf /tmp/hfpkgs/numpy*
    PYTHONPATH=/tmp/hfpkgs python benchmarks/hf_speed.py [--only t5 whisper ...] [--dtype bfloat16]

Each row: the largest difference from eager relative to the output's largest magnitude (in
bfloat16 also both eager's and schedlang's difference from the float32 model: how far each is
from the exact sums), the compile time (first call included), what ran in torch, and the three
latencies (median of interleaved rounds, harness.measure).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for path in (HERE, ROOT):
    if path not in sys.path:
        sys.path.insert(0, path)

TOKENS = 128


def cases():
    """name -> (a function making the model, the input kind)."""
    import transformers as tf
    return {
        "gpt2": (lambda: tf.GPT2Model(tf.GPT2Config()), "ids"),                         # GPT-2 small
        "bert": (lambda: tf.BertModel(tf.BertConfig()), "ids"),                         # bert-base
        "distilbert": (lambda: tf.DistilBertModel(tf.DistilBertConfig()), "ids"),
        "roberta": (lambda: tf.RobertaModel(tf.RobertaConfig()), "ids"),
        "deberta_v3": (lambda: tf.DebertaV2Model(tf.DebertaV2Config(
            hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
            relative_attention=True, position_buckets=256, max_relative_positions=-1,
            pos_att_type=["p2c", "c2p"], position_biased_input=False, norm_rel_ebd="layer_norm",
            share_att_key=True, vocab_size=128100)), "ids"),                            # deberta-v3-base
        "t5_encoder": (lambda: tf.T5EncoderModel(tf.T5Config()), "ids"),               # t5-small
        "opt": (lambda: tf.OPTModel(tf.OPTConfig(hidden_size=768, num_hidden_layers=12, ffn_dim=3072,
                                                 num_attention_heads=12, word_embed_proj_dim=768)), "ids"),
        "gpt_neox": (lambda: tf.GPTNeoXModel(tf.GPTNeoXConfig(
            hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
            vocab_size=50304)), "ids"),                                                  # pythia-160m
        "qwen2": (lambda: tf.Qwen2Model(tf.Qwen2Config(
            hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
            num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True)), "ids"),  # Qwen2-0.5B
        # mixtures of experts at their published widths, a few layers (the whole models are 7-30 B)
        "olmoe_2l": (lambda: tf.OlmoeModel(tf.OlmoeConfig(
            hidden_size=2048, intermediate_size=1024, num_hidden_layers=2, num_attention_heads=16,
            num_key_value_heads=16, num_experts=64, num_experts_per_tok=8, vocab_size=50304)), "ids"),  # OLMoE-1B-7B
        "qwen3_moe_1l": (lambda: tf.Qwen3MoeModel(tf.Qwen3MoeConfig(
            hidden_size=2048, moe_intermediate_size=768, num_hidden_layers=1, num_attention_heads=32,
            num_key_value_heads=4, head_dim=128, num_experts=128, num_experts_per_tok=8,
            vocab_size=151936)), "ids"),                                                # Qwen3-30B-A3B
        "vit": (lambda: tf.ViTModel(tf.ViTConfig()), "img"),                            # ViT-B/16, 197 tokens
        "clip_vision": (lambda: tf.CLIPVisionModel(tf.CLIPVisionConfig()), "img"),      # ViT-B/32, 50 tokens
        "beit": (lambda: tf.BeitModel(tf.BeitConfig(use_relative_position_bias=True)), "img"),
        "swin": (lambda: tf.SwinModel(tf.SwinConfig()), "img"),                         # swin-tiny
        "convnext": (lambda: tf.ConvNextModel(tf.ConvNextConfig()), "img"),             # convnext-tiny
        "segformer": (lambda: tf.SegformerModel(tf.SegformerConfig()), "img512"),       # mit-b0
        "wav2vec2": (lambda: tf.Wav2Vec2Model(tf.Wav2Vec2Config()), "wav"),             # base, 1 s of audio
        "whisper_encoder": (lambda: tf.WhisperModel(tf.WhisperConfig(
            d_model=384, encoder_layers=4, decoder_layers=4, encoder_attention_heads=6,
            decoder_attention_heads=6, encoder_ffn_dim=1536, decoder_ffn_dim=1536)).encoder, "mel"),  # tiny, 30 s
    }


def inputs_of(kind: str):
    import torch
    return {"ids": (torch.randint(3, 1000, (1, TOKENS)),), "img": (torch.randn(1, 3, 224, 224),),
            "img512": (torch.randn(1, 3, 512, 512),), "wav": (torch.randn(1, 16000),),
            "mel": (torch.randn(1, 80, 3000),)}[kind]


def run_one(name: str, dtype: str = "float32") -> str:
    import torch
    import harness
    from hf_models import Main, in_dtype, relative
    from models import inductor
    from random_init import unfold_constant_init
    import schedlang.torch as st
    warnings.simplefilter("ignore")
    torch.manual_seed(0)
    make, kind = cases()[name]
    model = Main(make().eval(), kind).eval()
    xs = inputs_of(kind)
    exact = ""
    with torch.no_grad():
        unfold_constant_init(model)
        if dtype != "float32":
            want32 = model(*xs)
            model, xs = in_dtype(model, xs, dtype)
        want = model(*xs)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            start = time.perf_counter()
            compiled = st.compile(model, xs)
            got = compiled(*xs)
            seconds = time.perf_counter() - start
        rel = relative(got, want)
        if dtype != "float32":
            exact = f" (from float32: eager {relative(want, want32):.1e}, schedlang {relative(got, want32):.1e})"
        fell = sorted({str(w.message).split(": ", 1)[-1][:60] for w in caught
                       if type(w.message).__name__ == "FallbackWarning"})
        fast, _ = inductor(model, xs)
        fast()
        times = harness.measure([lambda: model(*xs), fast, lambda: compiled(*xs)], harness.Timing(repeat=5))
    eager_ms, inductor_ms, ours_ms = (1e3 * median for _, median in times)
    return (f"{name:16s} rel {rel:.1e}{exact} {seconds:5.1f} s  eager {eager_ms:8.2f}  inductor {inductor_ms:8.2f}  "
            f"schedlang {ours_ms:8.2f} ms ({ours_ms / inductor_ms:4.2f}x Inductor)"
            + (f"  in torch: {fell}" if fell else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", default=None)
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"),
                    help="the models' weights and floating inputs (bfloat16: model.to(torch.bfloat16))")
    args = ap.parse_args()
    if args.one:
        print("RESULT", run_one(args.one, args.dtype), flush=True)
        return
    import torch
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, batch 1, {args.dtype}, {TOKENS} tokens")
    for name in args.only or list(cases()):
        try:
            done = subprocess.run([sys.executable, __file__, "--one", name, "--dtype", args.dtype],
                                  capture_output=True, text=True,
                                  timeout=args.timeout)
            rows = [line[7:] for line in done.stdout.splitlines() if line.startswith("RESULT ")]
            last = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
            print(rows[0] if rows else f"{name:16s} FAILED {last}", flush=True)
        except subprocess.TimeoutExpired:
            print(f"{name:16s} TIMED OUT after {args.timeout:.0f} s", flush=True)


if __name__ == "__main__":
    main()
