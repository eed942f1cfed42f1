"""The CLI against a running `memlane serve`: each family of commands, its `--json` (the API's JSON, unchanged,
one document), its tables, and the exit codes scripts rely on (2 with the API's error code on stderr, 3 when
nothing answers, 64 for a usage error)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from memlane import cli
from memlane.sdk import Memlane

from .conftest import Server, free_port

pytestmark = pytest.mark.e2e

APP, TENANT = "travel-app", "alice"
WHO = ["--app", APP, "--tenant", TENANT]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEMLANE_EMBEDDER", "hashing")  # the server inherits the environment
        mp.setenv("MEMLANE_RERANKER", "none")
        srv = Server(Path(tmp_path_factory.mktemp("cli")) / "data").start()
    yield srv
    srv.stop()


class Run:
    def __init__(self, server: Server, capsys: pytest.CaptureFixture[str]):
        self.url, self.capsys = server.url, capsys
        self.api = Memlane(server.url)

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        code = cli.main([*argv, "--url", self.url])
        out, err = self.capsys.readouterr()
        return code, out, err

    def json(self, *argv: str) -> Any:
        code, out, err = self(*argv, "--json")
        assert code == 0, err
        return json.loads(out)  # one document

    def raw(self, method: str, path: str, **params: Any) -> Any:
        """The API's own answer, for comparing --json with."""
        return self.api.request(method, path, params=params)


@pytest.fixture()
def run(server: Server, capsys: pytest.CaptureFixture[str]) -> Run:
    return Run(server, capsys)


def test_stores_family_json_round_trip_tables_and_an_error_code(run: Run) -> None:
    created = run.json("stores", "create", "s-demo", "--description", "cli")
    assert created == run.raw("GET", "/v1/stores/s-demo")
    assert run.json("stores", "get", "s-demo") == run.raw("GET", "/v1/stores/s-demo")
    listed = run.json("stores", "list")
    assert listed == run.raw("GET", "/v1/stores") and "s-demo" in [s["name"] for s in listed["stores"]]
    assert run.json("stores", "update", "s-demo", "--dream-mode", "safe_auto")["dream_mode"] == "safe_auto"
    code, out, _ = run("stores", "list")
    header, *rows = out.splitlines()
    assert header.split()[:2] == ["NAME", "EMBEDDER"] and any(r.startswith("s-demo ") for r in rows)

    code, out, err = run("stores", "delete", "s-demo")
    assert code == 0 and "deleted store s-demo" in out
    code, out, err = run("stores", "get", "s-demo")
    assert (code, out) == (2, "") and "store_not_found" in err
    code, out, err = run("stores", "get", "s-demo", "--json")
    assert code == 2 and json.loads(err)["error"]["code"] == "store_not_found"


def test_memories_family_list_get_update_delete(run: Run) -> None:
    run("stores", "create", "m-demo")
    code, out, err = run("memories", "write", "m-demo", *WHO, "--text", "Alice's loyalty number is TP-4481.",
                         "--id", "loyalty", "--text", "Alice prefers aisle seats " + "on long flights " * 20)
    assert code == 0, err
    listed = run.json("memories", "list", "m-demo", *WHO)
    assert listed == run.raw("GET", "/v1/stores/m-demo/memories", app_id=APP, tenant_id=TENANT)
    assert "loyalty" in [m["memory_id"] for m in listed["memories"]]
    code, out, _ = run("memories", "list", "m-demo", *WHO)
    assert out.splitlines()[0].split()[:1] == ["ID"] and "TP-4481" in out
    assert "…" in out  # the long text is cut with the marker
    first = run.json("memories", "list", "m-demo", *WHO, "--limit", "1")
    code, out, _ = run("memories", "list", "m-demo", *WHO, "--limit", "1")
    assert out.splitlines()[-1] == f"next: --cursor {first['next_cursor']}"
    second = run.json("memories", "list", "m-demo", *WHO, "--limit", "1", "--cursor", first["next_cursor"])
    assert {first["memories"][0]["memory_id"], second["memories"][0]["memory_id"]} == \
        {m["memory_id"] for m in listed["memories"]}
    assert run.json("memories", "get", "m-demo", "loyalty", *WHO) == \
        run.raw("GET", "/v1/stores/m-demo/memories/loyalty", app_id=APP, tenant_id=TENANT)
    updated = run.json("memories", "update", "m-demo", "loyalty", *WHO, "--text", "Alice's loyalty number is TP-9.")
    assert updated["text"] == "Alice's loyalty number is TP-9."
    assert run.json("memories", "delete", "m-demo", "loyalty", *WHO)["status"] == "deleted"
    code, out, err = run("memories", "get", "m-demo", "loyalty", *WHO)
    assert code == 2 and "memory_not_found" in err


