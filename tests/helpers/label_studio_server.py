"""A real Label Studio server on 127.0.0.1 for the annotate tests (REFERENCE.md section 6).

The server lives in its own venv (`.venv-label-studio/`, made by `.ci/install_label_studio.sh`;
`RMSPEC_LABEL_STUDIO` may name another `label-studio` executable). Its first start creates the
database (about 45 s on 2 cores), so `initialized_data(folder)` does that once per test session
and `LabelStudioServer.start(copy)` starts from a copy of it (a few seconds). HOME and every Label
Studio path stay inside the temp folder, and the environment is cleaned of the generic names it
reads (USERNAME, PASSWORD, HOST, PORT). The port it really listens on is read from its
"Starting development server at" line (a busy port is silently replaced by the next one). It is
stopped by its PID.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the checkout (this file is tests/helpers/…)
ADMIN_EMAIL = "admin@example.com"
ADMIN_PASSWORD = "rmspec-secret-123"
STARTED = re.compile(r"Starting development server at (http://[\w.]+:(\d+))/?")


def executable() -> Path | None:
    named = os.environ.get("RMSPEC_LABEL_STUDIO")
    path = Path(named) if named else REPO / ".venv-label-studio" / "bin" / "label-studio"
    return path if path.is_file() and os.access(path, os.X_OK) else None


def missing_reason() -> str | None:
    if executable() is None:
        return (
            "Label Studio is not installed in .venv-label-studio/ (run .ci/install_label_studio.sh, "
            "or set RMSPEC_LABEL_STUDIO to a label-studio executable)"
        )
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabelStudioServer:
    def __init__(self, root: Path, token: str):
        self.root = root
        self.token = token
        self.url = ""
        self.proc: subprocess.Popen | None = None
        self.log = root / "server.log"
        self.start_seconds = 0.0

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def env(self) -> dict[str, str]:
        keep = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT") if k in os.environ}
        return {
            **keep,
            "HOME": str(self.root / "home"),
            "LABEL_STUDIO_BASE_DATA_DIR": str(self.data_dir),
            "LATEST_VERSION_CHECK": "false",
            "SENTRY_DSN": "",
            "FRONTEND_SENTRY_DSN": "",
            "COLLECT_ANALYTICS": "false",
            "PYTHONUNBUFFERED": "1",
        }

    def start(self, timeout: float = 480.0) -> LabelStudioServer:  # first start: 45 s idle, 196 s measured at load 13
        exe = executable()
        assert exe is not None, missing_reason()
        (self.root / "home").mkdir(parents=True, exist_ok=True)
        argv = [
            str(exe),
            "start",
            "--no-browser",
            "--internal-host",
            "127.0.0.1",
            "--port",
            str(_free_port()),
            "--data-dir",
            str(self.data_dir),
            "--username",
            ADMIN_EMAIL,
            "--password",
            ADMIN_PASSWORD,
            "--user-token",
            self.token,
            "--enable-legacy-api-token",
        ]
        t0 = time.time()
        handle = self.log.open("w")
        self.proc = subprocess.Popen(
            argv,
            env=self.env(),
            cwd=self.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        found = threading.Event()

        def pump() -> None:  # keep draining the pipe so the server never blocks on a full one
            for line in self.proc.stdout:
                handle.write(line)
                handle.flush()
                match = STARTED.search(line)
                if match and not found.is_set():
                    self.url = match.group(1).replace("0.0.0.0", "127.0.0.1")
                    found.set()
            handle.close()

        threading.Thread(target=pump, daemon=True).start()
        while time.time() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"label-studio exited with {self.proc.returncode}:\n{self.tail()}")
            if found.is_set() and self._healthy():
                self.start_seconds = time.time() - t0
                return self
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"label-studio did not answer /health within {timeout:.0f} s:\n{self.tail()}")

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=2) as resp:
                return b"UP" in resp.read()
        except OSError:
            return False

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:]) if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)  # by PID: this server only
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def initialized_data(folder: Path, token: str) -> tuple[Path, float]:
    """Start once on an empty data dir (database creation, admin user, legacy token), stop; (root, seconds)."""
    server = LabelStudioServer(folder, token).start()
    seconds = server.start_seconds
    server.stop()
    return folder, seconds


def server_from_copy(template: Path, root: Path, token: str) -> LabelStudioServer:
    shutil.copytree(template / "data", root / "data")
    shutil.copytree(template / "home", root / "home", symlinks=True)
    return LabelStudioServer(root, token).start()


def new_token() -> str:
    return secrets.token_hex(20)
