"""Start `rmspec serve`: refuse an open bind without a token, load the model, run uvicorn.

uvicorn handles SIGTERM and SIGINT: it stops accepting connections, lets the requests in flight
finish for at most `--shutdown-timeout` seconds (their items are already in the batcher's
queue), then runs the app's shutdown, which drains the batcher within what is left of that time
(what is still queued then gets a 503). The process then exits at once: nothing it holds (model,
worker threads) needs tearing down. Access logs stay off unless asked for; they never carry
bodies or headers.
"""

from __future__ import annotations

import ipaddress
import os
import sys
from pathlib import Path
from typing import Any

from rmspec.errors import RmspecError


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_token(host: str, token_env: str | None) -> str | None:
    """The bearer token from $token_env; required for any address but loopback."""
    if token_env:
        token = os.environ.get(token_env, "")
        if not token.strip():
            raise RmspecError(
                f"--token-env {token_env}: that environment variable is not set or empty",
                f"export {token_env}=<a long random secret> before starting the server",
            )
        return token.strip()
    if not is_loopback(host):
        raise RmspecError(
            f"refusing to listen on {host} without a token: anyone who can reach it could use the model",
            "set a secret in an environment variable and pass its name: --token-env RMSPEC_TOKEN "
            "(clients send Authorization: Bearer <token>), or bind 127.0.0.1",
        )
    return None


def _server_class():
    import contextlib

    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn re-raises SIGTERM once it has drained; we exit 0 instead, having finished cleanly."""

        @contextlib.contextmanager
        def capture_signals(self):
            with super().capture_signals():
                yield
                if hasattr(self, "_captured_signals"):
                    self._captured_signals.clear()

    return Server


def serve(
    target: str,
    *,
    host: str,
    port: int,
    token: str | None,
    limits,
    normalize: bool | None,
    model_name: str | None,
    batch_size: int | None,
    access_log: bool,
    log=print,
    segments: str = "training",
    shutdown_timeout: float = 30.0,
    step_separator: str | None = None,
    ensemble_reduce: tuple[str, float] = ("mean", 1.0),
    engine_choice: Any = None,
) -> None:
    """`engine_choice` (rmspec.export.vllm_engine.EngineChoice; None: torch) attaches the inference engine
    to the loaded scorer; the routes below never know which one runs."""
    import uvicorn

    from rmspec.inference import scorers
    from rmspec.inference.engine import load_scorer
    from rmspec.serve.app import create_app
    from rmspec.serve.service import Service

    engine = load_scorer(target, step_separator=step_separator, device=getattr(engine_choice, "load_device", None))
    from rmspec.inference.ensemble import set_reduce

    set_reduce(engine.model, *ensemble_reduce)  # an ensemble's served reward; refused for other models unless mean
    if normalize and not engine.can_normalize:
        raise RmspecError(
            f"--normalize: {target} has no reward_mean/reward_std in config.json (a positive std)",
            "serve raw rewards (leave out --normalize), or give the run directory rmspec trained, whose model has them",
        )
    which = engine_choice(engine, target) if engine_choice is not None else "torch"
    service = Service(
        engine,
        model_name=model_name or str(target),
        normalize=normalize,
        limits=limits,
        batch_size=batch_size,
        segments=segments,
        aliases=_aliases(target) if model_name is None else (),
    )
    app = create_app(service, token=token, shutdown_timeout=shutdown_timeout)
    norm = (
        ("on" if service.normalize else "off")
        if engine.can_normalize
        else "off (no reward_mean/reward_std in config.json)"
    )
    # Its kind says what matters: normalization; a process model's step separator; a composite's components.
    detail = scorers.of(engine).serving(engine, norm)
    log(f"rmspec serve: {engine.kind} model {Path(target)} (max_length {engine.max_length}, {detail}; engine {which})")
    log(f"listening on http://{host}:{port}" + (" (bearer token required)" if token else ""))
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=access_log,
        # uvicorn annotates it int, but passes it to asyncio.wait_for, which takes seconds as a float.
        timeout_graceful_shutdown=shutdown_timeout,  # type: ignore[arg-type]
        server_header=False,
    )
    server = _server_class()(config)
    backend = getattr(engine, "backend", None)  # an engine rmspec started (vLLM); None: torch in this process
    failed = watch_engine(backend, server, log) if backend is not None else []
    try:
        server.run()
    finally:
        if backend is not None:
            backend.close()
    if not server.started:
        raise RmspecError(
            f"could not listen on {host}:{port} (in use, or not an address of this machine)",
            "pick another --port, or stop the process that holds it",
        )
    log("rmspec serve: stopped" + (" (the inference engine died: exit 1)" if failed else ""))
    sys.stdout.flush()
    sys.stderr.flush()
    # Exit now: interpreter teardown (torch's and the batcher's threads, the model's memory) took
    # 8-23 s after "stopped" while the process still held its port and memory.
    os._exit(1 if failed else 0)


ENGINE_DEATH_GRACE_S = 5.0  # /health and requests answer 503 with the reason this long before the exit


def watch_engine(backend: Any, server: Any, log: Any) -> list[str]:
    """A thread that notices the engine's death (backend.failure()): it logs the reason, lets /health and
    requests answer 503 for ENGINE_DEATH_GRACE_S, then stops the server, which exits 1. The reasons, filled in."""
    import threading
    import time

    failed: list[str] = []

    def watch() -> None:
        while not server.should_exit:
            reason = backend.failure()
            if reason is not None:
                failed.append(reason)
                log(f"rmspec serve: {reason}\nrmspec serve: the inference engine died; stopping (exit 1)")
                time.sleep(ENGINE_DEATH_GRACE_S)
                server.should_exit = True
                return
            time.sleep(0.5)

    threading.Thread(target=watch, name="rmspec-engine-watch", daemon=True).start()
    return failed


def _aliases(target: str) -> tuple[str, ...]:
    """Names a request's `model` may use by default: the target as given, its absolute path and,
    for a run directory, its model folder (what verl sends as `model` is a model path)."""
    path = Path(target)
    names = {str(path), str(path.resolve())}
    if (path / "model").is_dir():
        names |= {str(path / "model"), str((path / "model").resolve())}
    return tuple(sorted(names))