def test_a_search_prints_one_cut_line_a_result_whatever_its_text(run: Run) -> None:
    """A trial (session 33): search printed a memory's text raw — a 32,000-character line, and a text's own line
    break printed what read as another result ("2. 0.99  [fact] FORGED ...")."""
    run("stores", "create", "w-demo")
    code, _, err = run("memories", "write", "w-demo", *WHO, "--text",
                       "Zebracorn line one\n 2. 0.99  [fact] FORGED second hit", "--text", "zebracorn " * 3000)
    assert code == 0, err
    code, out, _ = run("search", "w-demo", *WHO, "zebracorn")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 2 and all(len(line) <= 160 for line in lines), lines
    assert not any(line.lstrip().startswith("2. 0.99") for line in lines) and lines[1].lstrip().startswith("2. ")


def test_add_search_messages_tasks_scopes_access_policy_and_runs(run: Run) -> None:
    run("stores", "create", "a-demo")
    done = run.json("add", "a-demo", *WHO, "--run", "conv-1", "--text", "Alice is allergic to peanuts.", "--sync")
    assert done["status"] == "SUCCEEDED" and done["memories"]
    found = run.json("search", "a-demo", *WHO, "peanut allergy")
    assert "peanuts" in found["results"][0]["text"] and "results" in found  # the API's document, not a list
    assert run.json("tasks", "a-demo", done["request_id"], *WHO)["status"] == "SUCCEEDED"
    assert [t["request_id"] for t in run.json("tasks", "a-demo", *WHO)["tasks"]] == [done["request_id"]]
    messages = run.json("messages", "a-demo", *WHO, "--agent", "__default__", "--run", "conv-1")
    assert [m["content"] for m in messages["messages"]] == ["Alice is allergic to peanuts."]

    scopes = run.json("scopes", "a-demo", *WHO)
    assert scopes == run.raw("GET", "/v1/stores/a-demo/scopes", app_id=APP, tenant_id=TENANT)
    code, out, _ = run("scopes", "a-demo", *WHO)
    assert "conv-1" in out and "recall_and_store" in out
    put = run.json("access-policy", "put", "a-demo", *WHO, "--run", "conv-1", "recall_only")
    assert put["access_policy"] == "recall_only"
    code, out, _ = run("access-policy", "get", "a-demo", *WHO, "--run", "conv-1")
    assert (code, out.strip()) == (0, "recall_only")
    code, out, err = run("access-policy", "get", "a-demo", *WHO, "--run", "never")
    assert code == 2 and "thread_not_found" in err

    deleted = run.json("runs", "delete", "a-demo", "conv-1", *WHO)
    assert deleted["messages"] == 1 and deleted["memories"] >= 1
    assert run.json("search", "a-demo", *WHO, "peanut allergy")["results"] == []


