"""Embedders that run in-process: local ONNX model and the lexical hashing fallback."""
