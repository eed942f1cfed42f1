"""Bedrock, answered at botocore's `before-send` hook with the payloads the real service returns (the shapes
recorded from Titan Text Embeddings V2, Converse under toolChoice, and Rerank), so the adapters, their
parsing and the IAM evaluation of the calls are the real ones; only the model's judgement is scripted.

- InvokeModel (Titan V2): a deterministic dense bag-of-words vector, so texts sharing words are near each other
  and search finds what was said.
- Converse: the forced tool's input, built from the prompt: each new message is a fact (extraction), each
  candidate is new (consolidation), each new message is a summary sentence, a dream proposes nothing.
- Rerank: relevance by shared words.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import uuid
from typing import Any

from botocore.awsrequest import AWSResponse

_WORD = re.compile(r"[a-z0-9]+")
_NEW_LINE = re.compile(r"^\[(\d+)\] (?:\S+ \S+ )?[^:]*: (.+)$", re.M)


class _Raw:
    """The urllib3 response botocore reads a stubbed body from."""

    def __init__(self, body: bytes):
        self._body = body

    def stream(self, **_: Any):  # type: ignore[no-untyped-def]
        yield self._body

    def read(self, *_: Any, **__: Any) -> bytes:
        body, self._body = self._body, b""
        return body


def respond(request: Any, operation: str) -> AWSResponse:
    """The answer to one Bedrock request (the botocore AWSPreparedRequest about to be sent)."""
    body = json.loads(request.body or b"{}")
    if operation == "InvokeModel":
        payload, headers = _embedding(body), {"content-type": "application/json"}
        raw = json.dumps(payload).encode()
    elif operation == "Converse":
        raw, headers = json.dumps(_converse(body)).encode(), {"content-type": "application/json"}
    elif operation == "Rerank":
        raw, headers = json.dumps(_rerank(body)).encode(), {"content-type": "application/json"}
    else:
        raise AssertionError(f"the rehearsal has no recorded Bedrock answer for {operation}")
    headers["x-amzn-requestid"] = str(uuid.uuid4())
    return AWSResponse(request.url, 200, headers, _Raw(raw))


def vector(text: str, dim: int) -> list[float]:
    """Dense, like Titan's: the sum of one fixed pseudo-random direction per word, normalised."""
    values = [0.0] * dim
    for word in _WORD.findall(text.lower()) or ["<empty>"]:
        rng = random.Random(hashlib.sha256(word.encode()).digest())
        for i in range(dim):
            values[i] += rng.gauss(0.0, 1.0)
    norm = math.sqrt(sum(v * v for v in values))
    return [v / norm for v in values]


def _embedding(body: dict[str, Any]) -> dict[str, Any]:
    text = body["inputText"]
    return {"embedding": vector(text, int(body.get("dimensions", 1024))),
            "embeddingsByType": {}, "inputTextTokenCount": len(_WORD.findall(text.lower()))}


def _converse(body: dict[str, Any]) -> dict[str, Any]:
    tool = body["toolConfig"]["tools"][0]["toolSpec"]["name"]
    prompt = "\n".join(block.get("text", "") for m in body["messages"] for block in m["content"])
    new = prompt.split("New messages", 1)[-1]
    lines = [(int(n), text.strip()) for n, text in _NEW_LINE.findall(new)]
    if tool == "ExtractionResult":
        answer: dict[str, Any] = {"memories": [{"text": text, "memory_type": "fact", "evidence": [n], "importance": 0.6}
                                               for n, text in lines if not text.endswith("?")]}
    elif tool == "ConsolidationResult":
        candidates = sorted({int(c) for c in re.findall(r"\[c(\d+)\]", prompt)})
        answer = {"decisions": [{"candidate": c, "action": "ADD", "reason": "new", "confidence": 0.9}
                                for c in candidates]}
    elif tool == "SummaryAnswer":
        answer = {"sentences": [{"text": text[:200], "messages": [n]} for n, text in lines[:2]]}
    elif tool == "DreamResult":
        answer = {"actions": []}
    elif tool == "ProfileResult":
        answer = {"profile": {"subject": "", "attributes": [], "preferences": [], "summary": ""}}
    else:
        raise AssertionError(f"the rehearsal has no recorded Converse answer for the tool {tool}")
    return {
        "output": {"message": {"role": "assistant", "content": [{"toolUse": {
            "toolUseId": f"tooluse_{uuid.uuid4().hex[:22]}", "name": tool, "input": answer}}]}},
        "stopReason": "tool_use", "usage": {"inputTokens": len(prompt) // 4, "outputTokens": 64,
                                            "totalTokens": len(prompt) // 4 + 64},
        "metrics": {"latencyMs": 912},
    }


def _rerank(body: dict[str, Any]) -> dict[str, Any]:
    query = set(_WORD.findall(body["queries"][0]["textQuery"]["text"].lower()))
    texts = [s["inlineDocumentSource"]["textDocument"]["text"] for s in body["sources"]]
    scores = [len(query & set(_WORD.findall(t.lower()))) / (len(query) or 1) for t in texts]
    ranked = sorted(range(len(texts)), key=lambda i: -scores[i])
    return {"results": [{"index": i, "relevanceScore": round(scores[i], 6)} for i in ranked]}
