"""The MCP server: `MemoryTools` registered on the mcp SDK's `MCPServer` as six tools and two resources.

The scope is the server's: tools declare no store/app/tenant/agent parameter, and a call whose
arguments its tool's schema refuses is answered `invalid_input` with the field — an undeclared argument
included, which the SDK would drop silently, so a model trying to widen its scope would be answered as
if it had not, and never learn it cannot. API errors become tool errors carrying the API's error code;
the server keeps serving."""

from __future__ import annotations

import importlib.metadata
import inspect
import json
from typing import Annotated, Any, Callable

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from mcp.server import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, CallToolResult, TextContent
from pydantic import Field, ValidationError

from ..api.models import MessageIn
from ..sdk import ApiError, Memlane
from .memory import MAX_BUDGET, MAX_THREADS, MAX_TOP_K, Binding, MemoryTools, RecordType

INSTRUCTIONS = """Long-term memory of one user (tenant), kept by memlane. Call `recall` before answering \
anything that may depend on what the user said earlier; call `remember` when the user states a fact, a \
preference, a plan or a change worth keeping. `get_context` packs what matters for a conversation thread \
into a token budget. Every call works inside this server's configured scope; no argument can change it."""


# module level: the tools' annotations are evaluated against this module's names
ThreadId = Annotated[str, Field(min_length=1, max_length=256,
                                description="A conversation thread's id (any stable string you choose)")]


def _result(payload: dict[str, Any], *, error: bool = False) -> CallToolResult:
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=payload, is_error=error)


def _error(code: str, message: str, status: int | None = None, field: str | None = None) -> CallToolResult:
    error = {k: v for k, v in {"code": code, "message": message, "status": status, "field": field}.items()
             if v is not None}
    return _result({"error": error}, error=True)


def _answer(work: Callable[[], dict[str, Any]]) -> CallToolResult:
    """A tool's answer, or the API's error as a tool error (the model can read the code and adapt)."""
    try:
        return _result(work())
    except ApiError as failed:
        return _error(failed.code, failed.message, failed.status or None, failed.field)
    except ValidationError as refused:  # the SDK validates a body as the API will, before sending it
        first = refused.errors()[0]
        return _error("invalid_input", first["msg"], 400, ".".join(str(p) for p in first["loc"]) or None)


class _CheckedArguments:
    """Server middleware: a `tools/call` whose arguments its tool's input schema refuses gets an
    `invalid_input` tool error naming the field, instead of the SDK's prose; one naming an argument the
    tool does not declare is refused the same way (the SDK would drop it silently)."""

    def __init__(self, server: MCPServer):
        self.server = server
        self.validators: dict[str, tuple[frozenset[str], Draft202012Validator]] | None = None

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        params = ctx.params if ctx.method == "tools/call" and isinstance(ctx.params, dict) else None
        if params is not None:
            refused = await self._refusal(str(params.get("name")), params.get("arguments") or {})
            if refused is not None:
                return refused
        return await call_next(ctx)

    async def _refusal(self, tool: str, arguments: Any) -> CallToolResult | None:
        if self.validators is None:  # the schemas are the SDK's, made from the tools' signatures
            self.validators = {t.name: (frozenset(t.input_schema.get("properties", {})),
                                        Draft202012Validator(t.input_schema)) for t in await self.server.list_tools()}
        if tool not in self.validators:
            return None  # the SDK answers an unknown tool itself
        if not isinstance(arguments, dict):  # as the schema refuses it (a trial: a bare JSON-RPC error, no code)
            return _error("invalid_input", f"the arguments of {tool} must be an object, not "
                          f"{type(arguments).__name__}", 400, None)
        declared, validator = self.validators[tool]
        extra = sorted(set(arguments) - declared)
        if extra:
            return _error("invalid_input", f"{', '.join(extra)}: not an argument of {tool}; this server's "
                          "store, app, tenant and agent are fixed by its configuration", 400, extra[0])
        wrong = best_match(validator.iter_errors(arguments))
        if wrong is None:
            return None
        path = [str(part) for part in wrong.absolute_path]
        if not path and wrong.validator == "required":  # the missing property is named only in the message
            path = [next(p for p in wrong.validator_value if p not in arguments)]
        return _error("invalid_input", wrong.message, 400, ".".join(path) or None)


def _version() -> str:
    try:
        return importlib.metadata.version("memlane")
    except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
        from .. import __version__

        return __version__


def _resource_error(failed: ApiError) -> MCPError:
    client_side = 400 <= failed.status < 500
    return MCPError(INVALID_PARAMS if client_side else INTERNAL_ERROR, f"{failed.code}: {failed.message}",
                    {"error": {"code": failed.code, "message": failed.message, "status": failed.status}})


