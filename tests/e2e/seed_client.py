#!/usr/bin/env python3
"""The seed tutorial's `code_executor` tool as a command-line client: what an agent built on
the fips-agents tutorial does with airlock in place of the code-sandbox sidecar, unchanged.

    SANDBOX_URL=http://127.0.0.1:8000 python3 seed_client.py 'print(6 * 7)'
    echo 'sum(range(10))' | python3 seed_client.py -

It POSTs {"code", "timeout"} to $SANDBOX_URL/execute with httpx and prints the parts the
tool returns to the model: stdout, "Result: ...", "Stderr: ...", "Error: ...", or
"(no output)"; on a non-200 answer, "Sandbox error (HTTP <status>): <body>".
"""

import asyncio
import os
import sys

import httpx

SANDBOX_URL = os.environ.get("SANDBOX_URL", "http://localhost:8000")


async def code_executor(code: str, timeout: float = 10.0) -> str:
    async with httpx.AsyncClient(timeout=30.0) as client:
        response = await client.post(f"{SANDBOX_URL}/execute", json={"code": code, "timeout": timeout})

    if response.status_code != 200:
        return f"Sandbox error (HTTP {response.status_code}): {response.text}"

    result = response.json()
    parts = []
    if result.get("stdout"):
        parts.append(result["stdout"])
    if result.get("result") is not None:
        parts.append(f"Result: {result['result']}")
    if result.get("stderr"):
        parts.append(f"Stderr: {result['stderr']}")
    if result.get("error"):
        parts.append(f"Error: {result['error']}")

    return "\n".join(parts) if parts else "(no output)"


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    code = sys.stdin.read() if argv[1] == "-" else argv[1]
    print(asyncio.run(code_executor(code)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