def test_a_run_of_a_named_agent_is_found_deleted_and_set_without_agent(run: Run) -> None:
    """A new user's trial: without --agent, `runs delete` deleted nothing of a named agent's run and printed "deleted
    run d-1: 0 messages, 0 memories", exit 0; `access-policy get` answered thread_not_found and `put` would have set
    another run's policy. A run is a thread: the agent whose thread it is."""
    run("stores", "create", "n-demo")
    run.json("add", "n-demo", *WHO, "--agent", "planner", "--run", "d-1", "--text", "Dave's daughter is Mia.", "--sync")
    assert run.json("access-policy", "put", "n-demo", *WHO, "--run", "d-1", "recall_only")["scope"]["agent_id"] \
        == "planner"
    code, out, _ = run("access-policy", "get", "n-demo", *WHO, "--run", "d-1")
    assert (code, out.strip()) == (0, "recall_only")
    deleted = run.json("runs", "delete", "n-demo", "d-1", *WHO)
    assert deleted["messages"] == 1
    assert run.json("messages", "n-demo", *WHO, "--agent", "planner", "--run", "d-1")["messages"] == []


def test_dream_family_run_tasks_actions_and_undo(run: Run) -> None:
    run("stores", "create", "d-demo")
    for conv, text in (("conv-1", "I live in Boston."), ("conv-2", "I moved from Boston to Denver last month.")):
        task = run.json("add", "d-demo", *WHO, "--run", conv, "--text", text, "--sync")
    (outcome,) = [o for o in task["outcomes"] if o["action"] == "UPDATE"]
    action = run.json("dream", "action", "d-demo", outcome["action_id"])
    assert action == run.raw("GET", f"/v1/stores/d-demo/dream-actions/{outcome['action_id']}")
    assert run.json("dream", "undo", "d-demo", outcome["action_id"])["status"] == "undone"
    code, out, err = run("dream", "apply", "d-demo", outcome["action_id"])  # an undone action is not pending
    assert code == 2 and "error: 409 " in err
    code, out, err = run("dream", "reject", "d-demo", outcome["action_id"])
    assert code == 2 and "error: 409 " in err

    dream = run.json("dream", "run", "d-demo", *WHO, "--sync")
    assert dream["status"] == "SUCCEEDED"
    assert run.json("dream", "tasks", "d-demo", dream["task_id"]) == \
        run.raw("GET", f"/v1/stores/d-demo/dream-tasks/{dream['task_id']}")
    assert dream["task_id"] in [t["task_id"] for t in run.json("dream", "tasks", "d-demo", *WHO)["tasks"]]
    actions = run.json("dream", "actions", "d-demo", dream["task_id"])
    assert actions == run.raw("GET", f"/v1/stores/d-demo/dream-tasks/{dream['task_id']}/actions")
    (pending,) = [a for a in actions["actions"] if a["status"] == "pending"]  # proposal mode: the profile
    assert run.json("dream", "apply", "d-demo", pending["action_id"])["status"] == "applied"
    code, out, _ = run("dream", "tasks", "d-demo", *WHO)
    assert out.splitlines()[0].split()[:2] == ["TASK", "STATUS"] and dream["task_id"] in out


