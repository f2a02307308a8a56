"""A laptop-scale GGUF without downloading a model: the Qwen2.5-1.5B-Instruct architecture (config
from ../shared/tokenizers/qwen2.5/configs/) with seeded random weights and the real Qwen2.5
tokenizer, converted by llama.cpp's own converter and quantized to Q4_K_M, cached outside the repo.

Random weights are sound for speed under a teacher (the forced family: the gold decides every
token, the weights only what a forward costs). Nothing here measures quality.

    .venv/bin/python scripts/build_laptop_gguf.py            # prints the GGUF's path (~935 MiB)
    copy-as-decode bench edits --backend llamacpp --model "$(.venv/bin/python scripts/build_laptop_gguf.py)" \\
        --threads 2 --corpus humanevalfix-python --family forced --limit 30 --json results/backends/...

Steps (each skipped when its output exists): the HF folder from ``AutoModelForCausalLM.from_config``
(fp16, ~3.1 GB, deleted after conversion); llama.cpp's ``convert_hf_to_gguf.py`` from the
llama-cpp-python sdist of the installed version (``pip download``, PyPI only) to an f16 GGUF
(deleted after quantizing); ``llama_model_quantize`` to Q4_K_M. The converter imports
``sentencepiece`` before it falls back to the BPE ``tokenizer.json``, so that package is installed
into this venv when missing.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("COPY_AS_DECODE_SHARED", REPO.parent / "shared"))
QWEN = SHARED / "tokenizers" / "qwen2.5"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt")
SEED = 0


def log(message: str) -> None:
    print(f"[build_laptop_gguf] {message}", file=sys.stderr, flush=True)


def cache_root() -> Path:
    from engine.runtime.sources import cache_dir

    return cache_dir() / "laptop-gguf"


def build_hf_folder(config_name: str, folder: Path) -> None:
    """Seeded random weights in the config's shape, saved with the real tokenizer files."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(SEED)
    config = AutoConfig.from_pretrained(str(QWEN / "configs" / config_name))
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float16)
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(str(tmp), safe_serialization=True)
    for name in TOKENIZER_FILES:
        shutil.copyfile(QWEN / name, tmp / name)
    os.replace(tmp, folder)
    log(f"{sum(p.numel() for p in model.parameters()) / 1e9:.2f}B parameters written to {folder}")


def converter(root: Path) -> Path:
    """llama.cpp's converter from the sdist of the installed llama-cpp-python (cached)."""
    import llama_cpp

    version = llama_cpp.__version__
    vendor = root / f"llama-cpp-python-{version}" / "vendor" / "llama.cpp"
    script = vendor / "convert_hf_to_gguf.py"
    if script.is_file():
        return script
    with tempfile.TemporaryDirectory() as tmp:
        log(f"downloading the llama-cpp-python {version} sdist for its converter...")
        subprocess.run([sys.executable, "-m", "pip", "download", f"llama-cpp-python=={version}", "--no-deps",
                        "--no-binary", ":all:", "-d", tmp, "-q"], check=True)
        (archive,) = Path(tmp).glob("llama_cpp_python-*.tar.gz")
        with tarfile.open(archive) as tar:
            tar.extractall(root, filter="data")
    extracted = root / f"llama_cpp_python-{version}"
    if extracted.is_dir():
        os.replace(extracted, root / f"llama-cpp-python-{version}")
    if not script.is_file():
        raise SystemExit(f"the sdist has no {script.relative_to(root)}")
    return script


def convert(folder: Path, out: Path, script: Path) -> None:
    if importlib.util.find_spec("sentencepiece") is None:
        log("installing sentencepiece (the converter imports it)...")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "sentencepiece"], check=True)
    vendor = script.parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(vendor / "gguf-py"), str(vendor)]))
    tmp = out.with_name(out.name + ".tmp")
    subprocess.run([sys.executable, str(script), str(folder), "--outtype", "f16", "--outfile", str(tmp)],
                   check=True, env=env)
    os.replace(tmp, out)


def quantize(source: Path, out: Path) -> None:
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M
    params.nthread = os.cpu_count() or 1
    tmp = out.with_name(out.name + ".tmp")
    if llama_cpp.llama_model_quantize(str(source).encode(), str(tmp).encode(), ctypes.byref(params)) != 0:
        raise SystemExit(f"llama_model_quantize failed on {source}")
    os.replace(tmp, out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="Qwen2.5-1.5B-Instruct", help="a folder of ../shared/tokenizers/qwen2.5/configs/")
    ap.add_argument("--keep", action="store_true", help="keep the HF folder and the f16 GGUF")
    args = ap.parse_args()
    if not (QWEN / "configs" / args.config / "config.json").is_file():
        log(f"no config {args.config} under {QWEN / 'configs'}")
        return 2
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    stem = f"{args.config}-random-seed{SEED}"
    final = root / f"{stem}.Q4_K_M.gguf"
    if not final.is_file():
        f16 = root / f"{stem}.f16.gguf"
        if not f16.is_file():
            folder = root / f"{stem}-hf"
            if not folder.is_dir():
                log(f"building {args.config} with random weights (about a minute)...")
                build_hf_folder(args.config, folder)
            log("converting to an f16 GGUF with llama.cpp's converter...")
            convert(folder, f16, converter(root))
            if not args.keep:
                shutil.rmtree(folder)
        log("quantizing to Q4_K_M...")
        quantize(f16, final)
        if not args.keep:
            f16.unlink()
    print(final)
    return 0


if __name__ == "__main__":
    sys.exit(main())
