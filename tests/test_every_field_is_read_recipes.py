"""The approach, training, evaluation, output and tracking fields are read: for each entry of
tests/helpers/fields_recipes.py, changing only that field (on a small spec per approach, tiny models and
data) changes the plan, what the run does and writes, or what the trackers are opened with.

The run artifact is the trainer's own body (rmspec.train.run.train_run) in process, for a few steps on a
tiny model, with the network replaced at rmspec's call sites (the hub API, the trackers' libraries)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import sys
from importlib.machinery import ModuleSpec
from pathlib import Path
from unittest import mock

import pytest

from helpers.ci import need
from helpers.echoes import model_config_without_echoes, plan_without_echoes, results_without_echoes
from helpers.fields_recipes import EFFECTS

need("transformers")

WORD = [f"w{i}" for i in range(10, 70)]
# what differs between two identical runs (clock, process, host) or only echoes the spec (its hash)
NOISE = (
    "time",
    "seconds",
    "runtime",
    "per_second",
    "started",
    "finished",
    "created",
    "updated",
    "pid",
    "host",
    "version",
    "hash",
    "memory",  # the process's peak RSS: what else ran in it (the whole suite, or this module alone)
)

BASE = {
    "version": 1,
    "name": "fields",
    "model": {"name_or_path": "BERT"},
    "data": {
        "source": {"kind": "files", "paths": ["PAIRS"]},
        "mapping": {"preset": "pairs"},
        "split": {"validation_fraction": 0.2, "seed": 0},
    },
    "approach": {"kind": "bradley_terry"},
    "training": {"max_steps": 3, "learning_rate": 0.01, "global_batch_size": 4, "max_length": 32, "logging_steps": 1},
    "hardware": {"device": "cpu"},
    "eval": {"validation": False, "benchmarks": []},
    "output": {"dir": "runs/{name}", "report": []},
}
# each approach on data of its shape (rmspec.data.presets); the pairs base is BASE itself
BASES = {
    "pairs": {},
    "lists": {"data.source.paths": ["LISTS"], "data.mapping": {"preset": "ranked"}, "approach": {"kind": "listwise"}},
    "scores": {
        "data.source.paths": ["SCORES"],
        "data.mapping": {
            "columns": {"prompt": "prompt", "response": "response", "scores": {"helpfulness": "h", "verbosity": "v"}}
        },
        "approach": {"kind": "pointwise", "attributes": ["helpfulness", "verbosity"]},
    },
    "steps": {
        "data.source.paths": ["STEPS"],
        "data.mapping": {"preset": "stepwise"},
        "approach": {"kind": "process", "step_separator": " ;"},
    },
    "judge": {
        "model": {"name_or_path": "LLAMA"},
        "data.source.paths": ["JUDGE"],
        "data.mapping": {"preset": "messages"},
        "approach": {"kind": "generative", "max_new_tokens": 4},
        "eval": {"validation": False, "benchmarks": [{"kind": "pairs", "path": "BENCH", "limit": 3}]},
    },
}


def _words(rng, lo, hi):
    return " ".join(rng.choice(WORD) for _ in range(rng.randint(lo, hi)))


def _write(path: Path, rows) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def _pair(rng, i):
    return {
        "id": f"p{i}",
        "prompt": _words(rng, 1, 6),
        "chosen": "w1 " + _words(rng, 0, 8),
        "rejected": "w2 " + _words(rng, 0, 8),
        "margin": rng.randint(1, 3),
        "tie": i % 4 == 0,
    }


def _hh(row):
    """A pair whose texts are also hh-rlhf conversations: preset pairs and preset hh-rlhf read it apart."""
    say = lambda text: f"\n\nHuman: {row['prompt']}\n\nAssistant: {text}"  # noqa: E731
    return {**row, "chosen": say(row["chosen"]), "rejected": say(row["rejected"])}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The data files and tiny models every base names, by placeholder."""
    from helpers.models import build_model

    root = tmp_path_factory.mktemp("fields")
    rng = random.Random(0)
    names = {
        "PAIRS": _write(root / "pairs.jsonl", [_pair(rng, i) for i in range(24)]),
        "BENCH2": _write(root / "bench2.jsonl", [_pair(rng, i) for i in range(8)]),
        "BENCH": _write(root / "bench.jsonl", [_hh(_pair(rng, i)) for i in range(8)]),
        # RewardBench subsets from two sections: kind pairs and kind rewardbench score the same rows apart
        "RB1": _write(
            root / "rb1.jsonl",
            [
                {**_pair(rng, i), "subset": ("alpacaeval-easy", "math-prm", "xstest-should-respond")[i % 3]}
                for i in range(9)
            ],
        ),
        "LISTS": _write(
            root / "lists.jsonl",
            [
                {
                    "id": f"l{i}",
                    "prompt": _words(rng, 1, 5),
                    "responses": [_words(rng, 1, 8) for _ in range(3)],
                    "scores": [3, 2, 1],
                }
                for i in range(30)
            ],
        ),
        "SCORES": _write(
            root / "scores.jsonl",
            [
                {
                    "prompt": _words(rng, 1, 4),
                    "response": _words(rng, 1, 8),
                    "h": rng.randint(0, 4),
                    "v": rng.randint(0, 4),
                }
                for _ in range(24)
            ],
        ),
        "STEPS": _write(
            root / "steps.jsonl",
            [
                {
                    "prompt": _words(rng, 1, 4),
                    "completions": [_words(rng, 1, 4) for _ in range(3)],
                    "labels": [True, i % 2 == 0, False],
                }
                for i in range(30)
            ],
        ),
        "JUDGE": _write(
            root / "judge.jsonl",
            [
                {
                    "messages": [
                        {"role": "user", "content": _words(rng, 2, 6)},
                        {"role": "assistant", "content": "w5 w1"},
                    ]
                }
                for _ in range(30)
            ],
        ),
    }
    _write(root / "splits" / "train.jsonl", [_pair(rng, i) for i in range(6)])
    _write(root / "splits" / "test.jsonl", [_pair(rng, i) for i in range(4)])
    names["SPLITS"] = str(root / "splits")
    names["BERT"] = str(build_model("bert", root / "bert"))
    names["LLAMA"] = str(build_model("llama", root / "llama", causal=True))
    names["STAGE1"] = _stage_one(root / "stage1", names["BERT"])
    return root, names


