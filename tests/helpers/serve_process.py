"""A real `rmspec serve` subprocess on 127.0.0.1 and a free port, for the serve tests and benches."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the checkout (this file is tests/helpers/…)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServeProcess:
    def __init__(
        self,
        target: Path | str,
        *args: str,
        env: dict[str, str] | None = None,
        timeout: float = 180.0,
        cwd: Path = REPO,  # another checkout (a bench's baseline) serves its own code
    ):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"rmspec-serve-{self.port}.log"
        self._log = self.log_path.open("w")
        full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1", **(env or {})}
        argv = [sys.executable, "-m", "rmspec", "serve", str(target), "--port", str(self.port), *args]
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, env=full_env, cwd=cwd)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"rmspec serve exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"rmspec serve did not answer /health within {timeout:.0f} s:\n{self.log()}")

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def post(
        self, path: str, body: dict | bytes | str, headers: dict[str, str] | None = None
    ) -> tuple[int, dict, dict]:
        """(status, JSON body, headers) of a plain HTTP POST."""
        if isinstance(body, bytes):
            data = body
        else:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path, data=data, method="POST", headers={"Content-Type": "application/json", **(headers or {})}
        )
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read()), {k.lower(): v for k, v in r.headers.items()}
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"{}"), {k.lower(): v for k, v in err.headers.items()}

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        req = urllib.request.Request(self.url + path, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    def terminate(self) -> int:
        """SIGTERM, then the exit code (uvicorn drains in-flight requests first)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        finally:
            self._log.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self._log.closed:
            self._log.close()
