"""What a Lambda's cold start imports: numpy (0.3-0.5 s here) only where a dream runs its rules engine,
not on the import path every function takes (issue 17, item 5)."""

import subprocess
import sys
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared"


def test_the_shared_lambda_runtime_imports_no_numpy() -> None:
    probe = "import sys, memlane.aws_lambda; print(sorted(m for m in sys.modules if m.split('.')[0] == 'numpy')[:1])"
    out = subprocess.run([sys.executable, "-c", probe], env={"PYTHONPATH": str(SHARED), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", f"numpy imported at cold start ({out})"