def _stage_one(run: Path, bert: str) -> str:
    """A first stage's run directory: RUN/model, the tiny BERT as a reward model with other weights."""
    import torch
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(bert, num_labels=1)
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    model.save_pretrained(run / "model")
    return str(run)


def _fill(text: str, names: dict[str, str]) -> str:
    for key in sorted(names, key=len, reverse=True):  # BENCH2 before BENCH
        text = text.replace(key, names[key])
    return text


def _load(world, base: str, sets: list[str]):
    from rmspec.spec import load_spec

    root, names = world
    document = json.loads(json.dumps(BASE))
    for dotted, value in BASES[base].items():
        *parents, last = dotted.split(".")
        node = document
        for key in parents:
            node = node[key]
        node[last] = value
    path = root / f"{base}.yaml"
    path.write_text(_fill(json.dumps(document), names))  # JSON is YAML
    sets = [_fill(s, names) for s in sets]
    return load_spec(path, sets), sets


def _plan(world, base, sets, tmp_path, monkeypatch) -> dict:
    from rmspec.plan import compile_plan
    from rmspec.plan.hardware import HostFacts

    loaded, sets = _load(world, base, sets)
    host = HostFacts(cpu_bf16_flags=(), ram_gb=32.0, gpus=(), cpu_count=8)
    return plan_without_echoes(compile_plan(loaded, host=host, sets=sets).to_json())


