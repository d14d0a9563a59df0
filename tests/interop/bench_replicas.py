"""The shared store's per-request cost, measured through the real binary (not a test).

    MCP_HTTP_PROXY=target/debug/mcpctl tests/interop/.venv/bin/python tests/interop/bench_replicas.py

Starts `redis-server` on a free loopback port, one shared HTTP upstream (`echo`), and two
`mcpctl serve` processes of the same project (the `gate` model): one in-process, one with
`--store redis://...`. Opens one session on each (`begin_session` called, so every call runs the
model chain and the store's per-request work: TTL renewal and version check on the way in, the
state comparison on the way out), then times `tools/call echo` over one kept-alive HTTP
connection, alternating between the two, and prints p50 / p90 / p99 of each and the difference. The
client's own time is in both, so compare within one run. It also prints what Redis was asked per
call (`INFO commandstats`).

`BENCH_REDIS_FSYNC` picks the Redis persistence: `always` (the default, as the tests run it:
append-only file, fsync before every write is answered), `everysec` (the append-only file's own
default) or `no` (no append-only file, Redis's default). `BENCH_UPSTREAM_KEEPALIVE=1` makes the
upstream answer HTTP/1.1 and keep its connections (by default it is HTTP/1.0, as in the tests: a
new TCP connection from the proxy for every call, a cost of both paths alike).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import httpx2  # noqa: E402
from test_replicas import REDIS, EchoUpstream, RedisServer, project_yaml  # noqa: E402

from conftest import ServedProcess  # noqa: E402

BINARY = os.environ.get("MCP_HTTP_PROXY") or sys.exit("set MCP_HTTP_PROXY to the mcpctl binary")
RUNS = int(os.environ.get("RUNS", "500"))
FSYNC = os.environ.get("BENCH_REDIS_FSYNC", "always")
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def cpu_ns(pid: int) -> int:
    """On-CPU time of every thread of process `pid` so far (`/proc/PID/task/*/schedstat`), in ns:
    what the machine's load does not inflate, unlike the latencies."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended meanwhile
    return total


class KeptAliveEcho(EchoUpstream):
    """`EchoUpstream` over HTTP/1.1 kept-alive connections (every answer has a Content-Length)."""

    def _handler(self):  # type: ignore[no-untyped-def]
        base = super()._handler()

        class Handler(base):  # type: ignore[valid-type,misc]
            protocol_version = "HTTP/1.1"

        return Handler


class BenchRedis(RedisServer):
    """`RedisServer` with the persistence `BENCH_REDIS_FSYNC` names."""

    def start(self) -> None:
        if FSYNC == "always":
            return super().start()
        persistence = ["--appendonly", "no"] if FSYNC == "no" else ["--appendonly", "yes", "--appendfsync", FSYNC]
        self.served = ServedProcess(
            [REDIS or "", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", *persistence,
             "--dir", str(self.directory), "--logfile", "/dev/stderr"],
            ready="Ready to accept connections",
            failure=f"redis-server did not start on port {self.port}",
        )
        self.proc = self.served.proc


def command_calls(port: int) -> dict[str, int]:
    """How many times each command ran since the last `CONFIG RESETSTAT`."""
    done = subprocess.run(["redis-cli", "-p", str(port), "--raw", "INFO", "commandstats"],
                          capture_output=True, text=True, timeout=10, check=True)
    calls: dict[str, int] = {}
    for line in done.stdout.splitlines():
        if line.startswith("cmdstat_"):
            name, _, stats = line.partition(":")
            calls[name.removeprefix("cmdstat_")] = int(dict(p.split("=", 1) for p in stats.split(","))["calls"])
    return calls


def session(http: httpx2.Client, url: str) -> dict[str, str]:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}
    started = http.post(url, headers=ACCEPT, json=init)
    headers = {**ACCEPT, "mcp-session-id": started.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    begun = http.post(url, headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                                  "params": {"name": "begin_session", "arguments": {"intent": "bench"}}})
    assert begun.status_code == 200, begun.text
    return headers


def main() -> None:
    echo = KeptAliveEcho if os.environ.get("BENCH_UPSTREAM_KEEPALIVE") == "1" else EchoUpstream
    with tempfile.TemporaryDirectory() as tmp, echo() as upstream:
        root = Path(tmp)
        spec = root / "project.yaml"
        spec.write_text(project_yaml("gate", f"echo:  url: {upstream.url}"), encoding="utf-8")
        env = {**os.environ, "MCPCTL_HOME": str(root / "home")}
        subprocess.run([BINARY, "apply", "-f", str(spec)], env=env, check=True, capture_output=True)
        (root / "redis").mkdir()
        redis = BenchRedis(root / "redis")
        serve = [BINARY, "serve", "shared", "--listen", "127.0.0.1:0"]
        # `--store` needs the replicas' shared secret: the store's records are authenticated with it.
        (root / "store.key").write_bytes(os.urandom(32))
        stored = [*serve, "--store", redis.url, "--state-key-file", str(root / "store.key")]
        try:
            with ServedProcess(serve, env) as local, ServedProcess(stored, env) as shared, \
                    httpx2.Client(timeout=30) as http:
                targets = {"in-process": (local.url or "", session(http, local.url or "")),
                           "--store redis": (shared.url or "", session(http, shared.url or ""))}
                times: dict[str, list[float]] = {name: [] for name in targets}
                pids = {"in-process": local.proc.pid, "--store redis": shared.proc.pid}
                redis_pid = redis.proc.pid if redis.proc else 0
                cpu_before = {name: cpu_ns(pid) for name, pid in pids.items()}
                redis_before = cpu_ns(redis_pid)
                subprocess.run(["redis-cli", "-p", str(redis.port), "CONFIG", "RESETSTAT"],
                               capture_output=True, timeout=10, check=True)
                for n in range(RUNS):
                    for name, (url, headers) in targets.items():
                        call = {"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call",
                                "params": {"name": "echo", "arguments": {"n": n}}}
                        started = time.perf_counter()
                        answer = http.post(url, headers=headers, json=call)
                        times[name].append((time.perf_counter() - started) * 1000)
                        assert answer.status_code == 200 and '\\"n\\": ' in answer.text, answer.text
                cpu = {name: (cpu_ns(pid) - cpu_before[name]) / RUNS / 1000 for name, pid in pids.items()}
                redis_cpu = (cpu_ns(redis_pid) - redis_before) / RUNS / 1000
                asked = command_calls(redis.port)
                asked.pop("config|resetstat", None)
                for name, samples in times.items():
                    samples.sort()
                    p90 = samples[int(len(samples) * 0.9)]
                    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
                    print(f"{name:>14}: p50 {statistics.median(samples):.3f} ms, p90 {p90:.3f} ms, "
                          f"p99 {p99:.3f} ms, proxy CPU {cpu[name]:.0f} us per call ({RUNS} calls)")
                delta = statistics.median(times["--store redis"]) - statistics.median(times["in-process"])
                print(f"{'difference':>14}: {delta:+.3f} ms p50, proxy CPU "
                      f"{cpu['--store redis'] - cpu['in-process']:+.0f} us per call, redis-server CPU "
                      f"{redis_cpu:.0f} us per call (persistence: fsync {FSYNC})")
                print(f"{'redis per call':>14}: " + ", ".join(
                    f"{name} {count / RUNS:.2f}" for name, count in sorted(asked.items())))
        finally:
            redis.stop()


if __name__ == "__main__":
    main()
