"""Per-caller restrictions (`routes.restricted`) with the official Python client: `mcpctl serve
PROJECT` in front of the reference server, two callers at once with bearer tokens from a token
file (`token:alice`, `token:bob`). Alice sees and calls `get-env`; bob does not see it, and his
call is refused as a hidden tool's (-32602) and audited as `rejected`.

Runs when `MCP_HTTP_PROXY` (or `MCP_PROXY`) names the mcpctl binary.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

PROXY = os.environ.get("MCP_HTTP_PROXY") or os.environ.get("MCP_PROXY")
if not PROXY:
    pytest.skip("neither MCP_HTTP_PROXY nor MCP_PROXY is set: this module runs mcpctl serve", allow_module_level=True)

import httpx2 as httpx  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from conftest import READ_TIMEOUT, SERVER_JS, ServedProcess, free_port  # noqa: E402

pytestmark = pytest.mark.anyio

KEY_VAR = "INTEROP_AUDIT_KEY"
ALICE = "token-of-alice-0123456789"
BOB = "token-of-bob-0123456789"


def served(project: str, tokens: Path, env: dict[str, str], errlog: Any) -> ServedProcess:
    """`mcpctl serve PROJECT --tokens FILE` as a child process: its URL; stderr to `errlog`."""
    return ServedProcess([PROXY or "", "serve", project, "--listen", "127.0.0.1:0", "--tokens", str(tokens)], env,
                         errlog, failure="mcpctl serve did not print `listening on URL`")


async def test_two_callers_at_once_see_and_reach_what_they_may(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {ALICE}\nbob {BOB}\n", encoding="utf-8")
    env = {**os.environ, "MCPCTL_HOME": str(tmp_path / "home"), KEY_VAR: "interop audit key"}
    spec = f"""kind: Server
metadata: {{ name: everything }}
spec:
  command: node
  args: ["{SERVER_JS}", stdio]
---
kind: Project
metadata: {{ name: restricted }}
spec:
  servers: [everything]
  proxyModel: audit
  config:
    audit: {{ path: "{log}", keyEnv: {KEY_VAR} }}
  routes:
    restricted:
      - names: [get-env]
        principals: ["token:alice"]
"""
    subprocess.run([PROXY or "", "apply", "-f", "-"], input=spec, text=True, env=env, check=True)
    errfile = tmp_path / "serve.err"
    with open(errfile, "w", encoding="utf-8") as errlog, served("restricted", tokens, env, errlog) as serving:
        assert serving.url is not None

        def client(token: str) -> Client:
            http = httpx.AsyncClient(headers={"authorization": f"Bearer {token}"})
            transport = streamable_http_client(serving.url or "", http_client=http)
            return Client(transport, mode="legacy", read_timeout_seconds=READ_TIMEOUT, cache=None)

        async with client(ALICE) as alice, client(BOB) as bob:
            alice_tools = [t.name for t in (await alice.list_tools()).tools]
            bob_tools = [t.name for t in (await bob.list_tools()).tools]
            assert "get-env" in alice_tools
            assert "get-env" not in bob_tools and "echo" in bob_tools
            assert set(alice_tools) - set(bob_tools) == {"get-env"}
            done = await alice.call_tool("get-env", {})
            assert not done.is_error
            for name in ("get-env", "GET-ENV", " get-env\n"):
                with pytest.raises(Exception) as refused:
                    await bob.call_tool(name, {})
                assert "hidden by this proxy's routes" in str(refused.value), refused.value
            echoed = await bob.call_tool("echo", {"message": "hi"})
            assert not echoed.is_error
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    calls = [(r["principal"], r["target"], r["outcome"]) for r in records if r["method"] == "tools/call"]
    assert ("token:alice", "get-env", "ok") in calls, calls
    assert [c for c in calls if c[0] == "token:bob" and c[2] == "rejected"] == [
        ("token:bob", name, "rejected") for name in ("get-env", "GET-ENV", " get-env\n")
    ], calls


# ------------------------------------------------ JWT callers: prompts, resources, claims, eras

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
from authorization_server import AuthorizationServer  # noqa: E402
from recording_upstream import RecordingUpstream  # noqa: E402

DOC = "demo://resource/static/document/features.md"


@contextmanager
def everything_over_http() -> Iterator[str]:
    """server-everything in streamableHttp mode: its MCP URL. Stopped however the test ends."""
    port = free_port()
    with ServedProcess(["node", str(SERVER_JS), "streamableHttp"], {**os.environ, "PORT": str(port)},
                       ready="listening on port", failure="server-everything (streamableHttp) did not start"):
        yield f"http://127.0.0.1:{port}/mcp"


@contextmanager
def serving(tmp_path: Path, spec: str) -> Iterator[str]:
    """`apply` the project `restricted` in `spec`, then `mcpctl serve` it: its URL."""
    env = {**os.environ, "MCPCTL_HOME": str(tmp_path / "home")}
    subprocess.run([PROXY or "", "apply", "-f", "-"], input=spec, text=True, env=env, check=True)
    with open(tmp_path / "serve.err", "a", encoding="utf-8") as errlog, ServedProcess(
        [PROXY or "", "serve", "restricted", "--listen", "127.0.0.1:0"], env, errlog,
        failure="mcpctl serve did not print `listening on URL`",
    ) as served:
        assert served.url is not None
        yield served.url


def jwt_client(url: str, token: str, mode: str = "legacy") -> Client:
    http = httpx.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=httpx.Timeout(30, read=60))
    return Client(streamable_http_client(url, http_client=http), mode=mode, read_timeout_seconds=READ_TIMEOUT,
                  cache=None)


async def test_prompts_resources_and_claims_for_two_callers_on_an_http_backed_project(
        tmp_path: Path, issuer: AuthorizationServer) -> None:
    with everything_over_http() as upstream:
        spec = f"""kind: Server
