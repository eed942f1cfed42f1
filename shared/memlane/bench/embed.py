"""`memlane bench embed`: the local MiniLM model itself, int8 graph beside the fp32 one, in one run.

For each precision: texts/s at several batch sizes with 2 and 1 intra-op threads, the latency of one
query (one short text, as a search embeds it), and the cosine of its vectors to the fp32 graph's on a
probe set; with the CPU's flags and the BLAS facts, since both decide which graph is faster. The texts
are LoCoMo turns when `--data` is given (real lengths), else seeded sentences of 6-40 words.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from .common import machine, table

PRECISIONS = ("int8", "fp32")
# Content words only (the stop-word lists live in memlane.language): sentence lengths matter here, not grammar.
WORDS = ("moved city spring started painting again friend said lake looks beautiful sunrise talked adoption "
         "agencies support groups pottery classes camping trips running shoes concert friday sister wedding job "
         "interview library next week remember grandmother garden sweden").split()


def texts_from(data: Path | None, count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    if data is not None:
        turns = [t["text"] for conv in json.loads(data.read_text())
                 for key, session in conv["conversation"].items() if key.startswith("session_") and isinstance(session, list)
                 for t in session if t.get("text")]
        rng.shuffle(turns)
        return (turns * (count // max(1, len(turns)) + 1))[:count]
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 40))).capitalize() + "." for _ in range(count)]


def cpu_facts() -> dict[str, Any]:
    from ..adapters.embedders.minilm_onnx import INT8_FAST_FLAGS, cpu_flags
    from .scale import blas_kernel

    flags = cpu_flags()
    import onnxruntime
    return {**machine(), "simd": sorted(f for f in flags if f.startswith(("avx", "fma", "amx")) or f in INT8_FAST_FLAGS),
            "int8_dot_products": sorted(flags & INT8_FAST_FLAGS), "onnxruntime": onnxruntime.__version__,
            "numpy_blas": blas_kernel(), "note": "onnxruntime multiplies with its own MLAS kernels, not numpy's BLAS"}


def _models(threads: int, batch: int, cache: Path) -> dict[str, Any]:
    from ..adapters.embedders.minilm_onnx import MiniLMOnnxEmbedder

    models = {p: MiniLMOnnxEmbedder(threads=threads, batch_size=batch, precision=p, cache_dir=cache)  # type: ignore[arg-type]
              for p in PRECISIONS}
    for model in models.values():
        model.embed(["warm up", "and load the graph"])
    return models


CALL = 128  # texts per embed call: the embedder sorts them by length and runs them `batch` at a time


def measure(threads: int, batch: int, texts: list[str], cache: Path) -> list[dict[str, Any]]:
    """Both graphs on the same texts, interleaved a call at a time (each first in turn), so a
    machine whose load changes during the run loads both alike."""
    models = _models(threads, batch, cache)
    spent = dict.fromkeys(PRECISIONS, 0.0)
    for n, start in enumerate(range(0, len(texts), CALL)):
        chunk = texts[start:start + CALL]
        for p in (PRECISIONS if n % 2 == 0 else PRECISIONS[::-1]):
            began = time.perf_counter()
            models[p].embed(chunk)
            spent[p] += time.perf_counter() - began
    return [{"precision": p, "threads": threads, "batch": batch, "texts_per_s": len(texts) / spent[p]}
            for p in PRECISIONS]


def query_latency(threads: int, queries: list[str], cache: Path) -> dict[str, dict[str, float]]:
    models = _models(threads, 1, cache)
    times: dict[str, list[float]] = {p: [] for p in PRECISIONS}
    for n, q in enumerate(queries):
        for p in (PRECISIONS if n % 2 == 0 else PRECISIONS[::-1]):
            began = time.perf_counter()
            models[p].embed([q])
            times[p].append((time.perf_counter() - began) * 1000)
    out = {}
    for p, t in times.items():
        t.sort()
        out[f"{p}/{threads}"] = {"p50_ms": statistics.median(t), "p95_ms": t[int(0.95 * (len(t) - 1))]}
    return out


def agreement(cache: Path) -> dict[str, float]:
    """The minimum and mean cosine of each graph's vectors to the fp32 graph's on the probe texts."""
    from ..adapters.embedders.minilm_onnx import PROBE_TEXTS, MiniLMOnnxEmbedder

    texts = list(PROBE_TEXTS)
    ref = np.array(MiniLMOnnxEmbedder(threads=1, precision="fp32", cache_dir=cache).embed(texts))
    cos = (np.array(MiniLMOnnxEmbedder(threads=1, precision="int8", cache_dir=cache).embed(texts)) * ref).sum(axis=1)
    return {"int8_min_cosine_to_fp32": float(cos.min()), "int8_mean_cosine_to_fp32": float(cos.mean())}


def run(args: argparse.Namespace) -> dict[str, Any]:
    texts = texts_from(args.data, args.texts, args.seed)
    queries = [t[:80] for t in texts_from(args.data, args.queries, args.seed + 1)]
    batches = [int(b) for b in args.batches.split(",")]
    threads = [int(t) for t in args.threads.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        rows = [row for t in threads for b in batches for row in measure(t, b, texts, cache)]
        latency = {k: v for t in threads for k, v in query_latency(t, queries, cache).items()}
        agree = agreement(cache)
    from ..adapters.embedders.minilm_onnx import MiniLMOnnxEmbedder
    return {"machine": cpu_facts(), "texts": len(texts), "source": str(args.data or "seeded sentences"),
            "throughput": rows, "query_latency": latency, "agreement": agree,
            "auto_choice": MiniLMOnnxEmbedder(precision="auto").precision}


def render(report: dict[str, Any]) -> str:
    by = {(r["precision"], r["threads"], r["batch"]): r["texts_per_s"] for r in report["throughput"]}
    keys = sorted({(t, b) for _, t, b in by})
    rows = [[t, b, by[("int8", t, b)], by[("fp32", t, b)], by[("fp32", t, b)] / by[("int8", t, b)]] for t, b in keys]
    lat = report["query_latency"]
    lrows = [[k.split("/")[1], lat[f"int8/{k.split('/')[1]}"]["p50_ms"], lat[k]["p50_ms"],
              lat[f"int8/{k.split('/')[1]}"]["p95_ms"], lat[k]["p95_ms"]] for k in sorted(lat) if k.startswith("fp32")]
    m = report["machine"]
    return "\n\n".join([
        f"{m.get('cpu', '?')}, {m['cpus']} CPUs; SIMD {', '.join(m['simd'])}; int8 dot products: "
        f"{', '.join(m['int8_dot_products']) or 'none'}; onnxruntime {m['onnxruntime']}; numpy BLAS {m['numpy_blas']}",
        f"{report['texts']} texts ({report['source']}), texts/s:",
        table(["threads", "batch", "int8", "fp32", "fp32 / int8"], rows),
        "one query, ms:",
        table(["threads", "int8 p50", "fp32 p50", "int8 p95", "fp32 p95"], lrows),
        f"int8 vs fp32 on the probe texts: min cosine {report['agreement']['int8_min_cosine_to_fp32']:.4f}, "
        f"mean {report['agreement']['int8_mean_cosine_to_fp32']:.4f}; auto chooses {report['auto_choice']}",
    ])


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, help="LoCoMo JSON: embed its turns (default: seeded sentences)")
    p.add_argument("--texts", type=int, default=512)
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--batches", default="1,4,8,16,32,64")
    p.add_argument("--threads", default="2,1")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--json", type=Path)


def main(args: argparse.Namespace) -> int:
    from .common import minilm
    minilm()  # a clear error when the local model is not installed
    report = run(args)
    print(render(report))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))
    return 0
