"""An fp32 ONNX graph of a BERT encoder, built from its safetensors weights with the `onnx` helper API.

Why: the int8 graph shipped for all-MiniLM-L6-v2 is slow on CPUs without int8 dot-product instructions
(AVX2 without VNNI), and the tokenizer package already ships the fp32 weights. Building the graph here
keeps PyTorch out of the run time. Inputs and output are those of a Hugging Face export (`input_ids`,
`attention_mask`, `token_type_ids` → `last_hidden_state`), so the embedder pools both graphs alike.

The graph is built once and cached as `bert-<weights digest>-v<BUILD_VERSION>.onnx` in the cache
directory, written to a temporary file and renamed, so a crash never leaves a partial graph under the
final name; a cached file onnxruntime cannot load is rebuilt by the caller.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import tempfile
from pathlib import Path

import numpy as np

from .safetensors import read_safetensors

log = logging.getLogger(__name__)

BUILD_VERSION = 1  # bump when the graph built from the same weights changes
_OPSET = 17  # LayerNormalization


def weights_digest(weights_path: Path) -> str:
    digest = hashlib.sha256()
    with Path(weights_path).open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def cached_graph(weights_path: Path, cache_dir: Path) -> Path | bytes:
    """The graph file for these weights in `cache_dir`, built and written (atomically) when missing; the graph's
    bytes when it cannot be written (a full disk, a cache dir that cannot be made): served from memory this time."""
    path = Path(cache_dir) / f"bert-{weights_digest(weights_path)}-v{BUILD_VERSION}.onnx"
    if path.is_file():
        return path
    graph = build_graph(weights_path)
    try:
        write_atomically(path, graph)
    except OSError as error:
        log.warning("the fp32 MiniLM graph cannot be cached in %s (%s): built in memory, again at the next start",
                    cache_dir, error)
        return graph
    return path


def write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # inside the data dir: 0700, as the rest of it
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def build_graph(weights_path: Path) -> bytes:
    """The serialised ONNX model of the encoder whose weights and config.json are at `weights_path`."""
    config = json.loads((Path(weights_path).parent / "config.json").read_text())
    return _Builder(read_safetensors(weights_path), config).model()


class _Builder:
    def __init__(self, weights: dict[str, np.ndarray], config: dict) -> None:
        from onnx import helper, numpy_helper
        self.h, self.nh = helper, numpy_helper
        self.w = weights
        self.eps = float(config["layer_norm_eps"])
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.hidden = int(config["hidden_size"])
        if config.get("hidden_act", "gelu") != "gelu" or config.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"unsupported BERT variant: {config.get('hidden_act')}, {config.get('position_embedding_type')}")
        self.nodes: list = []
        self.inits: list = []
        self._n = 0

    def model(self) -> bytes:
        from onnx import TensorProto
        h = self.h
        ids, mask, types = "input_ids", "attention_mask", "token_type_ids"
        x = self.embeddings(ids, types)
        bias = self.mask_bias(mask)
        for i in range(self.layers):
            x = self.layer(i, x, bias)
        self.nodes.append(h.make_node("Identity", [x], ["last_hidden_state"]))
        dims = ["batch", "sequence"]
        graph = h.make_graph(
            self.nodes, "bert_encoder",
            [h.make_tensor_value_info(n, TensorProto.INT64, dims) for n in (ids, mask, types)],
            [h.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [*dims, self.hidden])],
            self.inits)
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", _OPSET)], producer_name="memlane")
        model.ir_version = 8
        return bytes(model.SerializeToString())

    # -- pieces ---------------------------------------------------------------------------------------

    def name(self, stem: str) -> str:
        self._n += 1
        return f"{stem}_{self._n}"

    def const(self, stem: str, value: np.ndarray) -> str:
        name = self.name(stem)
        self.inits.append(self.nh.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op: str, inputs: list[str], **attrs: object) -> str:
        out = self.name(op.lower())
        self.nodes.append(self.h.make_node(op, inputs, [out], **attrs))
        return out

    def weight(self, key: str) -> str:
        return self.const(key, self.w[key].astype(np.float32))

    def linear(self, prefix: str, x: str) -> str:
        # torch's Linear keeps [out, in]; MatMul wants [in, out]
        kernel = self.const(f"{prefix}.weight_t", self.w[f"{prefix}.weight"].astype(np.float32).T)
        return self.op("Add", [self.op("MatMul", [x, kernel]), self.weight(f"{prefix}.bias")])

    def layer_norm(self, prefix: str, x: str) -> str:
        return self.op("LayerNormalization", [x, self.weight(f"{prefix}.weight"), self.weight(f"{prefix}.bias")],
                       axis=-1, epsilon=self.eps)

    def embeddings(self, ids: str, types: str) -> str:
        words = self.op("Gather", [self.weight("embeddings.word_embeddings.weight"), ids])
        length = self.op("Shape", [ids], start=1, end=2)
        positions = self.op("Slice", [self.weight("embeddings.position_embeddings.weight"),
                                      self.const("zero", np.array([0], dtype=np.int64)), length,
                                      self.const("axis0", np.array([0], dtype=np.int64))])
        kinds = self.op("Gather", [self.weight("embeddings.token_type_embeddings.weight"), types])
        summed = self.op("Add", [self.op("Add", [words, positions]), kinds])
        return self.layer_norm("embeddings.LayerNorm", summed)

    def mask_bias(self, mask: str) -> str:
        # 0 where a token is attended, a large negative number on padding: [batch, 1, 1, sequence]
        keep = self.op("Cast", [mask], to=1)  # FLOAT
        dropped = self.op("Sub", [self.const("one", np.array(1.0, dtype=np.float32)), keep])
        scaled = self.op("Mul", [dropped, self.const("neg", np.array(-1e4, dtype=np.float32))])
        return self.op("Unsqueeze", [scaled, self.const("axes", np.array([1, 2], dtype=np.int64))])

    def layer(self, i: int, x: str, bias: str) -> str:
        p = f"encoder.layer.{i}"
        size = self.hidden // self.heads
        split = self.const("split_shape", np.array([0, 0, self.heads, size], dtype=np.int64))

        def heads(name: str, perm: list[int]) -> str:
            return self.op("Transpose", [self.op("Reshape", [self.linear(f"{p}.attention.self.{name}", x), split])],
                           perm=perm)

        q = heads("query", [0, 2, 1, 3])  # [b, h, s, d]
        k = heads("key", [0, 2, 3, 1])  # [b, h, d, s]
        v = heads("value", [0, 2, 1, 3])
        scale = self.const("scale", np.array(1.0 / math.sqrt(size), dtype=np.float32))
        scores = self.op("Add", [self.op("Mul", [self.op("MatMul", [q, k]), scale]), bias])
        context = self.op("MatMul", [self.op("Softmax", [scores], axis=-1), v])
        merged = self.op("Reshape", [self.op("Transpose", [context], perm=[0, 2, 1, 3]),
                                     self.const("merge_shape", np.array([0, 0, self.hidden], dtype=np.int64))])
        attended = self.layer_norm(f"{p}.attention.output.LayerNorm",
                                   self.op("Add", [self.linear(f"{p}.attention.output.dense", merged), x]))
        inner = self.gelu(self.linear(f"{p}.intermediate.dense", attended))
        return self.layer_norm(f"{p}.output.LayerNorm", self.op("Add", [self.linear(f"{p}.output.dense", inner), attended]))

    def gelu(self, x: str) -> str:
        # exact (erf) GELU as BERT uses; onnxruntime fuses the pattern into its Gelu kernel
        half = self.const("half", np.array(0.5, dtype=np.float32))
        one = self.const("one", np.array(1.0, dtype=np.float32))
        root2 = self.const("sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))
        erf = self.op("Erf", [self.op("Div", [x, root2])])
        return self.op("Mul", [self.op("Mul", [x, self.op("Add", [erf, one])]), half])
