"""The admin web UI in headless Chromium (Debian's `chromium` + `chromium-driver`, driven by
selenium through /usr/bin/chromedriver, so nothing downloads a driver): the real `mcpctl serve
--admin-listen` in front of the reference server, with an official Python SDK client holding a
session over HTTP. Log in, see the servers, search a tool, call `echo` through its form and see
the answer, end the client's session; and in front of a server whose tools' input schemas are
odd (`"enum": "fast"`, properties that are a list), the Tools view still draws every tool.
Screenshots go to a temporary directory, or to
docs/screenshots/ (the guide's admin page shows them) with `UPDATE_SCREENSHOTS=1`.

It runs once, in the suite's direct pass: the proxy modes of the suite (`MCP_PROXY`,
`MCP_HTTP_PROXY`) do not change what it tests.

Finds `mcpctl` in the workspace's target directory (`scripts/cargo-target-dir`, or
`$MCPCTL_BIN`); skips when it was not built, or when Chromium is not installed.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import anyio
import pytest

from conftest import SERVER_JS

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SHOTS = (ROOT / "docs" / "screenshots" if os.environ.get("UPDATE_SCREENSHOTS") == "1"
         else Path(tempfile.mkdtemp(prefix="mcpctl-ui-shots-")))
TOKEN = "ui-admin-token-0123456789abcdef"


def mcpctl_binary() -> Path | None:
    if os.environ.get("MCPCTL_BIN"):
        return Path(os.environ["MCPCTL_BIN"])
    try:
        target = subprocess.run([str(ROOT / "scripts" / "cargo-target-dir")], capture_output=True,
                                text=True, check=True, timeout=120).stdout.strip()
    except (subprocess.SubprocessError, OSError):
        return None
    binary = Path(target) / "debug" / "mcpctl"
    return binary if binary.exists() else None


BINARY = mcpctl_binary()
pytestmark = [
    pytest.mark.skipif(BINARY is None, reason="mcpctl is not built (cargo build -p mcpctl)"),
    pytest.mark.skipif(not Path("/usr/bin/chromedriver").exists(), reason="chromium-driver is not installed"),
    pytest.mark.skipif(bool(os.environ.get("MCP_PROXY") or os.environ.get("MCP_HTTP_PROXY")),
                       reason="runs once, in the suite's direct pass"),
]


@pytest.fixture
def served():
    yield from serving("node", str(SERVER_JS), "stdio")


def serving(*upstream: str):
    """`mcpctl serve` with the admin listener in front of `upstream`: yields the URLs."""
    home = tempfile.mkdtemp(prefix="mcpctl-ui-")
    tokens = Path(home) / "admin-tokens"
    tokens.write_text(f"ops {TOKEN}\n")
    proc = subprocess.Popen(
        [str(BINARY), "serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
         "--admin-tokens", str(tokens), "--model", "passthrough", "--log", "info",
         "--", *upstream],
        env={**os.environ, "MCPCTL_HOME": home}, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    urls: dict[str, str] = {}
    ready = threading.Event()

    def read():
        assert proc.stderr is not None
        for line in proc.stderr:
            if m := re.match(r"admin listening on (\S+)", line):
                urls["admin"] = m.group(1).rstrip("/")
            elif m := re.match(r"listening on (\S+)", line):
                urls["mcp"] = m.group(1)
            if len(urls) == 2:
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert ready.wait(30), "mcpctl serve did not start"
        yield urls
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def hold_session(url: str, started: threading.Event, done: threading.Event, outcome: dict):
    """An official SDK client (2025-11-25, so it holds a session) until `done`, then one more
    request, whose outcome is recorded."""
    from contextlib import asynccontextmanager

    import mcp_types as types
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def on_response(response) -> None:
        if "mcp-session-id" in response.headers:
            outcome.setdefault("id", response.headers["mcp-session-id"])

    http = create_mcp_http_client()
    http.event_hooks = {"request": [], "response": [on_response]}

    @asynccontextmanager
    async def transport():
        async with http, streamable_http_client(url, http_client=http) as (read_stream, write_stream):
            yield read_stream, write_stream

    async def run():
        client = Client(transport(), mode="legacy", read_timeout_seconds=20, cache=None,
                        client_info=types.Implementation(name="ui-test-client", version="1.0.0"))
        async with client:
            await client.list_tools()
            started.set()
            await anyio.to_thread.run_sync(done.wait)
            try:
                with anyio.fail_after(20):
                    await client.list_tools()
                outcome["after"] = "answered"
            except BaseException as err:  # the session was ended: the client gets 404
                outcome["after"] = repr(err)

    try:
        anyio.run(run)
    except BaseException as err:
        outcome.setdefault("after", repr(err))
    finally:
        started.set()


def test_admin_ui_end_to_end(served, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    SHOTS.mkdir(parents=True, exist_ok=True)
    wait = WebDriverWait(browser, 60)
    started, done, outcome = threading.Event(), threading.Event(), {}
    client = threading.Thread(target=hold_session, args=(served["mcp"], started, done, outcome), daemon=True)
    client.start()
    try:
        assert started.wait(60) and outcome.get("id"), f"the SDK client did not start: {outcome}"

        # Logging in without a token shows the form; a wrong token says so.
        browser.get(served["admin"] + "/ui/")
        wait.until(EC.visibility_of_element_located((By.ID, "login")))
        browser.find_element(By.ID, "token").send_keys("wrong")
        browser.find_element(By.ID, "login-button").click()
        wait.until(EC.visibility_of_element_located((By.ID, "login-failed")))
        browser.save_screenshot(str(SHOTS / "admin-login.png"))

        # `?token=` once: the cookie is set and the token leaves the address.
        browser.get(served["admin"] + "/ui/?token=" + TOKEN)
        wait.until(lambda d: "token=" not in d.current_url)
        cookie = browser.get_cookie("mcpctl_admin")
        assert cookie and cookie["httpOnly"] and cookie.get("sameSite") == "Strict"
        wait.until(EC.text_to_be_present_in_element((By.ID, "server-rows"), "running"))
        assert "node" in browser.find_element(By.ID, "server-rows").text
        browser.save_screenshot(str(SHOTS / "admin-servers.png"))

        # Tools: search, then call echo through its generated form.
        browser.find_element(By.CSS_SELECTOR, 'a[data-view="tools"]').click()
        wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, 'div.tool[data-tool="echo"]')))
        search = browser.find_element(By.ID, "tool-search")
        search.send_keys("echo")
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "div.tool")) >= 1 and all(
            "echo" in (t.text.lower()) for t in d.find_elements(By.CSS_SELECTOR, "div.tool")))
        card = browser.find_element(By.CSS_SELECTOR, 'div.tool[data-tool="echo"]')
        card.find_element(By.CSS_SELECTOR, 'input[name="message"]').send_keys("hello from chromium")
        card.find_element(By.CSS_SELECTOR, 'button[type="submit"]').click()
        wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, 'div.tool[data-tool="echo"] pre.result'),
                                                    "hello from chromium"))
        browser.save_screenshot(str(SHOTS / "admin-tools.png"))

        # Sessions: the SDK client's session is listed (by its log digest, never its id);
        # End removes it.
        browser.find_element(By.CSS_SELECTOR, 'a[data-view="sessions"]').click()
        digest = "http-" + hashlib.sha256(outcome["id"].encode()).hexdigest()[:24]
        row = f'tr[data-session="{digest}"]'
        wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, row)))
        browser.save_screenshot(str(SHOTS / "admin-sessions.png"))
        browser.find_element(By.CSS_SELECTOR, row + " button.end").click()
        wait.until(EC.invisibility_of_element_located((By.CSS_SELECTOR, row)))

        # Logs: the live tail shows the proxy's lines.
        browser.find_element(By.CSS_SELECTOR, 'a[data-view="logs"]').click()
        wait.until(EC.text_to_be_present_in_element((By.ID, "log-lines"), "started upstream"))
        browser.save_screenshot(str(SHOTS / "admin-logs.png"))
    finally:
        done.set()
        client.join(60)
    assert outcome.get("after") != "answered", f"the ended session still answered: {outcome}"


#: Tools whose input schemas hold other JSON types where an object or array is expected.
ODD_SERVER = HERE / "servers" / "odd_schema_server.py"
ODD_TOOLS = {"fast_mode", "listed_properties", "string_property", "numbered_type", "null_properties", "plain"}


@pytest.fixture
def served_odd():
    yield from serving(sys.executable, str(ODD_SERVER))


def test_the_tools_view_draws_every_tool_whatever_its_schema(served_odd, browser):
    """One upstream tool with `"enum": "fast"` (and others as odd) once blanked the whole Tools
    view: every tool gets its card, what can be drawn is, the rest is a raw JSON field."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 60)
    browser.get(served_odd["admin"] + "/ui/?token=" + TOKEN)
    wait.until(lambda d: "token=" not in d.current_url)
    browser.find_element(By.CSS_SELECTOR, 'a[data-view="tools"]').click()
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "div.tool")) >= len(ODD_TOOLS)
               or d.find_element(By.ID, "status").text)
    drawn = {card.get_attribute("data-tool") for card in browser.find_elements(By.CSS_SELECTOR, "div.tool")}
    assert drawn == ODD_TOOLS, f"drawn {drawn}; status: {browser.find_element(By.ID, 'status').text!r}"
    assert browser.find_element(By.ID, "status").text == ""

    def card(name: str):
        return browser.find_element(By.CSS_SELECTOR, f'div.tool[data-tool="{name}"]')

    def call(name: str, expected: str) -> None:
        card(name).find_element(By.CSS_SELECTOR, 'button[type="submit"]').click()
        wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, f'div.tool[data-tool="{name}"] pre.result'),
                                                    expected))

    # The string enum is the field's hint, and the field works.
    mode = card("fast_mode").find_element(By.CSS_SELECTOR, 'input[name="mode"]')
    assert mode.get_attribute("placeholder") == "fast"
    mode.send_keys("fast")
    call("fast_mode", 'fast_mode got {"mode": "fast"}')
    # Properties that cannot be drawn as fields: one raw JSON field for the arguments.
    raw = card("listed_properties").find_element(By.CSS_SELECTOR, 'textarea[data-type="raw"]')
    raw.send_keys('{"a": 1}')
    call("listed_properties", 'listed_properties got {"a": 1}')
    # A property that is not an object is a JSON field of its own.
    card("string_property").find_element(By.CSS_SELECTOR, 'textarea[name="x"]').send_keys('"text"')
    call("string_property", 'string_property got {"x": "text"}')
    card("numbered_type").find_element(By.CSS_SELECTOR, 'textarea[name="n"]')
    call("plain", "plain got {}")
