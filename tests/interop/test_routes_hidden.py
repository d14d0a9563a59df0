"""Hidden routes fail closed, attacked with raw JSON lines through
the real `mcpctl` binary in front of the reference server: over stdio (`mcpctl proxy PROJECT`),
stateful streamable HTTP and stateless (2026-07-28) HTTP (`mcpctl serve PROJECT`), and a bridged
2026-07-28 client on stdio; in front of one server and of two (names namespaced).

Every spelling a lenient parser (Node's `JSON.parse`, which the reference server uses, or
Python's `json`) could read as a hidden tool, prompt, resource or template must be refused with
-32602 and audited as `rejected`; what is not hidden must keep working, and listings never show a
hidden entry. Raw lines are needed: the SDK cannot send a duplicate key or a lone surrogate.

Runs over stdio (a handshake and a bridged 2026-07-28 client) when `MCP_PROXY` names the mcpctl
binary, over HTTP (stateful and stateless) when `MCP_HTTP_PROXY` does.
"""

from __future__ import annotations

import base64
import json
import os
import queue
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

PROXY = os.environ.get("MCP_PROXY") or os.environ.get("MCP_HTTP_PROXY")
if not PROXY:
    pytest.skip("neither MCP_PROXY nor MCP_HTTP_PROXY is set: this module runs mcpctl projects", allow_module_level=True)

import httpx2 as httpx  # noqa: E402
from conftest import EVENT_TIMEOUT, READ_TIMEOUT, SERVER_JS, ServedProcess  # noqa: E402

KEY_VAR = "INTEROP_AUDIT_KEY"
HIDDEN_DOC = "demo://resource/static/document/architecture.md"
HIDDEN_TEMPLATE = "demo://resource/dynamic/text/{resourceId}"
ROUTES = (
    '{ hidden: [get-env, "trigger-*", args-prompt, "'
    + HIDDEN_DOC
    + '", "'
    + HIDDEN_TEMPLATE
    + '"], passThrough: [echo] }'
)
STATELESS = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": STATELESS,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "routes-hidden", "version": "1.0.0"},
}


def project_yaml(log: Path) -> str:
    servers = "".join(
        f"kind: Server\nmetadata: {{ name: {name} }}\nspec:\n  command: node\n  args: [\"{SERVER_JS}\", stdio]\n---\n"
        for name in ("everything", "other")
    )
    projects = "---\n".join(
        f"""kind: Project
metadata: {{ name: {name} }}
spec:
  servers: [{servers_of}]
  proxyModel: audit
  config:
    audit: {{ path: "{log}.{name}", keyEnv: {KEY_VAR} }}
  routes: {ROUTES}
"""
        for name, servers_of in (("hidden", "everything"), ("hiddenset", "everything, other"))
    )
    return servers + projects


