"""`rmspec serve MODEL_OR_RUN`: the reward model (or judge) over HTTP for RL trainers.

OpenRLHF (`POST /get_reward`), vLLM's pooling API (`POST /classify`, `/pooling`, what verl calls)
and OpenAI chat completions for generative judges. torch/fastapi load inside the command only.
"""

from __future__ import annotations

import click

from rmspec.errors import RmspecError
from rmspec.serve import (  # light: constants only, the arithmetic beside them
    IMAGE_URL_TIMEOUT,
    MAX_BODY_MB,
    MAX_IMAGES,
    MAX_ITEMS,
    MAX_REQUEST_MEGAPIXELS,
)


@click.command("serve")
@click.argument("target", type=click.Path())
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on. Anything but loopback needs --token-env.",
)
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option(
    "--token-env",
    metavar="VAR",
    default=None,
    help="Environment variable holding the bearer token clients must send (Authorization: Bearer ...).",
)
@click.option(
    "--normalize/--no-normalize",
    default=None,
    help="Serve (reward - reward_mean) / reward_std. Default: on when config.json has both.",
)
@click.option(
    "--served-model-name",
    default=None,
    help="The model name in responses and /v1/models; a request's `model` must be it (else 404). "
    "Default: TARGET, also accepted as an absolute path or its model folder.",
)
@click.option(
    "--max-body-mb",
    type=click.FloatRange(min=0.001),
    default=MAX_BODY_MB,
    show_default=True,
    help="Larger request bodies get 413. The default holds an OpenRLHF <= 0.9 rollout batch "
    "(16,384 queries of 2,048 tokens).",
)
@click.option(
    "--max-items",
    type=click.IntRange(min=1),
    default=MAX_ITEMS,
    show_default=True,
    help="Most texts in one request (413 above): 1,024 prompts x 16 samples, OpenRLHF <= 0.9's batch.",
)
@click.option(
    "--max-queue",
    type=click.IntRange(min=1),
    default=MAX_ITEMS,
    show_default=True,
    help="Most texts waiting for the model: a request that would overflow it gets 503 + Retry-After, "
    "one with more texts than it can ever hold gets 413.",
)
@click.option(
    "--max-batch-tokens",
    type=click.IntRange(min=1),
    default=16384,
    show_default=True,
    help="Token budget of one dynamic batch across requests.",
)
@click.option(
    "--max-wait-ms",
    type=click.FloatRange(min=0),
    default=None,
    help="How long the first request of a batch waits for others to join it (default: 5 with the torch engine; "
    "0 with vllm, which batches concurrent requests itself).",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=None,
    help="Sequences per forward pass inside a batch (default: the run's eval.batch_size, or 32).",
)
@click.option(
    "--segments",
    type=click.Choice(["training", "plain"]),
    default="training",
    show_default=True,
    help="Encoder segment ids of a served text: `training` as rmspec trained (prompt 0, response 1 after the "
    "first [SEP]; equals rmspec score), `plain` all 0 (model(**tokenizer(text)), as OpenRLHF's server and vLLM).",
)
@click.option(
    "--shutdown-timeout",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="On SIGTERM/Ctrl-C: seconds to finish in-flight requests before exiting (as vLLM's flag).",
)
@click.option(
    "--step-separator",
    default=None,
    help="Process reward models: the text after every step, as the model was trained with "
    '(default: the one saved in config.json, else TRL\'s "\\n"); e.g. " ;" for a '
    "tokenizer that drops newlines.",
)
@click.option(
    "--ensemble-reduce",
    type=click.Choice(["mean", "min", "mean_minus_std"]),
    default="mean",
    show_default=True,
    help="A model trained with approach.ensemble: the served reward is the members' mean, their minimum, or "
    "mean - coef x std (Coste et al.); every answer also carries reward_std.",
)
@click.option(
    "--ensemble-coef",
    type=click.FloatRange(min=0),
    default=None,
    help="The coef of --ensemble-reduce mean_minus_std (default 1.0); refused with the other reductions.",
)
@click.option(
    "--max-image-mb",
    type=click.FloatRange(min=0.001),
    default=32.0,
    show_default=True,
    help="A vision reward model: one image_url part's encoded bytes; a larger image gets 413.",
)
@click.option(
    "--max-images",
    type=click.IntRange(min=1),
    default=MAX_IMAGES,
    show_default=True,
    help="A model that reads images: most image_url parts in one request; more get 413 before any is read.",
)
@click.option(
    "--max-request-megapixels",
    type=click.FloatRange(min=0.001),
    default=MAX_REQUEST_MEGAPIXELS,
    show_default=True,
    help="A model that reads images: decoded pixels of all of a request's images, read from their headers "
    "before any is decoded; more get 413 (the default holds one 8k x 8k picture).",
)
@click.option(
    "--allow-image-urls",
    is_flag=True,
    help="A vision reward model: fetch http(s) image_url parts (default: only data: URIs; a URL gets 400). "
    "Loopback, link-local, private and multicast addresses stay refused (--allow-image-hosts).",
)
@click.option(
    "--allow-image-hosts",
    "allow_image_hosts",
    metavar="HOSTS",
    multiple=True,
    help="With --allow-image-urls: internal hosts image URLs may reach, as written in the URL (names, IP "
    "addresses, or networks such as 10.0.0.0/8), comma-separated or repeated. Default: none.",
)
@click.option(
    "--image-url-timeout",
    type=click.FloatRange(min=0.001),
    default=IMAGE_URL_TIMEOUT,
    show_default=True,
    help="With --allow-image-urls: seconds one image URL's whole download may take (redirects included).",
)
@click.option(
    "--engine",
    type=click.Choice(["torch", "vllm", "auto"]),
    default="torch",
    show_default=True,
    help="What computes the rewards: `torch` in this process; `vllm` a vLLM server rmspec starts on 127.0.0.1 and "
    "stops with itself (routes, limits, token and normalisation stay rmspec's; exit 2 if it cannot; the server exits "
    "1 if it dies); `auto` vLLM where installed and able to host the model, else torch, saying which at start.",
)
@click.option(
    "--vllm-python",
    metavar="PATH",
    default=None,
    help="--engine vllm/auto: the python of vLLM's environment (default: $RMSPEC_VLLM_PYTHON, else "
    "/opt/rmspec-vllm/bin/python, made by .ci/install_vllm.sh).",
)
@click.option(
    "--access-log", is_flag=True, help="Log one line per request (method, path, status; never bodies or headers)."
)
def serve(
    target: str,
    host: str,
    port: int,
    token_env: str | None,
    normalize: bool | None,
    served_model_name: str | None,
    max_body_mb: float,
    max_items: int,
    max_queue: int,
    max_batch_tokens: int,
    max_wait_ms: float | None,
    batch_size: int | None,
    segments: str,
    shutdown_timeout: float,
    step_separator: str | None,
    ensemble_reduce: str,
    ensemble_coef: float | None,
    max_image_mb: float,
    allow_image_urls: bool,
    max_images: int,
    max_request_megapixels: float,
    allow_image_hosts: tuple[str, ...],
    image_url_timeout: float,
    engine: str,
    vllm_python: str | None,
    access_log: bool,
) -> None:
    """Serve TARGET (a run directory or a reward-model folder) over HTTP."""
    from pathlib import Path

    from rmspec.serve.server import read_token

    if ensemble_coef is not None and ensemble_reduce != "mean_minus_std":
        raise RmspecError(
            f"--ensemble-coef only weighs the std of --ensemble-reduce mean_minus_std (got {ensemble_reduce})",
            "add --ensemble-reduce mean_minus_std, or leave out --ensemble-coef",
        )
    if allow_image_hosts and not allow_image_urls:
        raise RmspecError(
            "--allow-image-hosts names hosts image URLs may reach, but URLs are not fetched",
            "add --allow-image-urls, or leave out --allow-image-hosts",
        )
    token = read_token(host, token_env)  # before loading anything: an open bind without a token never starts
    from rmspec.extras import need, require

    require([need("rmspec serve", "serve")])
    if not Path(target).exists():
        raise RmspecError(
            f"{target}: no such run directory or model folder",
            "give a run directory (runs/NAME) or a folder with config.json and weights",
        )
    from rmspec.cli.extras_check import require_for_target

    require_for_target(target)  # a composite's rules (math-verify): exit 2 before the server starts
    from transformers.utils import logging as transformers_logging

    from rmspec.export.vllm_engine import EngineChoice
    from rmspec.serve.server import serve as run_server
    from rmspec.serve.service import Limits

    transformers_logging.disable_progress_bar()  # its "Loading weights" bar would sit in the server's log

    limits = Limits(
        max_body_bytes=int(max_body_mb * 1024 * 1024),
        max_items=max_items,
        max_queue=max_queue,
        max_batch_tokens=max_batch_tokens,
        max_wait_ms=max_wait_ms,
        max_image_bytes=int(max_image_mb * 1024 * 1024),
        allow_image_urls=allow_image_urls,
        max_images=max_images,
        max_request_pixels=int(max_request_megapixels * 1_000_000),
        image_url_timeout=image_url_timeout,
        allow_image_hosts=allow_image_hosts,
    )
    run_server(
        target,
        host=host,
        port=port,
        token=token,
        limits=limits,
        normalize=normalize,
        model_name=served_model_name,
        batch_size=batch_size,
        access_log=access_log,
        log=lambda message: click.echo(message, err=True),
        segments=segments,
        shutdown_timeout=shutdown_timeout,
        step_separator=step_separator,
        ensemble_reduce=(ensemble_reduce, 1.0 if ensemble_coef is None else ensemble_coef),
        engine_choice=EngineChoice(engine, vllm_python, log=lambda message: click.echo(message, err=True)),
    )
