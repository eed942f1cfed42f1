"""A Strands agent that remembers across sessions through memlane (docs/integrations.md#strands-agents).

Runs without a model service: a small rule-following model stands in for the LLM (pass `--bedrock MODEL_ID`
to use Amazon Bedrock instead). In session 1 the user asks it to remember a fact: it calls the `remember`
tool. In session 2 — a new agent, a new session — it answers from what memlane put in front of the request.

    memlane serve --data-dir /tmp/memlane            # in another terminal
    python examples/strands_memory.py                 # or: --url URL [--api-key KEY], or --local DIR (in-process)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, AsyncIterator

from strands import Agent
from strands.models.model import Model

from memlane.integrations.strands import MEMORIES_TAG, MemlaneMemory
from memlane.sdk import DEFAULT_URL, Memlane


class RuleModel(Model):
    """Stands in for an LLM: 'remember: X' calls the remember tool; otherwise it repeats the memories
    memlane put in front of the request."""

    def update_config(self, **config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def stream(self, messages: Any, tool_specs: Any = None, system_prompt: Any = None,
                     **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        last = messages[-1]["content"]
        texts = [b["text"] for b in last if "text" in b]
        yield {"messageStart": {"role": "assistant"}}
        if any("toolResult" in b for b in last):
            reply = "Noted: " + " ".join(c["text"] for b in last if "toolResult" in b for c in b["toolResult"]["content"])
        elif texts and texts[-1].lower().startswith("remember:"):
            fact = texts[-1].split(":", 1)[1].strip()
            yield {"contentBlockStart": {"start": {"toolUse": {"toolUseId": "t1", "name": "remember"}}}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps({"text": fact})}}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}
            return
        else:
            recalled = [line for t in texts if t.startswith(MEMORIES_TAG) for line in t.splitlines() if line.startswith("- ")]
            reply = "I remember: " + " ".join(recalled) if recalled else "I don't know yet."
        yield {"contentBlockStart": {"start": {}}}
        yield {"contentBlockDelta": {"delta": {"text": reply}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "end_turn"}}


def client_from(args: argparse.Namespace) -> Memlane:
    if args.local:  # in-process: memlane's own resolver on a local data directory, no server
        from memlane.cli import InProcessTransport

        return Memlane("http://memlane.local", transport=InProcessTransport(Path(args.local)))
    return Memlane(args.url, api_key=args.api_key)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default=DEFAULT_URL)
    parser.add_argument("--api-key")
    parser.add_argument("--local", metavar="DATA_DIR", help="run memlane in-process on this data directory")
    parser.add_argument("--bedrock", metavar="MODEL_ID", help="use this Amazon Bedrock model instead of the rules")
    args = parser.parse_args()
    client = client_from(args)

    for session, prompt in [("session-1", "remember: Alice is allergic to peanuts"),
                            ("session-2", "What should the restaurant know about me?")]:
        memory = MemlaneMemory("strands-demo", app_id="demo-app", tenant_id="alice", session_id=session, client=client)
        model: Any = args.bedrock or RuleModel()
        agent = Agent(model=model, tools=memory.tools, hooks=[memory], callback_handler=None)
        print(f"{session}: {str(agent(prompt)).strip()}")


if __name__ == "__main__":
    main()