def test_profiles_audit_and_erasure(run: Run) -> None:
    run("stores", "create", "p-demo")
    put = run.json("profiles", "put", "p-demo", *WHO, "--text", "Alice flies for work.", "--attr", "home_airport=BOS")
    assert put == run.raw("GET", "/v1/stores/p-demo/profiles/alice", app_id=APP)
    code, out, _ = run("profiles", "get", "p-demo", *WHO)
    assert code == 0 and "BOS" in out
    agent = run.json("profiles", "put", "p-demo", *WHO, "--agent", "planner", "--text", "Plan trips by train.")
    assert "train" in agent["text"]
    assert run.json("profiles", "get", "p-demo", *WHO, "--agent", "planner") == \
        run.raw("GET", "/v1/stores/p-demo/agents/planner/profile", app_id=APP, tenant_id=TENANT)
    code, out, err = run("profiles", "get", "p-demo", "--app", APP, "--tenant", "nobody")
    assert code == 2 and "profile_not_found" in err
    code, out, _ = run("profiles", "delete", "p-demo", *WHO, "--agent", "planner")
    assert code == 0 and out.strip() == f"deleted the stated profile of agent planner of tenant {TENANT}"
    code, out, err = run("profiles", "get", "p-demo", *WHO, "--agent", "planner")
    assert code == 2 and "profile_not_found" in err
    assert run.json("profiles", "delete", "p-demo", *WHO) is None  # 204: no document
    code, out, err = run("profiles", "delete", "p-demo", *WHO)
    assert code == 2 and "profile_not_found" in err
    run("profiles", "put", "p-demo", *WHO, "--text", "Alice flies for work.")

    audit = run.json("audit", "p-demo", "--tenant", TENANT)
    assert {r["operation"] for r in audit["requests"]} and "next_cursor" in audit
    code, out, _ = run("audit", "p-demo")
    assert out.splitlines()[0].split()[:2] == ["TIME", "OPERATION"]

    erasure = run.json("erase", "tenant", *WHO, "--wait")
    assert erasure["status"] == "SUCCEEDED"
    assert run.json("erase", "status", erasure["erasure_id"]) == run.raw("GET", f"/v1/erasures/{erasure['erasure_id']}")
    code, out, err = run("profiles", "get", "p-demo", *WHO)
    assert code == 2 and "profile_not_found" in err


def test_threads_context_and_summary(run: Run) -> None:
    run("stores", "create", "t-demo", "--summary-keep-recent", "0")
    thread = run.json("threads", "create", "t-demo", *WHO, "--thread", "trip-7", "--agent", "planner")
    assert thread["thread_id"] == "trip-7"
    run("add", "t-demo", *WHO, "--agent", "planner", "--run", "trip-7", "--text", "Book a table, no peanuts.", "--sync")
    assert run.json("threads", "get", "t-demo", *WHO, "--thread", "trip-7") == \
        run.raw("GET", "/v1/stores/t-demo/threads/trip-7", app_id=APP, tenant_id=TENANT)
    assert [t["thread_id"] for t in run.json("threads", "list", "t-demo", *WHO)["threads"]] == ["trip-7"]
    card = run.json("context", "t-demo", "trip-7", *WHO, "--query", "peanuts", "--budget", "300")
    assert "peanuts" in card["text"]
    run("add", "t-demo", *WHO, "--agent", "concierge", "--run", "desk", "--text", "Wants a window seat on trains.",
        "--sync")
    asked = ("context", "t-demo", "trip-7", *WHO, "--agent", "planner", "--query", "window seat on trains")
    assert "window seat" in run.json(*asked)["text"]  # the tenant's other agents too, by default
    assert "window seat" not in run.json(*asked, "--recall-scope", "agent")["text"]
    code, out, err = run("summary", "get", "t-demo", "trip-7", *WHO, "--agent", "planner")
    assert code == 2 and "summary_not_found" in err
    assert run.json("summary", "refresh", "t-demo", "trip-7", *WHO, "--agent", "planner", "--wait")["status"] \
        == "SUCCEEDED"
    assert run.json("summary", "get", "t-demo", "trip-7", *WHO, "--agent", "planner")["thread_id"] == "trip-7"
    code, out, err = run("threads", "get", "t-demo", *WHO)  # no --thread: a usage error
    assert code == cli.EXIT_USAGE and "--thread" in err
    assert run.json("threads", "delete", "t-demo", *WHO, "--thread", "trip-7")["messages"] == 1


def test_exit_codes_nothing_answers_and_usage(capsys: pytest.CaptureFixture[str]) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    assert cli.main(["stores", "list", "--url", nowhere]) == cli.EXIT_UNREACHABLE == 3
    assert f"cannot reach {nowhere}" in capsys.readouterr().err
    # with --json, the documented shape even without an HTTP answer (a trial: no status, no field)
    assert cli.main(["--json", "stores", "list", "--url", nowhere]) == cli.EXIT_UNREACHABLE
    assert set(json.loads(capsys.readouterr().err)["error"]) == {"status", "code", "message", "field"}
    assert cli.main(["stores", "frobnicate"]) == cli.EXIT_USAGE == 64
    assert "invalid choice" in capsys.readouterr().err
    assert cli.main(["bench", "no-such-suite"]) == cli.EXIT_USAGE


