"""A reader of the safetensors format with numpy alone (no `safetensors` package, no PyTorch).

The format: an 8-byte little-endian header length, a JSON header mapping each tensor's name to its
dtype, shape and [begin, end) byte offsets into the data that follows, then the raw little-endian data.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

_DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2",
    "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?",
}
_MAX_HEADER = 100 * 1024 * 1024  # the format's own limit


class SafetensorsError(ValueError):
    """The file is not a well-formed safetensors file."""


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of the file, copied out (the file is not kept open)."""
    raw = Path(path).read_bytes()
    if len(raw) < 8:
        raise SafetensorsError(f"{path}: shorter than the 8-byte header length")
    length = struct.unpack("<Q", raw[:8])[0]
    if length > _MAX_HEADER or 8 + length > len(raw):
        raise SafetensorsError(f"{path}: header of {length} bytes does not fit the file ({len(raw)} bytes)")
    try:
        header = json.loads(raw[8:8 + length])
    except ValueError as e:
        raise SafetensorsError(f"{path}: header is not JSON: {e}") from e
    data = memoryview(raw)[8 + length:]
    tensors: dict[str, np.ndarray] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = np.dtype(_DTYPES[entry["dtype"]])
            shape = tuple(int(d) for d in entry["shape"])
            begin, end = (int(o) for o in entry["data_offsets"])
        except (KeyError, TypeError, ValueError) as e:
            raise SafetensorsError(f"{path}: tensor {name!r} has an unreadable entry {entry!r}") from e
        count = int(np.prod(shape, dtype=np.int64))
        if not 0 <= begin <= end <= len(data) or end - begin != count * dtype.itemsize:
            raise SafetensorsError(f"{path}: tensor {name!r} ({entry['dtype']} {list(shape)}) does not match "
                                   f"its byte range [{begin}, {end}) of {len(data)} data bytes")
        array = np.frombuffer(data[begin:end], dtype=dtype).reshape(shape)
        tensors[name] = array.astype(dtype.newbyteorder("="), copy=True)
    return tensors
