"""The project's rule for tests that need a GPU (tests/support/mod.rs): one
that cannot run fails under RUSPARSE_REQUIRE_GPU=1, and otherwise says so
where a person sees it: a SKIPPED line on the terminal (past pytest's
capture) and in $RUSPARSE_SKIP_LOG, which scripts/test.sh summarises."""

import os
import sys

import pytest

REQUIRE_GPU = "RUSPARSE_REQUIRE_GPU"


def skip_or_fail(request, what: str, why: str) -> None:
    """Fails the test when RUSPARSE_REQUIRE_GPU=1, else skips it visibly."""
    if os.environ.get(REQUIRE_GPU, "").strip() == "1":
        pytest.fail(f"{REQUIRE_GPU}=1 but this test found no {what}: {why}", pytrace=False)
    path = os.path.relpath(str(request.node.path), os.path.join(os.path.dirname(__file__), "..", ".."))
    line = (f"SKIPPED {path} {request.node.name}: no {what}: {why} "
            f"(set {REQUIRE_GPU}=1 to fail instead)\n")
    sys.__stderr__.write(line)
    sys.__stderr__.flush()
    log = os.environ.get("RUSPARSE_SKIP_LOG")
    if log:
        with open(log, "a") as f:
            f.write(line)
    pytest.skip(line.strip())