@pytest.fixture
def setup(tmp_path: Path) -> tuple[dict[str, str], Path]:
    log = tmp_path / "audit.log"
    spec = tmp_path / "project.yaml"
    spec.write_text(project_yaml(log), encoding="utf-8")
    env = {**os.environ, "MCPCTL_HOME": str(tmp_path / "home"), KEY_VAR: "interop audit key"}
    done = subprocess.run([PROXY, "apply", "-f", str(spec)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return env, log


# ------------------------------------------------------------------------------------ attacks


def attacks(tool_prefix: str) -> list[tuple[str, str]]:
    """(method, raw params) pairs that some reasonable parser reads as something hidden."""
    t = tool_prefix
    get_env = f"{t}get-env"
    echo = f"{t}echo"
    prompt = f"{t}args-prompt"
    simple = f"{t}simple-prompt"
    calls = [
        f'{{"\\ud800":0,"name":"{get_env}","arguments":{{}}}}',
        f'{{"name":1e999,"name":"{get_env}","arguments":{{}}}}',
        f'{{"name":-1e400,"name":"{get_env}"}}',
        f'{{"name":"\\ud800\\u0041","name":"{get_env}"}}',
        f'{{"name":"{echo}","arguments":{{"message":"x"}},"name":"{get_env}"}}',
        f'{{"name":"{get_env}","name":"{echo}","arguments":{{"message":"x"}}}}',
        f'{{"n\\u0061me":"{get_env}","name":"{echo}","arguments":{{"message":"x"}}}}',
        f'{{"name":"{echo}","arguments":{{"message":"\\udfff"}},"name":"{get_env}"}}',
        f'{{"name":"{echo}","arguments":{{"a":1,"a":2}}}}',
        f'{{ "name" : "{get_env.upper()} " , "arguments" : {{}} }}',
        f'{{"name":"{t}g\\u0065t-env","arguments":{{}}}}',
        f'{{"name":["{get_env}"],"arguments":{{}}}}',
        f'{{"name":"{t}trigger-long-running-operation","arguments":{{"duration":1,"steps":1}}}}',
    ]
    prompts = [
        f'{{"name":"{simple}","name":"{prompt}","arguments":{{"city":"x"}}}}',
        f'{{"\\ud800":1,"name":"{prompt}","arguments":{{"city":"x"}}}}',
        f'{{"name":"{prompt.upper()}","arguments":{{"city":"x"}}}}',
    ]
    completions = [
        f'{{"ref":{{"type":"ref/prompt","name":"{prompt}","name":"{simple}"}},"argument":{{"name":"city","value":""}}}}',
        f'{{"ref":{{"type":"ref/prompt","name":"{prompt}"}},"argument":{{"name":"city","value":"\\ud800"}}}}',
        f'{{"ref":{{"type":"ref/resource","uri":"{HIDDEN_TEMPLATE}"}},"argument":{{"name":"resourceId","value":"1"}}}}',
    ]
    uris = [
        HIDDEN_DOC,
        "demo://resource/static/x/../document/architecture.md",
        "demo://resource/static/x/%2e%2e/document/architecture.md",
        "demo://resource/static/x/%2E%2E/document/./architecture.md",
        "DEMO://Resource/static/document/architecture.md",
        "demo://resource/static/document/%61rchitecture.md",
        "demo://resource/static/document%2Farchitecture.md",
        "demo://resource/static/document%2farchitecture.md",
        "demo://resource/static/document%5Carchitecture.md",
        "demo://resource/static/document/architecture.md%00",
        "demo://resource/dynamic/text/1",
        "demo://resource/dynamic/text/%31",
        "demo://resource/dynamic/blob/../text/2",
    ]
    reads = [json.dumps({"uri": uri}) for uri in uris] + [
        f'{{"uri":"demo://resource/static/document/extension.md","uri":"{HIDDEN_DOC}"}}',
        f'{{"\\ud800":0,"uri":"{HIDDEN_DOC}"}}',
    ]
    return (
        [("tools/call", p) for p in calls]
        + [("prompts/get", p) for p in prompts]
        + [("completion/complete", p) for p in completions]
        + [("resources/read", p) for p in reads]
        + [("resources/subscribe", p) for p in reads[:8]]
        + [("resources/unsubscribe", p) for p in reads[1:3]]
    )


def listen_attacks() -> list[str]:
    return [
        json.dumps({"notifications": {"resourceSubscriptions": [uri]}})
        for uri in (HIDDEN_DOC, "demo://resource/static/x/../document/architecture.md", "demo://resource/dynamic/text/3")
    ] + [f'{{"notifications":{{"resourceSubscriptions":["demo://resource/static/document/extension.md"],"resourceSubscriptions":["{HIDDEN_DOC}"]}}}}']


def with_envelope(params: str) -> str:
    """`params` (raw, an object) with the 2026-07-28 envelope as its first member."""
    assert params.startswith("{")
    rest = params[1:].lstrip()
    return '{"_meta":' + json.dumps(ENVELOPE) + ("" if rest.startswith("}") else ",") + rest


def line(id_: int, method: str, params: str | None) -> str:
    tail = "" if params is None else f',"params":{params}'
    return f'{{"jsonrpc":"2.0","id":{id_},"method":"{method}"{tail}}}'


# ---------------------------------------------------------------------------------- transports


class Stdio:
    """`mcpctl proxy PROJECT`, spoken to in raw lines."""

    def __init__(self, env: dict[str, str], project: str) -> None:
        self.proc = subprocess.Popen(
            [PROXY, "proxy", project],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
            encoding="utf-8",
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self.stderr: list[str] = []

        def pump() -> None:
            assert self.proc.stdout is not None
            for out in self.proc.stdout:
                self.lines.put(out)
            self.lines.put(None)

        def drain() -> None:
            assert self.proc.stderr is not None
            for err in self.proc.stderr:
                self.stderr.append(err)

        threading.Thread(target=pump, daemon=True).start()
        threading.Thread(target=drain, daemon=True).start()

    def send(self, raw: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw + "\n")
        self.proc.stdin.flush()

    def wait_for(self, pred: Any) -> dict[str, Any]:
        for seen in self.seen:
            if pred(seen):
                self.seen.remove(seen)
                return seen
        while True:
            try:
                out = self.lines.get(timeout=EVENT_TIMEOUT)
            except queue.Empty:
                raise AssertionError(f"nothing from mcpctl in time; stderr: {''.join(self.stderr)}") from None
            assert out is not None, f"mcpctl closed stdout; stderr: {''.join(self.stderr)}"
            message = json.loads(out)
            if pred(message):
                return message
            self.seen.append(message)

    def request(self, id_: int, method: str, params: str | None) -> dict[str, Any]:
        self.send(line(id_, method, params))
        return self.wait_for(lambda m: m.get("id") == id_ and "method" not in m)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(20)


class Http:
    """`mcpctl serve PROJECT`, spoken to in raw bodies; stateful (one session) or stateless."""

    def __init__(self, env: dict[str, str], project: str, stateless: bool) -> None:
        self.stateless = stateless
        self.served = ServedProcess([PROXY, "serve", project, "--listen", "127.0.0.1:0"], env,
                                    failure="mcpctl serve did not start")
        assert self.served.url is not None
        self.url = self.served.url
        self.http = httpx.Client(timeout=READ_TIMEOUT)
        self.session: str | None = None

    def post(self, body: str, headers: dict[str, str]) -> httpx.Response:
        base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.session:
            base["Mcp-Session-Id"] = self.session
        return self.http.post(self.url, content=body.encode("utf-8", "surrogatepass"), headers={**base, **headers})

    def initialize(self) -> None:
        init = '{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"routes-hidden","version":"1"}}'
        answered = self.post(line(0, "initialize", init), {})
        assert answered.status_code == 200, answered.text
        self.session = answered.headers["mcp-session-id"]
        done = self.post('{"jsonrpc":"2.0","method":"notifications/initialized"}', {"MCP-Protocol-Version": "2025-11-25"})
        assert done.status_code == 202, done.text

    def request(self, id_: int, method: str, params: str | None) -> dict[str, Any]:
        headers = {"MCP-Protocol-Version": STATELESS if self.stateless else "2025-11-25"}
        if self.stateless:
            headers["Mcp-Method"] = method
            name = mirrored_name(method, params)
            if name is not None:
                headers["Mcp-Name"] = name
        answered = self.post(line(id_, method, params), headers)
        if answered.headers.get("content-type", "").startswith("text/event-stream"):
            for data in answered.text.splitlines():
                if data.startswith("data:") and data[5:].strip():
                    message = json.loads(data[5:])
                    if message.get("id") == id_ and "method" not in message:
                        return message
            raise AssertionError(f"no answer to {id_} on the stream: {answered.text}")
        return answered.json()

    def close(self) -> None:
        self.http.close()
        self.served.stop()


def mirrored_name(method: str, params: str | None) -> str | None:
    """The `Mcp-Name` header a 2026-07-28 client sends: the body's name, as a last-wins parser
    (Python's, like the proxy's header check) reads it."""
    key = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}.get(method)
    if key is None or params is None:
        return None
    try:
        value = json.loads(params).get(key)
    except (ValueError, AttributeError):
        return None
    if not isinstance(value, str):
        return None
    try:
        value.encode("ascii")
        if value == value.strip() and value.isprintable():
            return value
        return "=?base64?" + base64.b64encode(value.encode("ascii")).decode() + "?="
    except UnicodeEncodeError:
        try:
            return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode() + "?="
        except UnicodeEncodeError:
            return None


@contextmanager
def connect(env: dict[str, str], project: str, transport: str) -> Iterator[Any]:
    if transport == "stdio":
        peer: Any = Stdio(env, project)
        try:
            init = '{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"routes-hidden","version":"1"}}'
            assert "result" in peer.request(0, "initialize", init)
            peer.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
            yield peer
        finally:
            peer.close()
    elif transport == "stdio-2026":
        peer = Stdio(env, project)
        try:
            yield peer
        finally:
            peer.close()
    else:
        peer = Http(env, project, stateless=transport == "http-stateless")
        try:
            if transport == "http":
                peer.initialize()
            yield peer
        finally:
            peer.close()


#: Like the rest of the suite: stdio under `MCP_PROXY`, HTTP under `MCP_HTTP_PROXY`.
TRANSPORTS = ["stdio", "stdio-2026"] if os.environ.get("MCP_PROXY") else ["http", "http-stateless"]


def audit_outcomes(log: Path, project: str) -> list[tuple[str, str | None, str]]:
    path = Path(f"{log}.{project}")
    records = [json.loads(r) for r in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []
    return [(r["method"], r.get("target"), r["outcome"]) for r in records]


# --------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("project", ["hidden", "hiddenset"])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_nothing_hidden_is_reached_under_any_spelling(setup: tuple[dict[str, str], Path], transport: str, project: str) -> None:
    env, log = setup
    prefix = "everything__" if project == "hiddenset" else ""
    stateless = transport in ("stdio-2026", "http-stateless")
    dress = with_envelope if stateless else (lambda p: p)
    refused: list[tuple[str, str]] = []
    with connect(env, project, transport) as peer:
        next_id = 1
        # Unhidden things still work, spelled loosely; a URI is forwarded normalised.
        echoed = peer.request(next_id, "tools/call", dress(f'{{ "name" : "{prefix}echo", "arguments" : {{ "message" : "hi" }} }}'))
        assert echoed["result"]["content"][0]["text"] == "Echo: hi", echoed
        next_id += 1
        read = peer.request(next_id, "resources/read", dress('{"uri":"demo://resource/static/x/../document/extension.md"}'))
        assert read["result"]["contents"][0]["uri"] == "demo://resource/static/document/extension.md", read
        next_id += 1
        blob = peer.request(next_id, "resources/read", dress('{"uri":"demo://resource/dynamic/blob/1"}'))
        assert "result" in blob, blob
        next_id += 1

        tried = attacks(prefix) + ([("subscriptions/listen", p) for p in listen_attacks()] if stateless else [])
        answered = []
        for method, params in tried:
            answer = peer.request(next_id, method, dress(params))
            next_id += 1
            if answer.get("error", {}).get("code") == -32602:
                refused.append((method, params))
            else:
                answered.append(f"{method} {params}: {str(answer)[:200]}")
        assert not answered, "not refused:\n" + "\n".join(answered)

        # Listings: no hidden entry, under any spelling.
        tools = peer.request(next_id, "tools/list", dress("{}"))["result"]["tools"]
        names = {tool["name"] for tool in tools}
        assert f"{prefix}echo" in names and f"{prefix}get-env" not in names
        assert not any("trigger-" in name for name in names), names
        prompts = {p["name"] for p in peer.request(next_id + 1, "prompts/list", dress("{}"))["result"]["prompts"]}
        assert f"{prefix}simple-prompt" in prompts and f"{prefix}args-prompt" not in prompts, prompts
        resources = {r["uri"] for r in peer.request(next_id + 2, "resources/list", dress("{}"))["result"]["resources"]}
        assert "demo://resource/static/document/extension.md" in resources and HIDDEN_DOC not in resources
        templates = {
            t["uriTemplate"] for t in peer.request(next_id + 3, "resources/templates/list", dress("{}"))["result"]["resourceTemplates"]
        }
        assert templates == {"demo://resource/dynamic/blob/{resourceId}"}, templates

    outcomes = audit_outcomes(log, project)
    rejected = [o for o in outcomes if o[2] == "rejected"]
    assert len(rejected) == len(refused), (len(rejected), len(refused), outcomes)
    assert {m for m, _, _ in rejected} == {m for m, _ in refused}
    # What was not refused was not about anything hidden.
    for method, target, outcome in outcomes:
        if outcome != "rejected" and target:
            assert "get-env" not in target and "architecture" not in target and "dynamic/text" not in target, (method, target)


@pytest.mark.skipif(not os.environ.get("MCP_PROXY"), reason="a stdio client")
def test_a_bridged_listen_stream_gets_no_hidden_updates(setup: tuple[dict[str, str], Path]) -> None:
    """A 2026-07-28 client on stdio, bridged to the handshake-only reference server: a listen
    stream for an allowed URI is acknowledged with that URI (normalised); one naming a hidden
    URI is refused."""
    env, _ = setup
    with connect(env, "hidden", "stdio-2026") as peer:
        listed = peer.request(1, "tools/list", with_envelope("{}"))
        assert "result" in listed, listed
        allowed = with_envelope(json.dumps({"notifications": {"resourceSubscriptions": ["demo://resource/static/x/../document/extension.md"]}}))
        peer.send(line(2, "subscriptions/listen", allowed))
        ack = peer.wait_for(lambda m: m.get("method") == "notifications/subscriptions/acknowledged")
        assert ack["params"]["notifications"]["resourceSubscriptions"] == ["demo://resource/static/document/extension.md"]
        hidden = with_envelope(json.dumps({"notifications": {"resourceSubscriptions": ["demo://resource/dynamic/text/%31"]}}))
        refused = peer.request(3, "subscriptions/listen", hidden)
        assert refused["error"]["code"] == -32602 and "hidden" in refused["error"]["message"], refused
