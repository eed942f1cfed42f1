"""A LangGraph graph that remembers across threads through memlane (docs/integrations.md#langgraph).

No model: one deterministic node stores what the user asks it to remember in the graph's store, and
answers a question from what the store finds by meaning — in another thread than the one it was told in.

    memlane serve --data-dir /tmp/memlane            # in another terminal
    python examples/langgraph_memory.py               # or: --url URL [--api-key KEY], or --local DIR (in-process)
"""

from __future__ import annotations

import argparse
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from memlane.integrations.langgraph import MemlaneStore
from memlane.sdk import DEFAULT_URL, Memlane


class State(TypedDict):
    message: str
    reply: str


@dataclass
class Context:
    user_id: str


def respond(state: State, runtime: Runtime[Context]) -> dict[str, str]:
    """'remember: X' stores X for this user; anything else is answered from what was stored."""
    namespace = ("memories", runtime.context.user_id)
    text = state["message"]
    if text.lower().startswith("remember:"):
        fact = text.split(":", 1)[1].strip()
        runtime.store.put(namespace, str(uuid.uuid5(uuid.NAMESPACE_URL, fact)), {"text": fact})
        return {"reply": "noted"}
    hits = runtime.store.search(namespace, query=text, limit=1)
    return {"reply": f"you told me: {hits[0].value['text']}" if hits else "I don't know yet"}


def build_graph(store: MemlaneStore):  # type: ignore[no-untyped-def]
    graph = StateGraph(State, context_schema=Context)
    graph.add_node("respond", respond)
    graph.add_edge(START, "respond")
    graph.add_edge("respond", END)
    # the checkpointer keeps each thread's state; the store is what threads share
    return graph.compile(checkpointer=InMemorySaver(), store=store)


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
    args = parser.parse_args()

    store = MemlaneStore("langgraph-demo", app_id="demo-app", tenant_id="alice", client=client_from(args))
    graph = build_graph(store)
    alice = Context(user_id="alice")
    for thread, message in [("thread-1", "remember: My favourite city is Lisbon"),
                            ("thread-2", "Which city do I like best?")]:
        out = graph.invoke({"message": message, "reply": ""}, {"configurable": {"thread_id": thread}}, context=alice)
        print(f"{thread}: {out['reply']}")


if __name__ == "__main__":
    main()
