"""Lambda cold start on this machine (docs/benchmarks.md §9): the init of each built function — `import app`
with its two layers, which builds its adapters — timed in fresh `python3.13 -B -I` processes (nothing written:
Lambda's /opt is read-only), in the environment Lambda gives it (see `environment`; `--smoke`: that of
scripts/check-template.sh's smoke import). It builds nothing itself: give it a kept build and the deps layer installed for this machine, e.g.

  KEEP_BUILD=1 scripts/check-template.sh          # prints "build kept in /tmp/memlane-sam-build.XXXX"
  python bench/cold_start.py --build /tmp/memlane-sam-build.XXXX [--build ANOTHER ...] \
      --deps ~/.cache/memlane-check/deps-<hash>-x86_64 --python ~/.pyenv/versions/3.13.0/bin/python3.13 --runs 7

Prints per function and build the median (min-max) wall seconds of `import app` measured inside the process,
its median CPU seconds, and the load average; the row "floor" is what the libraries alone cost (FLOOR).
`--importtime FUNCTION` prints that function's slowest imports instead.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Sequence

FUNCTIONS = ("Ingest", "Search", "Tasks", "Extract", "Dream")

PROBE = """import sys, time
sys.path[:0] = ['.', *sys.argv[1].split(':')]
t0, c0 = time.perf_counter(), time.process_time()
import app
print(time.perf_counter() - t0, time.process_time() - c0)
"""


# The floor under any API function of this design: the libraries every one of them imports (the AWS SDK,
# opensearch-py, Powertools, pydantic), Powertools' objects, one DynamoDB client and one pydantic model.
FLOOR = """import boto3, opensearchpy, requests_aws4auth, pydantic
from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
Logger(); Metrics(namespace="memlane"); Tracer()
boto3.client("dynamodb")
class Floor(pydantic.BaseModel):
    x: int
def lambda_handler(event, context): ...
"""


def environment(function: str, build: Path, smoke: bool = False) -> dict[str, str]:
    """What the function's process sees on Lambda: the runtime's reserved variables (LAMBDA_TASK_ROOT turns
    X-Ray's Lambda mode and Powertools' Tracer on) and template.yaml's Globals, with placeholder resources;
    no AWS call is made (clients are only constructed) and the start-up schema check is off (it is network).
    `smoke`: scripts/check-template.sh's smoke environment instead (no runtime variables, no tenant role),
    the one docs/benchmarks.md §9 measured first."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp"),
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_LAMBDA_FUNCTION_NAME": f"memlane-{function}", "POWERTOOLS_SERVICE_NAME": function.lower(),
        "MEMLANE_MODE": "aws", "MEMLANE_AUTH": "iam", "MEMLANE_TABLE": "dynamodb", "MEMLANE_TABLE_NAME": "memlane-smoke",
        "MEMLANE_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/memlane-smoke",
        "MEMLANE_INDEX": "opensearch", "MEMLANE_OPENSEARCH_URL": "https://search-memlane-smoke-abc123.us-east-1.es.amazonaws.com",
        "MEMLANE_EMBEDDER": "bedrock", "MEMLANE_LLM": "bedrock", "MEMLANE_RERANKER": "bedrock",
        "MEMLANE_DATA_DIR": "/tmp/memlane-smoke", "MEMLANE_SCHEMA_POLICY": "off",
    }
    if smoke:
        return env
    return env | {
        "LAMBDA_TASK_ROOT": str(build / "out" / function), "LAMBDA_RUNTIME_DIR": "/var/runtime",
        "_HANDLER": "app.lambda_handler", "AWS_EXECUTION_ENV": "AWS_Lambda_python3.13",
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024",
        "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand", "AWS_SESSION_TOKEN": "testing",
        "AWS_XRAY_DAEMON_ADDRESS": "169.254.79.129:2000", "AWS_XRAY_CONTEXT_MISSING": "LOG_ERROR",
        "TZ": ":UTC", "LANG": "en_US.UTF-8",
        "MEMLANE_TENANT_ROLE_ARN": "arn:aws:iam::123456789012:role/memlane-tenant-data",
        "MEMLANE_LOG_LEVEL": "INFO", "POWERTOOLS_METRICS_NAMESPACE": "memlane",
    }