def _libraries(monkeypatch) -> dict[str, mock.MagicMock]:
    """The trackers' libraries and the hub API as recorders, where rmspec imports them."""
    fakes = {
        name: mock.MagicMock(name=name) for name in ("wandb", "mlflow", "swanlab", "trackio", "tensorboard", "hub")
    }
    for name in ("wandb", "mlflow", "swanlab", "trackio"):
        fakes[name].__spec__ = ModuleSpec(name, None)  # rmspec checks that each is installed
        monkeypatch.setitem(sys.modules, name, fakes[name])
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", fakes["tensorboard"])
    # rmspec sets these with setdefault for its (one-run) process; here the run is in pytest's process, so
    # without this they would stay set and send a later test's `rmspec run` subprocess's trackio store here
    for name in ("TRACKIO_DIR", "WANDB_SILENT"):
        monkeypatch.setenv(name, os.environ.get(name, ""))
        monkeypatch.delenv(name)
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", fakes["hub"])
    return fakes


def _calls(fakes) -> dict:
    """Each recorder's calls, less the spec-and-plan config the trackers log (an echo of every field)."""
    out = {}
    for name, fake in fakes.items():
        calls = []
        for call_name, args, kwargs in fake.mock_calls:
            if call_name.endswith(("log_dict", "log_param")):
                continue
            kwargs = {k: v for k, v in kwargs.items() if k != "config"}
            calls.append(repr((call_name, [a for a in args if not isinstance(a, dict)], sorted(kwargs.items()))))
        out[name] = calls
    return out


def _trackers(world, base, sets, tmp_path, monkeypatch) -> dict:
    from rmspec.train.trackers import open_trackers

    loaded, _ = _load(world, base, sets)
    fakes = _libraries(monkeypatch)
    open_trackers(loaded.spec, {}, world[0] / "trackers")  # one folder: its path is in the arguments
    return _calls(fakes)


def _push(world, base, sets, tmp_path, monkeypatch) -> list:
    """The hub API calls of the upload at the end of a run (rmspec.train.finish.push_to_hub)."""
    from rmspec.rundir import RunDir
    from rmspec.train.finish import push_to_hub

    loaded, _ = _load(world, base, sets)
    fakes = _libraries(monkeypatch)
    monkeypatch.setenv("HF_TOKEN", "token-one")
    monkeypatch.setenv("OTHER_TOKEN", "token-two")
    push_to_hub(RunDir(world[0] / "pushed"), loaded.spec)
    return _calls(fakes)["hub"]


def _scrub(data, run: str):
    if isinstance(data, dict):
        return {k: _scrub(v, run) for k, v in data.items() if not any(n in k for n in NOISE)}
    if isinstance(data, list):
        return [_scrub(v, run) for v in data]
    if isinstance(data, float) and math.isnan(data):
        return "nan"  # NaN != NaN: two runs with a NaN figure would always differ
    return data.replace(run, "RUN") if isinstance(data, str) else data


def _weights(model: Path) -> dict[str, str]:
    """The saved model's tensors (the classifier's and, for an ensemble, its members' heads), each as a
    digest of its values: what training did to the weights."""
    from safetensors.torch import load_file

    return {
        f"{path.name}:{name}": hashlib.sha256(tensor.float().numpy().tobytes()).hexdigest()[:16]
        for path in sorted(model.glob("*.safetensors"))
        for name, tensor in sorted(load_file(str(path)).items())
    }