def build_server(client: Memlane, binding: Binding, *, name: str = "memlane") -> MCPServer:
    """An MCP server whose tools and resources reach `binding`'s scope only, through `client`."""
    memory = MemoryTools(client, binding)
    # WARNING: the SDK's INFO lines (one per HTTP request) would fill a client's server log
    # serverInfo.version: the package's, as `memlane --version` prints it (a trial found "")
    server = MCPServer(name, instructions=INSTRUCTIONS, version=_version(), log_level="WARNING")
    server.middleware.append(_CheckedArguments(server))

    def tool(fn: Callable[..., CallToolResult]) -> None:
        server.add_tool(fn, description=inspect.cleandoc(fn.__doc__ or ""))

    def remember(
        text: Annotated[str | None, Field(description="A statement to remember, in plain words")] = None,
        messages: Annotated[list[MessageIn] | None, Field(
            description="Conversation turns to remember from ({role, content, name?}); instead of text")] = None,
        thread_id: Annotated[str | None, Field(max_length=256, description=(
            "The conversation thread these come from (default: none)"))] = None,
    ) -> CallToolResult:
        """Store something the user said so it can be recalled later, in this or any other thread.
        Give `text` (one statement) or `messages` (the turns of a conversation); memlane keeps them and
        distils durable memories (facts, preferences, plans), superseding ones that changed.
        Answers the memories it distilled ([{id, type, text}]) and, in `already_known`, the memories that held
        it already ([{id, text}])."""
        return _answer(lambda: memory.remember(
            text, [m.model_dump(mode="json", exclude_none=True) for m in messages] if messages else None, thread_id))

    def recall(
        query: Annotated[str, Field(min_length=1, max_length=2000, description="What to look for, in plain words")],
        top_k: Annotated[int, Field(ge=1, le=MAX_TOP_K, description="How many results at most")] = 5,
        # not empty: the API answers 400 for [] (a trial: it was taken as the default here)
        record_types: Annotated[list[RecordType] | None, Field(min_length=1, description=(
            "What to search: memory (distilled, default), message (raw turns), summary"))] = None,
        thread_id: Annotated[str | None, Field(max_length=256, description=(
            "Only this conversation thread (default: all of the user's threads)"))] = None,
    ) -> CallToolResult:
        """Search the user's long-term memory (hybrid keyword + semantic search), best first.
        Use it before answering anything that may depend on earlier conversations.
        Answers {results: [{id, type, text, similarity (0-1), thread_id, when}]}."""
        return _answer(lambda: memory.recall(query, top_k, record_types, thread_id))

    def get_context(
        thread_id: ThreadId,
        query: Annotated[str | None, Field(max_length=2000, description=(
            "What the next turn is about (default: the thread's latest user turn)"))] = None,
        budget_tokens: Annotated[int, Field(ge=50, le=MAX_BUDGET, description="Token budget of the card")] = 1500,
    ) -> CallToolResult:
        """A context card for a thread, packed under a token budget: the user's profile, the thread's
        summary, the relevant long-term memories, open plans and the recent turns. Put its text in your
        prompt instead of the whole history. The thread must exist: a `remember` with its thread_id
        starts it (before that the answer is a `thread_not_found` error; use `recall`). Answers {text, tokens}."""
        return _answer(lambda: memory.get_context(thread_id, query, budget_tokens))

    def forget(
        memory_id: Annotated[str, Field(min_length=1, max_length=256, description="The id of a memory (from recall)")],
    ) -> CallToolResult:
        """Delete one memory for good (e.g. the user asks to forget it, or it is wrong).
        Answers {id, status: "deleted"}; a memory that does not exist is a `memory_not_found` error."""
        return _answer(lambda: memory.forget(memory_id))

    def list_threads(
        limit: Annotated[int, Field(ge=1, le=MAX_THREADS, description="How many threads at most")] = 20,
    ) -> CallToolResult:
        """The user's conversation threads, most recent activity first.
        Answers {threads: [{thread_id, messages, last_activity}]}."""
        return _answer(lambda: memory.list_threads(limit))

    def get_profile() -> CallToolResult:
        """The user's profile: what was stated about them and what memlane distilled (preferences,
        attributes). Answers {text, facts: [{name, value}]}."""
        return _answer(memory.get_profile)

    for fn in (remember, recall, get_context, forget, list_threads, get_profile):
        tool(fn)

    @server.resource("memlane://profile", name="profile", mime_type="application/json",
                     description="The user's profile (the get_profile tool's answer)")
    def profile() -> str:
        try:
            return json.dumps(memory.get_profile(), ensure_ascii=False)
        except ApiError as failed:
            raise _resource_error(failed) from failed

    @server.resource("memlane://threads/{thread_id}/summary", name="thread-summary", mime_type="text/plain",
                     description="A thread's rolling summary (older turns; the recent ones are left out)")
    def thread_summary(thread_id: str) -> str:
        try:
            return memory.thread_summary(thread_id)
        except ApiError as failed:
            raise _resource_error(failed) from failed

    return server