def run_once(python: str, build: Path, deps: Path, function: str, extra: Sequence[str] = (),
             smoke: bool = False) -> tuple[float, float, float, str]:
    """One fresh process: (`import app` wall seconds, its CPU seconds, the whole process's wall seconds, stderr).
    `function` "floor": FLOOR as the app module, in the Search function's environment."""
    layers = f"{build / 'out' / 'MemlaneLayer' / 'python'}:{deps / 'python'}"
    probe = PROBE
    if function == "floor":
        function = "Search"
        probe = PROBE.replace("import app", f"import types; app = types.ModuleType('app'); exec({FLOOR!r}, vars(app))")
    t0 = time.perf_counter()
    done = subprocess.run([python, "-B", "-I", *extra, "-c", probe, layers], cwd=build / "out" / function,
                          env=environment(function, build, smoke), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{function} failed to import:\n{done.stderr[-3000:]}")
    init, cpu = (float(x) for x in done.stdout.strip().splitlines()[-1].split())
    return init, cpu, wall, done.stderr


def importtime(python: str, build: Path, deps: Path, function: str, top: int, smoke: bool) -> None:
    _, _, _, err = run_once(python, build, deps, function, ["-X", "importtime"], smoke)
    rows = []
    for line in err.splitlines():
        if line.startswith("import time:") and "|" in line and "self [us]" not in line:
            self_us, cumulative, name = (part.strip() for part in line[len("import time:"):].split("|"))
            rows.append((int(cumulative), int(self_us), name))
    for cumulative, self_us, name in sorted(rows, reverse=True)[:top]:
        print(f"{cumulative / 1e3:8.1f} ms cumulative {self_us / 1e3:7.1f} ms self  {name}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", type=Path, action="append", required=True,
                   help="a kept sam build (its out/ holds the functions); several: compared side by side, interleaved")
    p.add_argument("--deps", type=Path, required=True, help="the deps layer installed for this machine")
    p.add_argument("--python", default="python3.13")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--functions", nargs="*", default=[*FUNCTIONS, "floor"],
                   help="built functions to time, and 'floor' (the libraries alone: see FLOOR)")
    p.add_argument("--importtime", metavar="FUNCTION", help="print this function's slowest imports (first --build)")
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--smoke", action="store_true", help="check-template.sh's smoke environment (see environment)")
    a = p.parse_args()
    if a.importtime:
        importtime(a.python, a.build[0], a.deps, a.importtime, a.top, a.smoke)
        return
    size = lambda path: subprocess.run(["du", "-sh", str(path)], capture_output=True, text=True).stdout.split()[0]
    print(f"deps layer: {size(a.deps / 'python')} ({a.deps})")
    for build in a.build:
        print(f"memlane layer: {size(build / 'out' / 'MemlaneLayer' / 'python')} ({build})")
    print(f"environment: {'check-template smoke' if a.smoke else 'Lambda runtime + template.yaml Globals'}; "
          f"median of {a.runs} fresh processes; seconds of `import app`: wall (min-max) and CPU")
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    # CPU seconds beside wall seconds: on a shared machine the wall time carries the other processes' load.
    print(f"{'function':<10}" + "".join(f" | {b.name[-24:]:>24} {'CPU':>6}" for b in a.build))
    for function in a.functions:
        runs: dict[Path, list[tuple[float, float, float, str]]] = {b: [] for b in a.build}
        for _ in range(a.runs):
            for build in a.build:  # interleaved: the builds share whatever load the machine has
                runs[build].append(run_once(a.python, build, a.deps, function, smoke=a.smoke))
        row = f"{function:<10}"
        for build in a.build:
            wall = [r[0] for r in runs[build]]
            cell = f"{statistics.median(wall):.3f} ({min(wall):.2f}-{max(wall):.2f})"
            row += f" | {cell:>24} {statistics.median(r[1] for r in runs[build]):>6.3f}"
        print(row, flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
