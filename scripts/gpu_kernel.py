#!/usr/bin/env python3
"""Kernel curve s(N) for the Qwen2.5-1.5B and -7B architectures with random weights, on a GPU.

    python3 scripts/gpu_kernel.py                       # both models, CUDA bf16, results/ (< 10 min on one H200)
    python3 scripts/gpu_kernel.py --tiny --device cpu   # shrunk layers: a CPU smoke test

Speed does not depend on weight values, so each model is built from its config
(``AutoModelForCausalLM.from_config``) with random weights, directly on the device in bf16; no
weights need to travel. Measures exactly what ``copy-as-decode bench kernel`` measures (the same
code: engine/bench/kernel.py) and writes, per model, ``bench_kernel_gpu_<name>.json`` plus one
PNG with every curve (``bench_kernel_gpu.png``; skipped with a note if matplotlib is missing).
Depends on torch and transformers only.

Configs: ``--config PATH`` (repeatable) or, by default, the two Qwen2.5 configs under
``$COPY_AS_DECODE_SHARED/tokenizers/qwen2.5/configs`` (default ``<repo>/../shared``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from engine.bench.kernel import DEFAULT_CONTEXT, DEFAULT_NS, measure_kernel, parse_ns  # noqa: E402
from engine.runtime.backends.transformers_backend import TransformersRuntime  # noqa: E402

MODELS = ("Qwen2.5-1.5B-Instruct", "Qwen2.5-7B-Instruct")


def default_configs() -> list[Path]:
    shared = Path(os.environ.get("COPY_AS_DECODE_SHARED") or REPO.parent / "shared")
    return [shared / "tokenizers" / "qwen2.5" / "configs" / name / "config.json" for name in MODELS]


def build(config_path: Path, device: str, dtype: str, tiny: bool):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(str(config_path.parent))
    if tiny:  # same architecture, shrunk: for a CPU smoke test only
        config.num_hidden_layers = 2
        config.hidden_size = 64
        config.intermediate_size = 128
        config.num_attention_heads = 4
        config.num_key_value_heads = 2
        config.vocab_size = 1024
        if hasattr(config, "max_window_layers"):
            config.max_window_layers = 2
        if getattr(config, "head_dim", None):
            config.head_dim = config.hidden_size // config.num_attention_heads
        if getattr(config, "layer_types", None):
            config.layer_types = list(config.layer_types)[:config.num_hidden_layers]
    torch_dtype = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16,
                   "float16": torch.float16, "fp32": torch.float32, "float32": torch.float32}[dtype]
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
    model.eval()
    params = sum(p.numel() for p in model.parameters())
    return model, config, params


def machine(device: str, dtype: str) -> dict:
    import platform

    import torch
    import transformers

    info = {"device": device, "dtype": dtype, "torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version(), "cpu_count": os.cpu_count(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, action="append", help="a config.json (repeatable; default: both Qwen2.5)")
    parser.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    parser.add_argument("--dtype", default=None, help="bf16 (default on CUDA) or fp32 (default on CPU)")
    parser.add_argument("--context", type=int, default=DEFAULT_CONTEXT)
    parser.add_argument("--ns", default=None, help="comma list of N (default 1,2,4,...,512)")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--tiny", action="store_true", help="shrunk layers (CPU smoke test)")
    parser.add_argument("--out", type=Path, default=REPO / "results", help="output folder (default results/)")
    args = parser.parse_args(argv)

    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = args.dtype or ("bf16" if device.startswith("cuda") else "fp32")
    ns = parse_ns(args.ns) if args.ns else DEFAULT_NS
    configs = args.config or default_configs()
    missing = [str(c) for c in configs if not c.is_file()]
    if missing:
        print(f"gpu_kernel: config not found: {', '.join(missing)} (pass --config PATH or set COPY_AS_DECODE_SHARED)",
              file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    curves = []
    started = time.perf_counter()
    for path in configs:
        name = path.parent.name + ("-tiny" if args.tiny else "")
        t0 = time.perf_counter()
        model, config, params = build(path, device, dtype, args.tiny)
        print(f"{name}: {params / 1e9:.2f} B parameters (random), {config.num_hidden_layers} layers, "
              f"built on {device} in {time.perf_counter() - t0:.1f} s", flush=True)
        data = measure_kernel(TransformersRuntime(model, device), device, context=args.context, ns=ns, trials=args.trials, warmup=args.warmup,
                              progress=lambda m, n=name: print(f"  {n}: {m}", flush=True))
        record = {"model": name, "architecture": path.parent.name, "weights": "random (from config)",
                  "parameters": params, "device": device, **data, "machine": machine(device, dtype),
                  "command": "python3 scripts/gpu_kernel.py " + " ".join(sys.argv[1:] if argv is None else argv),
                  "elapsed_s": round(time.perf_counter() - t0, 1)}
        out = args.out / f"bench_kernel_gpu_{name.lower()}.json"
        out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        print("  N      AR ms   prefill ms   s(N)")
        for p in data["points"]:
            print(f"  {p['N']:<5} {p['ar_s'] * 1e3:9.2f} {p['prefill_s'] * 1e3:11.2f} {p['speedup']:7.2f}")
        print(f"wrote {out}", flush=True)
        curves.append((f"{name} ({dtype})", record))
        del model
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    try:
        from engine.bench.plot import plot_kernel

        png = plot_kernel(curves, args.out / ("bench_kernel_gpu" + ("_tiny" if args.tiny else "") + ".png"),
                          title=f"Kernel speedup s(N), random-weight models on {machine(device, dtype).get('gpu', device)}")
        print(f"wrote {png}")
    except ImportError as exc:
        print(f"no PNG ({exc}); plot later with engine.bench.plot.plot_kernel from the JSON files")
    print(f"total {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
