"""A transparent stdio tap for test_eras.py: `python stdio_tap.py LOGFILE -- CMD ARGS...`.

Starts CMD, relays this process's stdin to CMD's stdin and CMD's stdout to this process's
stdout byte for byte, and appends every line to LOGFILE as one JSON object per line:
`{"dir": "in", "line": "<line sent to CMD>"}` or `{"dir": "out", "line": "<line CMD sent>"}`.
A line is logged *before* it is relayed, so once a peer has seen a line it is in the log.

Put between the proxy and its upstream server, it records what the proxy really sent upstream.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading


def main() -> int:
    log_path, sep, *cmd = sys.argv[1:]
    assert sep == "--" and cmd, "usage: stdio_tap.py LOGFILE -- CMD ARGS..."
    log = open(log_path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
    lock = threading.Lock()
    child = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None

    def record(direction: str, raw: bytes) -> None:
        with lock:
            log.write(json.dumps({"dir": direction, "line": raw.decode("utf-8", "replace").rstrip("\n")}) + "\n")

    def pump_in() -> None:
        try:
            for raw in sys.stdin.buffer:
                record("in", raw)
                child.stdin.write(raw)
                child.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        finally:
            try:
                child.stdin.close()
            except OSError:
                pass

    threading.Thread(target=pump_in, daemon=True).start()
    for raw in child.stdout:
        record("out", raw)
        sys.stdout.buffer.write(raw)
        sys.stdout.buffer.flush()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
