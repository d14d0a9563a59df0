"""Lossless: raw JSON results of every read-only method are equal direct and proxied.

The raw JSON results of every read-only method, direct and proxied, must be equal, except ids and
progress tokens.

No SDK here: two raw JSON-RPC connections over subprocess pipes, one straight to the
reference server (server-everything) and one through `$MCP_PROXY proxy --model passthrough`,
get the same requests in lockstep, and each pair of responses is compared as parsed JSON
(the whole response minus `id`).  Responses are matched by id, so notifications the server
sends on its own (log messages, list_changed) cannot get in the way.  The two connections
use different id styles (numbers direct, strings proxied), so the proxy has to restore the
client's own id.  None of these methods carries a progress token.

The module is skipped without `MCP_PROXY`: there is nothing to compare.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

PROXY = os.environ.get("MCP_PROXY")
if not PROXY:
    pytest.skip(
        "MCP_PROXY is not set: test_lossless.py compares direct and proxied results, so it needs the proxy binary",
        allow_module_level=True,
    )

from conftest import EVENT_TIMEOUT, LOG_DIR, SERVER_JS  # noqa: E402

SERVER_CMD = ["node", str(SERVER_JS), "stdio"]
PROXIED_CMD = [str(PROXY), "proxy", "--model", "passthrough", "--", *SERVER_CMD]

# The same initialize params on both connections.  The client declares sampling, elicitation
# and roots so that the server registers its capability-gated tools too (more of tools/list
# to compare); it then asks for roots, which `RawConnection` answers.
INITIALIZE_PARAMS = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": True}},
    "clientInfo": {"name": "mcp-interop-lossless", "version": "1.0.0"},
}

# Valid arguments for every prompt the server lists (prompts/index.js); a prompt missing
# here fails test_prompts_get_every_prompt, so a new prompt cannot go unchecked.
PROMPT_ARGUMENTS: dict[str, dict[str, str]] = {
    "simple-prompt": {},
    "args-prompt": {"city": "Springfield", "state": "Illinois"},
    "completable-prompt": {"department": "Engineering", "name": "Alice"},
    "resource-prompt": {"resourceType": "Text", "resourceId": "3"},
}


# --------------------------------------------------------------------------- raw connection


@dataclass
class Reply:
    raw: bytes  # the response line exactly as read from the pipe (without the newline)
    msg: dict[str, Any]


@dataclass
class RawConnection:
    """A JSON-RPC peer over a subprocess's stdin/stdout, one JSON message per line."""

    label: str
    cmd: list[str]
    id_of: Callable[[int], Any]
    proc: subprocess.Popen[bytes] = field(init=False)
    replies: dict[str, Reply] = field(default_factory=dict)
    notifications: list[dict[str, Any]] = field(default_factory=list)
    server_requests: list[dict[str, Any]] = field(default_factory=list)
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _write_lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, errlog: Any) -> None:
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog)
        threading.Thread(target=self._read, name=f"read {self.label}", daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            raw = line.rstrip(b"\n")
            msg = json.loads(raw)
            if "method" in msg and "id" in msg:
                self.server_requests.append(msg)
                self._answer_server_request(msg)
            elif "method" in msg:
                self.notifications.append(msg)
            else:
                with self._cond:
                    self.replies[json.dumps(msg.get("id"))] = Reply(raw, msg)
                    self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def _answer_server_request(self, msg: dict[str, Any]) -> None:
        # The server asks for roots after `initialized`; an unanswered request would keep it alive.
        if msg["method"] == "roots/list":
            self.send({"jsonrpc": "2.0", "id": msg["id"], "result": {"roots": []}})
        elif msg["method"] == "ping":
            self.send({"jsonrpc": "2.0", "id": msg["id"], "result": {}})
        else:
            self.send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "Method not found"}})

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        line = json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        with self._write_lock:
            self.proc.stdin.write(line)
            self.proc.stdin.flush()

    def send_request(self, n: int, method: str, params: dict[str, Any] | None) -> Any:
        request_id = self.id_of(n)
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return request_id

    def wait_reply(self, request_id: Any, timeout: float = EVENT_TIMEOUT) -> Reply:
        key = json.dumps(request_id)
        with self._cond:
            done = self._cond.wait_for(lambda: key in self.replies or self.proc.poll() is not None, timeout)
            if key in self.replies:
                return self.replies[key]
        state = "exited" if done else f"no reply within {timeout}s"
        pytest.fail(f"[{self.label}] {state} for request id {request_id!r}; notifications: {self.notifications[-5:]}")

    def close(self) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=EVENT_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@dataclass
