"""Structured output from Bedrock's Converse API through tool use.

The response model's JSON schema becomes the input schema of a single tool, and toolChoice
forces the model to call it: its arguments are the answer. Models follow a tool schema far more
reliably than a schema pasted into a prompt. The arguments are still validated with pydantic;
on failure one bounded repair turn returns the errors as an error toolResult.
"""

from __future__ import annotations

import copy
import re
import time
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ...domain.deadline import Deadline
from ...domain.errors import DependencyFailed
from ..backoff import DEFAULT_MAX_ATTEMPTS, CallLimits, Sleep
from ..structured_output import describe_validation_error
from .calls import Clients, call

T = TypeVar("T", bound=BaseModel)

_TOOL_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_-]")  # Bedrock's tool name pattern, at most 64 characters


class BedrockLLM:
    def __init__(self, model_id: str, client: Any = None, max_repairs: int = 1, max_tokens: int = 2048, *,
                 region: str | None = None, temperature: float = 0.0,
                 max_attempts: int = DEFAULT_MAX_ATTEMPTS, limits: CallLimits | None = None,
                 sleep: Sleep = time.sleep) -> None:
        self.name = model_id
        self._model_id = model_id
        self._clients = Clients("bedrock-runtime", region, limits or CallLimits(max_attempts=max_attempts), client)
        self._max_repairs = max(0, max_repairs)
        self._inference = {"maxTokens": max_tokens, "temperature": temperature}
        self._sleep = sleep
        self._deadline = Deadline.never()

    def within(self, deadline: Deadline) -> "BedrockLLM":
        """This model with every call, repair turn and retry bounded by `deadline` (ports.Budgeted)."""
        bounded = copy.copy(self)
        bounded._deadline = deadline
        return bounded

    def generate(self, *, system: str, prompt: str, response_model: type[T]) -> T:
        tool = _TOOL_NAME_CHARS.sub("_", response_model.__name__)[:64] or "answer"
        tool_config = {
            "tools": [{"toolSpec": {
                "name": tool,
                "description": f"Record the answer as a {response_model.__name__} object.",
                "inputSchema": {"json": response_model.model_json_schema()},
            }}],
            "toolChoice": {"tool": {"name": tool}},
        }
        messages: list[dict[str, Any]] = [{"role": "user", "content": [{"text": prompt}]}]
        problem = ""
        for _ in range(self._max_repairs + 1):
            response = call(
                lambda client: client.converse(modelId=self._model_id, system=[{"text": system}], messages=messages,
                                               toolConfig=tool_config, inferenceConfig=self._inference),
                self._clients, what=f"bedrock converse {self._model_id}", deadline=self._deadline, sleep=self._sleep)
            message = response.get("output", {}).get("message") or {}
            content = message.get("content") or [{"text": "(no answer)"}]  # Converse refuses empty turns
            use = next((b["toolUse"] for b in content if "toolUse" in b and b["toolUse"].get("name") == tool), None)
            messages.append({"role": "assistant", "content": content})
            if use is None:  # the model answered in prose despite toolChoice: ask again
                problem = f"no call of tool {tool} (stopReason {response.get('stopReason')})"
                messages.append({"role": "user", "content": [{"text": f"Answer by calling the tool {tool}."}]})
                continue
            try:
                return response_model.model_validate(use.get("input"))
            except ValidationError as e:
                problem = describe_validation_error(e)
            if response.get("stopReason") == "max_tokens":
                problem += f"\n(the answer was cut off at maxTokens={self._inference['maxTokens']})"
            # The repair turn: the failed call's result is an error listing what to fix.
            messages.append({"role": "user", "content": [{"toolResult": {
                "toolUseId": use["toolUseId"],
                "content": [{"text": f"Invalid input for {tool}:\n{problem}\nCall {tool} again with corrected input."}],
                "status": "error",
            }}]})
        raise DependencyFailed(
            f"{self._model_id} gave no valid {response_model.__name__} after {self._max_repairs} repair(s): {problem}",
            code="llm_invalid_output")