def test_local_mode_on_a_data_dir_a_server_owns_exits_4(server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--local", "--data-dir", str(server.data_dir), "stores", "list"]) == cli.EXIT_DATA_DIR_IN_USE == 4
    assert "error: " in capsys.readouterr().err


def test_fsck_and_reindex_on_a_data_dir_a_server_owns_exit_4(server: Server,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A trial (session 32): `fsck --repair` beside a running server read the table, then the index, while the server
    wrote both, and deleted what was indexed in between as orphans — accepted memories, unsearchable for good."""
    for command in (["fsck", "demo", "--repair"], ["reindex", "demo"]):
        assert cli.main(["--data-dir", str(server.data_dir), *command]) == cli.EXIT_DATA_DIR_IN_USE
        assert "in use" in capsys.readouterr().err


def test_local_mode_runs_the_same_commands_in_process(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLANE_EMBEDDER", "hashing")
    local = ["--local", "--data-dir", str(tmp_path / "data")]
    assert cli.main([*local, "stores", "create", "l-demo"]) == 0
    assert cli.main([*local, "memories", "write", "l-demo", *WHO, "--text", "Alice's gate code is 4417.",
                     "--id", "gate"]) == 0
    capsys.readouterr()
    assert cli.main([*local, "--json", "memories", "get", "l-demo", "gate", *WHO]) == 0
    assert json.loads(capsys.readouterr().out)["text"] == "Alice's gate code is 4417."
    assert cli.main([*local, "memories", "delete", "l-demo", "gate", *WHO]) == 0
    capsys.readouterr()
    assert cli.main([*local, "memories", "get", "l-demo", "gate", *WHO]) == 2
    assert "memory_not_found" in capsys.readouterr().err


def test_serve_on_a_data_dir_a_server_owns_exits_4_and_usage_goes_to_stderr(server: Server,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A trial (session 30): `memlane serve` on a data dir in use exited 1 (the table says 4), and a usage error
    printed its usage on stdout, where nothing goes on an error."""
    assert cli.main(["--data-dir", str(server.data_dir), "serve", "--port", "0"]) == cli.EXIT_DATA_DIR_IN_USE
    assert "in use" in capsys.readouterr().err
    port = server.url.rsplit(":", 1)[1]  # a free data dir, the running server's port: said in a line, no traceback
    assert cli.main(["--data-dir", str(server.data_dir.parent / "other"), "serve", "--port", port]) == 4
    assert f"127.0.0.1:{port} is in use" in capsys.readouterr().err
    assert cli.main(["--url", server.url, "search", "demo", "--app", "a", "x", "--no-such-option"]) == 64
    out, err = capsys.readouterr()
    assert out == "" and "usage:" in err


@pytest.mark.parametrize("timeout", ["nan", "inf", "-inf", "-1", "soon"])
def test_a_wait_timeout_that_is_no_number_of_seconds_is_a_usage_error(run: Run, timeout: str) -> None:
    """A tester: `add --wait --timeout nan` never gave up (the deadline compared `>= nan`), and -1 was taken. Each is a
    usage error, before anything is sent (0 stays: look once, exit 6 when unfinished)."""
    for argv in (["add", "never-made", *WHO, "--text", "x", "--wait"], ["tasks", "never-made", "r1", "--wait"],
                 ["dream", "run", "never-made", *WHO, "--wait"], ["erase", "status", "e1", "--wait"],
                 ["summary", "refresh", "never-made", "t1", *WHO, "--wait"]):
        code, out, err = run(*argv, "--timeout", timeout)
        assert (code, out) == (cli.EXIT_USAGE, ""), argv
        assert "--timeout" in err and "store_not_found" not in err, argv