class Pair:
    """The direct and the proxied connection, driven in lockstep."""

    direct: RawConnection
    proxied: RawConnection
    counter: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    #: The (direct, proxied) replies to `initialize`.
    init: tuple[Reply, Reply] | None = None

    def exchange(self, method: str, params: dict[str, Any] | None = None) -> tuple[Reply, Reply]:
        """Send the same request on both connections; return (direct, proxied) replies."""
        n = next(self.counter)
        direct_id = self.direct.send_request(n, method, params)
        proxied_id = self.proxied.send_request(n, method, params)
        direct, proxied = self.direct.wait_reply(direct_id), self.proxied.wait_reply(proxied_id)
        assert direct.msg["id"] == direct_id
        assert proxied.msg["id"] == proxied_id, "the proxy must answer with the client's own id"
        return direct, proxied


def without_id(msg: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in msg.items() if k != "id"}


def assert_same(direct: Reply, proxied: Reply, what: str, normalize: Callable[[Any], Any] = lambda m: m) -> None:
    d, p = normalize(without_id(direct.msg)), normalize(without_id(proxied.msg))
    assert p == d, f"{what}: proxied response differs from direct\n  direct:  {direct.raw[:600]!r}\n  proxied: {proxied.raw[:600]!r}"


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    LOG_DIR.mkdir(exist_ok=True)
    with open(LOG_DIR / "server-stderr.log", "a", encoding="utf-8") as errlog:
        errlog.write("\n===== test_lossless.py (direct + proxied, raw JSON-RPC) =====\n")
        errlog.flush()
        direct = RawConnection("direct", SERVER_CMD, id_of=lambda n: 900000 + n)
        proxied = RawConnection("proxied", PROXIED_CMD, id_of=lambda n: f"lossless-{n}")
        direct.start(errlog)
        try:
            proxied.start(errlog)
            try:
                p = Pair(direct, proxied)
                p.init = p.exchange("initialize", INITIALIZE_PARAMS)
                for conn in (direct, proxied):
                    conn.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
                yield p
            finally:
                proxied.close()
        finally:
            direct.close()


# --------------------------------------------------------------------------- nondeterminism

# The server's dynamic resources embed the time they were made (resources/templates.js:
# `created at ${new Date().toLocaleTimeString()}`), so two reads can differ by a second.
# Only that timestamp is masked; everything else in the result is still compared.
_CREATED_AT = re.compile(r"(created at ).*$")


def _mask_text(text: str) -> str:
    return _CREATED_AT.sub(r"\1<time>", text)


def mask_created_at(value: Any) -> Any:
    """Mask the creation time in dynamic resource contents (text, or base64 blob of text)."""
    if isinstance(value, dict):
        out = {k: mask_created_at(v) for k, v in value.items()}
        uri = str(value.get("uri", ""))
        if uri.startswith("demo://resource/dynamic/"):
            if isinstance(value.get("text"), str):
                out["text"] = _mask_text(value["text"])
            if isinstance(value.get("blob"), str):
                decoded = base64.b64decode(value["blob"]).decode("utf-8")
                out["blob"] = "<base64 of>" + _mask_text(decoded)
        return out
    if isinstance(value, list):
        return [mask_created_at(v) for v in value]
    return value


# --------------------------------------------------------------------------- tests