metadata: {{ name: everything }}
spec:
  url: "{upstream}"
---
kind: Project
metadata: {{ name: restricted }}
spec:
  servers: [everything]
  auth:
    jwt: {{ issuer: "{issuer.issuer}" }}
  routes:
    restricted:
      - names: [simple-prompt]
        scopes: [prompts:admin]
      - names: ["demo://resource/static/document/*"]
        claims: {{ department: ops }}
      - names: [get-env]
        principals: ["jwt:{quote(issuer.issuer, safe='')}:alice"]
"""
        with serving(tmp_path, spec) as url:
            alice_token = issuer.mint(sub="alice", aud=url, scope="prompts:admin", extra={"department": "ops"})
            # Bob has the scope but not the claim, and is not alice.
            bob_token = issuer.mint(sub="bob", aud=url, scope="prompts:admin other", extra={"department": "sales"})
            carol_token = issuer.mint(sub="carol", aud=url, extra={"department": "ops"})
            async with jwt_client(url, alice_token) as alice, jwt_client(url, bob_token) as bob, \
                    jwt_client(url, carol_token) as carol:
                async def seen(c: Client) -> tuple[set[str], set[str], set[str]]:
                    tools = {t.name for t in (await c.list_tools()).tools}
                    prompts = {p.name for p in (await c.list_prompts()).prompts}
                    resources = {str(r.uri) for r in (await c.list_resources()).resources}
                    return tools, prompts, resources

                (a_tools, a_prompts, a_resources), (b_tools, b_prompts, b_resources), \
                    (c_tools, c_prompts, c_resources) = await seen(alice), await seen(bob), await seen(carol)
                assert "get-env" in a_tools and "get-env" not in b_tools | c_tools
                assert "echo" in a_tools & b_tools & c_tools
                # The prompt needs the scope: alice and bob hold it, carol does not.
                assert "simple-prompt" in a_prompts & b_prompts and "simple-prompt" not in c_prompts
                assert "args-prompt" in c_prompts
                # The documents need `department: ops`: alice and carol.
                assert DOC in a_resources & c_resources and DOC not in b_resources
                assert not [r for r in b_resources if r.startswith("demo://resource/static/document/")]

                # Reaching them: allowed for who may, refused as hidden for everyone else.
                assert (await alice.get_prompt("simple-prompt")).messages
                assert (await carol.read_resource(DOC)).contents
                assert not (await alice.call_tool("get-env", {})).is_error
                with pytest.raises(Exception) as refused:
                    await carol.get_prompt("simple-prompt")
                assert "hidden by this proxy's routes" in str(refused.value), refused.value
                with pytest.raises(Exception) as refused:
                    await bob.read_resource(DOC)
                assert "hidden by this proxy's routes" in str(refused.value), refused.value
                with pytest.raises(Exception) as refused:
                    await bob.call_tool("get-env", {})
                assert "hidden by this proxy's routes" in str(refused.value), refused.value
                # A template-made resource is not restricted.
                assert (await bob.read_resource("demo://resource/dynamic/text/7")).contents


def stateless_list(url: str, token: str, method: str) -> dict[str, Any]:
    """One 2026-07-28 request (no session: the envelope in `_meta`) and its raw result."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "restricted-stateless", "version": "1"},
    }}}
    answer = httpx.post(url, json=body, timeout=30, headers={
        "Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method})
    assert answer.status_code == 200, answer.text
    if answer.headers["content-type"].startswith("text/event-stream"):
        messages = [json.loads(line[5:]) for line in answer.text.splitlines() if line.startswith("data:") and line[5:].strip()]
        [message] = [m for m in messages if m.get("id") == 1]
    else:
        message = answer.json()
    return message["result"]


async def test_a_stateless_client_sees_the_restricted_list_marked_private(
        tmp_path: Path, issuer: AuthorizationServer) -> None:
    # A 2026-07-28 upstream that calls its lists `cacheScope: public`.
    upstream = RecordingUpstream(tools=["add"], modern=True).start()
    try:
        def project(routes: str) -> str:
            return f"""kind: Server
metadata: {{ name: modern }}
spec:
  url: "{upstream.url}"
---
kind: Project
metadata: {{ name: restricted }}
spec:
  servers: [modern]
  auth:
    jwt: {{ issuer: "{issuer.issuer}" }}
{routes}"""

        # Without restrictions: the upstream's own cache hints reach the client.
        with serving(tmp_path / "open", project("")) as url:
            unrestricted = stateless_list(url, issuer.mint(sub="alice", aud=url), "tools/list")
        assert unrestricted["resultType"] == "complete" and unrestricted["cacheScope"] == "public", unrestricted

        restricted = project(f"""  routes:
    restricted:
      - names: [add]
        principals: ["jwt:{quote(issuer.issuer, safe='')}:alice"]
""")
        with serving(tmp_path / "restricted", restricted) as url:
            alice = stateless_list(url, issuer.mint(sub="alice", aud=url), "tools/list")
            bob = stateless_list(url, issuer.mint(sub="bob", aud=url), "tools/list")
    finally:
        upstream.stop()
    assert {t["name"] for t in alice["tools"]} == {"whoami", "add"}
    assert {t["name"] for t in bob["tools"]} == {"whoami"}
    # What each caller is shown depends on who asks: no cache may share it.
    assert alice["cacheScope"] == "private" and bob["cacheScope"] == "private"
    assert alice["resultType"] == bob["resultType"] == "complete"
