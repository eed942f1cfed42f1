"""Structured output over the OpenAI `POST /chat/completions` API (OpenAI, Ollama's /v1, vLLM, ...).

JSON mode (`response_format={"type": "json_object"}`) is the lowest common denominator of the
compatible servers; it guarantees JSON, not the schema. So the schema goes into the system
prompt, the answer is validated with pydantic, and a bounded repair turn sends the validation
errors back once before giving up.
"""

from __future__ import annotations

import copy
import json
import re
import time
from typing import Any, TypeVar

import requests
from pydantic import BaseModel, ValidationError

from ...domain.deadline import Deadline
from ...domain.errors import DependencyFailed
from ..backoff import DEFAULT_MAX_ATTEMPTS, Sleep
from ..structured_output import describe_validation_error
from .http import JsonClient

T = TypeVar("T", bound=BaseModel)

# Some servers wrap JSON in a Markdown fence even in JSON mode; strip it rather than fail a repair.
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)
# Of a failed answer, what the repair turn shows the model: a legitimate answer is far shorter (extraction
# prompts ask for a few facts), and echoing megabytes would make the repair request as large.
_MAX_REPAIR_ECHO_CHARS = 32_000


class OpenAICompatibleLLM:
    def __init__(self, base_url: str, model: str, api_key: str | None = None,
                 session: requests.Session | None = None, timeout: float = 60, max_repairs: int = 1, *,
                 connect_timeout: float | None = None,
                 temperature: float = 0.0, max_attempts: int = DEFAULT_MAX_ATTEMPTS, sleep: Sleep = time.sleep) -> None:
        self.name = model
        self._model = model
        self._max_repairs = max(0, max_repairs)
        self._temperature = temperature
        self._http = JsonClient(base_url, api_key=api_key, session=session, timeout=timeout,
                                connect_timeout=connect_timeout, max_attempts=max_attempts, sleep=sleep)

    def within(self, deadline: Deadline) -> "OpenAICompatibleLLM":
        """This adapter with each request and retry bounded by `deadline` (ports.Budgeted)."""
        bounded = copy.copy(self)
        bounded._http = self._http.within(deadline)
        return bounded

    def generate(self, *, system: str, prompt: str, response_model: type[T]) -> T:
        schema = json.dumps(response_model.model_json_schema(), separators=(",", ":"))
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": f"{system}\n\nAnswer with one JSON object only, no prose. "
                                          f"It must validate against this JSON Schema:\n{schema}"},
            {"role": "user", "content": prompt},
        ]
        problem = ""
        for _ in range(self._max_repairs + 1):
            content = self._complete(messages)
            try:
                return response_model.model_validate_json(_unfence(content))
            except ValidationError as e:
                problem = describe_validation_error(e)
            # The repair turn: show the model its own answer and what is wrong with it.
            messages += [
                {"role": "assistant", "content": _truncate(content, _MAX_REPAIR_ECHO_CHARS)},
                {"role": "user", "content": "That JSON does not validate against the schema:\n"
                                            f"{problem}\nReply with the corrected JSON object only."},
            ]
        raise DependencyFailed(
            f"{self._model} gave no valid {response_model.__name__} after {self._max_repairs} repair(s): {problem}",
            code="llm_invalid_output")

    def _complete(self, messages: list[dict[str, Any]]) -> str:
        body = {"model": self._model, "messages": messages, "temperature": self._temperature,
                "response_format": {"type": "json_object"}}
        data = self._http.post("chat/completions", body)
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as e:
            raise DependencyFailed(f"chat completion of unexpected shape: {e!r}", code="model_bad_response") from e
        # A refusal or an empty answer comes back as null: let validation report it and repair.
        return content if isinstance(content, str) else ""


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... [{len(text) - limit} more characters cut]"


def _unfence(text: str) -> str:
    match = _FENCE.match(text)
    return match.group(1) if match else text