def test_initialize_result_equal(pair: Pair) -> None:
    assert pair.init is not None
    direct, proxied = pair.init
    assert_same(direct, proxied, "initialize")
    result = proxied.msg["result"]
    assert result["protocolVersion"] == "2025-11-25"
    assert result["serverInfo"]["name"] == "mcp-servers/everything"
    assert result["instructions"], "instructions must be relayed"
    assert set(result["capabilities"]) >= {"tools", "prompts", "resources", "logging", "completions", "tasks"}


def test_proxy_keeps_2025_fields_a_typed_model_would_drop(pair: Pair) -> None:
    """`capabilities.tasks` and `tools[].execution` (2025-11-25) must survive the proxy."""
    assert pair.init is not None
    _, init = pair.init
    tasks = init.msg["result"]["capabilities"]["tasks"]
    assert tasks == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    direct, proxied = pair.exchange("tools/list")
    assert_same(direct, proxied, "tools/list")
    tools = {t["name"]: t for t in proxied.msg["result"]["tools"]}
    assert tools["simulate-research-query"]["execution"] == {"taskSupport": "required"}
    assert all("execution" in t for t in tools.values()), "every tool of this server carries execution"


def _pages(pair: Pair, method: str, key: str) -> list[tuple[Reply, Reply]]:
    """All pages of a list method, following nextCursor on both connections."""
    out = []
    params: dict[str, Any] | None = None
    for _ in range(50):
        direct, proxied = pair.exchange(method, params)
        out.append((direct, proxied))
        assert_same(direct, proxied, f"{method} page {len(out)}")
        cursor = proxied.msg.get("result", {}).get("nextCursor")
        if cursor is None:
            assert proxied.msg["result"][key] is not None
            return out
        params = {"cursor": cursor}
    raise AssertionError(f"{method}: pagination never ended")


@pytest.mark.parametrize(
    ("method", "key"),
    [
        ("tools/list", "tools"),
        ("resources/list", "resources"),
        ("resources/templates/list", "resourceTemplates"),
        ("prompts/list", "prompts"),
    ],
)
def test_list_results_equal(pair: Pair, method: str, key: str) -> None:
    pages = _pages(pair, method, key)
    assert sum(len(p.msg["result"][key]) for _, p in pages) > 0


@pytest.mark.parametrize(
    "uri",
    [
        "demo://resource/static/document/instructions.md",
        "demo://resource/static/document/features.md",
        "demo://resource/dynamic/text/3",
        "demo://resource/dynamic/blob/4",
    ],
)
def test_resources_read_equal(pair: Pair, uri: str) -> None:
    direct, proxied = pair.exchange("resources/read", {"uri": uri})
    assert "result" in proxied.msg, proxied.raw
    normalize = mask_created_at if "/dynamic/" in uri else (lambda m: m)
    assert_same(direct, proxied, f"resources/read {uri}", normalize)
    (content,) = proxied.msg["result"]["contents"]
    assert content["uri"] == uri
    assert ("blob" if "/blob/" in uri else "text") in content


def test_every_listed_resource_reads_equal(pair: Pair) -> None:
    """Every resource in resources/list (the server's static documents) reads the same."""
    resources = [r for _, p in _pages(pair, "resources/list", "resources") for r in p.msg["result"]["resources"]]
    assert resources
    for resource in resources:
        direct, proxied = pair.exchange("resources/read", {"uri": resource["uri"]})
        assert_same(direct, proxied, f"resources/read {resource['uri']}", mask_created_at)