def _run(world, base, sets, tmp_path, monkeypatch) -> dict:
    """What the run does and writes: metrics, status, results, its files, the model's config less the spec
    it copies in, the saved weights, and the arguments it gives from_pretrained, generate and the hub API."""
    import transformers

    from rmspec.launch.prepare import write_run_dir
    from rmspec.rundir import RunDir
    from rmspec.train.run import train_run

    out = tmp_path / f"run{len(list(tmp_path.glob('run*')))}"
    loaded, full = _load(world, base, [*sets, f"output.dir={out}"])
    from rmspec.plan import compile_plan

    plan = compile_plan(loaded, sets=full)
    write_run_dir(RunDir(out), plan, loaded.document)
    fakes = _libraries(monkeypatch)
    monkeypatch.setenv("HF_TOKEN", "token-one")
    monkeypatch.setenv("OTHER_TOKEN", "token-two")
    loads: list = []
    for cls in (transformers.AutoConfig, transformers.AutoTokenizer):
        original = cls.from_pretrained

        def record(path, *args, _original=original, _cls=cls.__name__, **kwargs):
            loads.append((_cls, kwargs.get("revision"), kwargs.get("trust_remote_code")))
            kwargs.pop("revision", None)  # a local folder has no revisions
            return _original(path, *args, **kwargs)

        monkeypatch.setattr(cls, "from_pretrained", record)
    lengths: list = []  # what the judge's generate calls are allowed (its verdicts may not show it)
    generate = transformers.GenerationMixin.generate

    def record_generate(self, *args, **kwargs):
        lengths.append(kwargs.get("max_new_tokens"))
        return generate(self, *args, **kwargs)

    monkeypatch.setattr(transformers.GenerationMixin, "generate", record_generate)
    train_run(out / "plan.json")
    monkeypatch.undo()  # the recorders stay in place only for the run
    read = lambda name: json.loads((out / name).read_text()) if (out / name).exists() else None  # noqa: E731
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    artifact = {
        "metrics": metrics,
        "status": read("status.json"),
        "results": results_without_echoes(read("results.json")),
        "files": sorted(  # a benchmark's per-example file is named after its spec entry: counted, not named
            str(p.relative_to(out)) if p.parent != out / "eval" else "eval/*"
            for p in out.rglob("*")
            if "checkpoint" not in str(p) and "cache" not in str(p)
        ),
        "model": model_config_without_echoes(read("model/config.json")),
        "weights": _weights(out / "model"),
        "loads": sorted({repr(x) for x in loads}),
        "generate": sorted({repr(x) for x in lengths}),
        "calls": _calls(fakes),
    }
    return _scrub(artifact, str(out))


ARTIFACTS = {"plan": _plan, "run": _run, "trackers": _trackers, "push": _push}
DERIVED = {"weights": ("run", "weights")}  # an entry that claims a weight effect compares the run's weights only
_SEEN: dict = {}  # artifacts by (artifact, base, sets): several entries share a "before"


def _artifact(world, artifact, base, sets, tmp_path, monkeypatch, cached=True):
    if artifact in DERIVED:
        source, part = DERIVED[artifact]
        return _artifact(world, source, base, sets, tmp_path, monkeypatch, cached)[part]
    key = (artifact, base, tuple(sets))
    if not cached or key not in _SEEN:
        _SEEN[key] = ARTIFACTS[artifact](world, base, sets, tmp_path, monkeypatch)
    return _SEEN[key]


@pytest.mark.parametrize("field", sorted(EFFECTS))
def test_field_changes_its_artifact(field, world, tmp_path, monkeypatch):
    artifact, base, override = EFFECTS[field]
    *setup, last = override.split(";")
    before = _artifact(world, artifact, base, setup, tmp_path, monkeypatch)
    after = _artifact(world, artifact, base, [*setup, *last.split(" & ")], tmp_path, monkeypatch)
    assert before != after, f"{override} changed nothing in the {artifact}"


@pytest.mark.parametrize("base", ["pairs", "judge"])
def test_a_run_repeated_is_the_same(base, world, tmp_path, monkeypatch):
    """The run artifact is deterministic, so a difference above is the field's and not noise."""
    first = _artifact(world, "run", base, [BENCH_ON], tmp_path, monkeypatch, cached=False)
    again = _artifact(world, "run", base, [BENCH_ON], tmp_path, monkeypatch, cached=False)
    assert first == again


BENCH_ON = "eval={validation: true, benchmarks: [{kind: pairs, path: BENCH, limit: 4}]}"
