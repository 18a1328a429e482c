"""`rmspec serve RUN --engine vllm|torch|auto`: which inference engine computes the served rewards.

- `torch` (the default): the model in rmspec's process (rmspec.inference.engine_base.TorchEngine).
- `vllm`: a vLLM server rmspec starts and owns (rmspec.inference.engine_vllm): the model's files are
  linked into a cache folder (RUN/vllm_engine for a run directory, else a temporary folder) with the
  export's pooling files (last token, no activation: rmspec.export.vllm.write_model_folder), and vLLM's
  server starts on it from the environment `--vllm-python` / $RMSPEC_VLLM_PYTHON names (as `rmspec export
  --check`), on 127.0.0.1 at a free port, in float32 on a CPU engine and bfloat16 on a GPU one
  (rmspec.export.check_dtype), eager on a CPU (torch.compile's warm-up took minutes there). rmspec keeps
  encoding (layout, read point, cut), normalisation, routes, limits and tokens, and sends vLLM the token
  ids `rmspec score` would score (a process reward model: its head at every token, `token_classify`, read
  at the step separators by rmspec). A vision-language reward model (Qwen2-VL, Qwen2.5-VL) is the one
  exception to token ids, which carry no pictures: its cache folder is the export's (rmspec.export.vllm_vision:
  the head renamed where vLLM loads it, the run's pixel bounds, the read point probed with a picture), and
  rmspec sends each conversation whole with its decoded pictures as PNG `image_url` parts; vLLM renders it with
  the run's chat template and resizes within those bounds. A conversation past max_length with its visual
  tokens is a 400 (vLLM scores it whole or not at all; torch cuts it as training did). An environment without
  vLLM, a scorer vLLM cannot host (judges, composites, encoders, heads with several outputs, architectures vLLM
  has no pooling model for) and an engine that does not start are exit 2, with the reason and the end of
  vLLM's log.
- `auto`: `vllm` where it is installed and hosts the scorer, else `torch`, saying which and why at start.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmspec.errors import RmspecError

ENGINES = ("torch", "vllm", "auto")
ENGINE_DIR = "vllm_engine"
# Items per call to the engine: the server's whole dynamic batch (Limits.max_batch_items), so vLLM's own
# scheduler sees it at once; --batch-size still sets it.
VLLM_BATCH = 256


class EngineChoice:
    """What `--engine` asked for; called with the loaded scorer, it attaches the engine and says which."""

    def __init__(self, choice: str, python: str | None, log: Callable[[str], None] = print):
        if choice not in ENGINES:
            raise RmspecError(f"--engine {choice}: not one of {', '.join(ENGINES)}", "use --engine torch, vllm or auto")
        self.choice, self.python, self.log = choice, python, log

    @property
    def load_device(self) -> str | None:
        """Where the torch scorer loads: the CPU under --engine vllm (it only encodes; vLLM holds the model)."""
        return "cpu" if self.choice == "vllm" else None

    def __call__(self, scorer: Any, target: str) -> str:
        if self.choice == "torch":
            return "torch"
        try:
            return start(scorer, target, self.python, self.log)
        except RmspecError as exc:
            if self.choice == "vllm":
                raise
            self.log(f"rmspec serve: --engine auto: using torch, because vLLM cannot serve it: {exc.message}")
            return "torch (--engine auto: vLLM cannot serve it)"


def cache_folder(target: str) -> Path:
    """RUN/vllm_engine for a run directory; a fresh temporary folder for a bare model folder."""
    path = Path(target)
    if (path / "spec.yaml").is_file():
        return path / ENGINE_DIR
    return Path(tempfile.mkdtemp(prefix="rmspec-vllm-engine-"))


def start(scorer: Any, target: str, python: str | None, log: Callable[[str], None] = print) -> str:
    """Start vLLM on `scorer`'s model and attach it (scorer.backend); the line that says so. RmspecError
    (exit 2) where it cannot: the reason, and the end of vLLM's log for an engine that did not start."""
    from rmspec.export.vllm import write_model_folder
    from rmspec.export.vllm_hosting import engine_architecture
    from rmspec.inference import scorers
    from rmspec.inference.engine_vllm import vllm_python
    from rmspec.inference.target import resolve_target

    python = vllm_python(python)
    folder = cache_folder(target)
    images = None
    try:
        if scorers.of(scorer).reads_images:  # vLLM reads the pictures itself: the export's folder, linked
            host = vision_host(scorer, target, folder / "model")
            architecture, images = host.architecture, host.images
        else:
            architecture = engine_architecture(Path(target), scorer, per_token=True)
    except RmspecError as exc:
        raise RmspecError(exc.message, f"serve it with --engine torch (the default); {exc.hint}") from None
    if images is None:
        write_model_folder(Path(resolve_target(target).model_dir), folder / "model", link=True)
    line = attach(
        scorer,
        folder / "model",
        architecture,
        python,
        folder / "vllm.log",
        log=log,
        who="rmspec serve: ",
        images=images,
    )
    scorer.batch_size = max(scorer.batch_size, VLLM_BATCH)
    free_weights(scorer)
    sys.stderr.flush()
    return line