def test_prompts_get_every_prompt(pair: Pair) -> None:
    prompts = [p for _, pr in _pages(pair, "prompts/list", "prompts") for p in pr.msg["result"]["prompts"]]
    names = [p["name"] for p in prompts]
    assert set(names) == set(PROMPT_ARGUMENTS), "a prompt without known valid arguments would go unchecked"
    for name in names:
        direct, proxied = pair.exchange("prompts/get", {"name": name, "arguments": PROMPT_ARGUMENTS[name]})
        assert "result" in proxied.msg, proxied.raw
        # resource-prompt embeds a dynamic resource, which carries its creation time.
        assert_same(direct, proxied, f"prompts/get {name}", mask_created_at)
    # The embedded resource case really went through (both kinds).
    direct, proxied = pair.exchange(
        "prompts/get", {"name": "resource-prompt", "arguments": {"resourceType": "Blob", "resourceId": "5"}}
    )
    assert_same(direct, proxied, "prompts/get resource-prompt (Blob)", mask_created_at)


@pytest.mark.parametrize(
    "params",
    [
        pytest.param(
            {"ref": {"type": "ref/prompt", "name": "completable-prompt"}, "argument": {"name": "department", "value": "S"}},
            id="prompt-argument",
        ),
        pytest.param(
            {
                "ref": {"type": "ref/prompt", "name": "completable-prompt"},
                "argument": {"name": "name", "value": ""},
                "context": {"arguments": {"department": "Marketing"}},
            },
            id="prompt-argument-with-context",
        ),
        pytest.param(
            {
                "ref": {"type": "ref/resource", "uri": "demo://resource/dynamic/text/{resourceId}"},
                "argument": {"name": "resourceId", "value": "42"},
            },
            id="resource-template-argument",
        ),
    ],
)
def test_completion_complete_equal(pair: Pair, params: dict[str, Any]) -> None:
    direct, proxied = pair.exchange("completion/complete", params)
    assert_same(direct, proxied, "completion/complete")
    assert proxied.msg["result"]["completion"]["values"], "the completion should suggest something"


def test_ping_equal(pair: Pair) -> None:
    direct, proxied = pair.exchange("ping")
    assert_same(direct, proxied, "ping")
    assert proxied.msg["result"] == {}


def test_logging_set_level_equal(pair: Pair) -> None:
    direct, proxied = pair.exchange("logging/setLevel", {"level": "warning"})
    assert_same(direct, proxied, "logging/setLevel")
    assert proxied.msg["result"] == {}


@pytest.mark.parametrize(
    ("method", "params", "code"),
    [
        pytest.param("interop/no-such-method", {}, -32601, id="unknown-method"),
        pytest.param("resources/read", {"uri": "demo://resource/no-such-thing"}, -32602, id="unknown-resource"),
        pytest.param("prompts/get", {"name": "no-such-prompt"}, -32602, id="unknown-prompt"),
    ],
)
def test_errors_equal(pair: Pair, method: str, params: dict[str, Any], code: int) -> None:
    direct, proxied = pair.exchange(method, params)
    assert "result" not in proxied.msg
    assert_same(direct, proxied, f"{method} error")
    assert proxied.msg["error"]["code"] == code


def test_tools_list_line_is_byte_identical_except_id(pair: Pair) -> None:
    """The proxy splices only the id into the upstream's line: the rest is the same bytes."""
    direct, proxied = pair.exchange("tools/list")
    direct_token = b'"id":' + json.dumps(direct.msg["id"]).encode()
    proxied_token = b'"id":' + json.dumps(proxied.msg["id"]).encode()
    assert direct.raw.count(direct_token) == 1, direct.raw[-200:]
    assert proxied.raw.count(proxied_token) == 1, proxied.raw[-200:]
    d = direct.raw.replace(direct_token, b'"id":<ID>')
    p = proxied.raw.replace(proxied_token, b'"id":<ID>')
    if p != d:
        at = next((i for i, (a, b) in enumerate(zip(d, p, strict=False)) if a != b), min(len(d), len(p)))
        pytest.fail(
            f"tools/list lines differ (besides the id) at byte {at} (lengths {len(d)} vs {len(p)}):\n"
            f"  direct:  {d[max(0, at - 80):at + 80]!r}\n  proxied: {p[max(0, at - 80):at + 80]!r}"
        )