def vision_host(scorer: Any, target: str, model: Path) -> Any:
    """A vision-language reward model's engine folder (rmspec.export.vllm_vision: the export's checks and files,
    the weights linked) and its Hosting: vLLM renders each conversation with the run's chat template and
    resizes its pictures within the run's pixel bounds, so rmspec sends conversations, not token ids."""
    from rmspec.export.vllm_hosting import hosting
    from rmspec.export.vllm_vision import vision_folder

    host = vision_folder(Path(target), model, scorer, hosting(Path(target), scorer), link=True)
    scorer.whole = True  # a conversation past max_length with its visual tokens is a 400, not a failed batch
    return host


def attach(
    scorer: Any,
    model: Path,
    architecture: str,
    python: str,
    log_file: Path,
    dtype: str = "auto",
    log: Callable[[str], None] = print,
    who: str = "",
    device: str | None = None,
    images: dict[str, Any] | None = None,
) -> str:
    """Start vLLM's server on the model folder `model` (the engine's cache, or an exported folder: `export
    --check` of a process reward model) and make it `scorer`'s engine (scorer.backend, a VllmEngine): float32
    on a CPU engine, bfloat16 on a GPU one for `auto` (rmspec.export.check_dtype), eager on a CPU; `images`: a
    vision-language model's image settings (rmspec.export.vllm_vision.image_settings), its flags to vLLM. The line
    that says so (`who` starts it); RmspecError (exit 2) with the end of vLLM's log where it does not start."""
    from rmspec.export.check_dtype import choose, cpu_flags, engine_device
    from rmspec.export.vllm import serve_command
    from rmspec.export.vllm_hosting import Hosting, ReadRule
    from rmspec.inference.engine_vllm import VllmEngine, VllmProcess, broken_environment, free_port, tail

    device = device or engine_device(python)  # a caller that asked already (export --check) says
    chosen, why = choose(dtype, device, cpu_flags())
    host = Hosting(
        architecture,
        getattr(getattr(scorer, "layout", None), "kind", "?"),
        int(scorer.max_length),
        ReadRule(""),
        None,
        None,
        False,
        images=images,
    )
    command = serve_command(model, host, python, free_port(), dtype=chosen)
    if device == "cpu":
        command.append("--enforce-eager")  # torch.compile's warm-up costs minutes on a CPU (REFERENCE 19)
    log(f"{who}starting vLLM ({chosen}; {why}): {' '.join(command)}")
    process = VllmProcess(command, log_file)
    try:
        seconds = process.wait_ready()
    except RmspecError as exc:
        process.stop()
        broken = broken_environment(python) if "before it was ready" in exc.message else None
        if broken is not None:  # the reason first, then what vLLM's log ended with
            raise RmspecError(f"{broken.message}\n{tail(process.log)}", broken.hint) from None
        raise
    scorer.backend = VllmEngine(process, str(model), chosen, seconds)
    return f"vllm ({architecture}, {chosen}, {process.url}, started in {seconds:.0f} s, log {log_file})"


def free_weights(scorer: Any) -> None:
    """The torch copy of the weights leaves memory: vLLM computes the head now; rmspec keeps the tokenizer,
    the layout and the config (on the meta device)."""
    model = getattr(scorer, "model", None)
    if model is not None and hasattr(model, "to"):
        scorer.model = model.to("meta")
