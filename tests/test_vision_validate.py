"""`rmspec validate` refuses image data for an approach that does not train on images, at the field that
says the data has images (a mapped images column, an image preset, data.images, model.vision's pixel
bounds), exit 2, with the approach's own reason (asked of its declaration, not a list of kinds here) and a
hint naming what to write; an approach that trains on images validates. validate stays torch-free."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rmspec import approaches
from rmspec.errors import SpecError
from rmspec.spec import load_spec

REPO = Path(__file__).resolve().parents[1]
MODEL = "Qwen/Qwen2-VL-2B-Instruct"  # validate reads no weights; a decoder name every approach accepts


def write(tmp_path: Path, data: str, approach: str, model_extra: str = "") -> Path:
    """A spec whose lines are exactly these (the tests read line numbers from it)."""
    text = f"version: 1\nname: vl\nmodel:\n  name_or_path: {MODEL}\n{model_extra}data:\n{data}approach:\n{approach}"
    path = tmp_path / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def line_of(path: Path, needle: str) -> int:
    """The first line holding `needle` (a whole line when it ends with ':')."""
    lines = path.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if (line == needle if needle.endswith(":") else needle in line))


LISTWISE_IMAGES = (
    "  source: {kind: files, paths: [lists.jsonl]}\n"
    "  mapping:\n"
    "    columns:\n"
    "      prompt: question\n"
    "      responses: answers\n"
    "      response_scores: scores\n"
    "      images: pictures\n"
)


def declared_refusal(kind: str, **options) -> str | None:
    """The approach declaration's own answer: what validate must repeat (independent of the rule)."""
    section = approaches.get(kind).section.model_construct(kind=kind, **options)
    return approaches.get(kind).image_refusal(section)


def test_listwise_with_an_images_column_is_refused_where_the_column_is_mapped(tmp_path, cli):
    why = declared_refusal("listwise")
    assert why is not None  # listwise stays refused (if it learns images, pick another approach here)
    spec = write(tmp_path, LISTWISE_IMAGES, "  kind: listwise\n")
    result = cli("validate", spec)
    assert result.code == 2, result.out + result.err
    err = " ".join(result.err.split())  # rich wraps long lines
    assert f"{spec}:{line_of(spec, 'images: pictures')}:" in err
    assert "data.mapping.columns.images" in err
    assert f"the data has images (data.mapping.columns.images: 'pictures'), but {why}" in err
    # the hint names what to write: the kinds whose defaults read images, asked of the registry
    readers = [k for k in approaches.names() if declared_refusal(k) is None]
    assert readers and all(k in err for k in readers)
    assert "approach kind:" in err and "remove data.mapping.columns.images" in err
    assert "Traceback" not in result.err


def test_every_field_that_says_images_is_located(tmp_path):
    spec = write(
        tmp_path,
        LISTWISE_IMAGES + "  images:\n    allow_urls: true\n",
        "  kind: listwise\n",
        model_extra="  vision:\n    freeze: [vision_tower]\n    max_pixels: 50176\n",
    )
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    found = {issue.path: issue.line for issue in caught.value.issues}
    assert found == {
        "data.mapping.columns.images": line_of(spec, "images: pictures"),
        "data.images": line_of(spec, "  images:"),
        "model.vision.max_pixels": line_of(spec, "max_pixels"),
    }
    # freeze is not refused: a vision-language model trained on text keeps its tower frozen all the same


def test_a_mixture_entry_with_images_is_refused_at_its_own_mapping(tmp_path):
    data = (
        "  sources:\n"
        "    - name: text\n"
        "      source: {kind: files, paths: [a.jsonl]}\n"
        "      mapping: {preset: stepwise}\n"
        "    - name: pictures\n"
        "      source: {kind: files, paths: [b.jsonl]}\n"
        "      mapping:\n"
        "        preset: stepwise\n"
        "        columns: {images: img}\n"
    )
    spec = write(tmp_path, data, "  kind: process\n")
    assert declared_refusal("process") is not None
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    (issue,) = caught.value.issues
    assert issue.path == "data.sources.1.mapping.columns.images"
    assert issue.line == line_of(spec, "columns: {images: img}")
    assert issue.message.endswith(declared_refusal("process"))


def test_an_image_preset_with_an_option_that_refuses_images_names_the_option(tmp_path):
    """rlaif-v gives pairs, so Bradley-Terry trains on it; sft_weight is an option whose term reads no images
    (the declaration says why; other options of the same approach are accepted)."""
    why = declared_refusal("bradley_terry", sft_weight=0.5)
    assert why is not None  # sft_weight stays refused (if it learns images, pick another refused option here)
    data = "  source: {kind: files, paths: [rlaif.parquet]}\n  mapping: {preset: rlaif-v}\n"
    spec = write(tmp_path, data, "  kind: bradley_terry\n  sft_weight: 0.5\n")
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    (issue,) = caught.value.issues
    assert issue.path == "data.mapping.preset" and issue.line == line_of(spec, "rlaif-v")
    assert issue.message == f"the rlaif-v preset reads images (column 'image'), but {why}"
    assert "keep approach kind: bradley_terry and change the option" in issue.hint
    # the same data without the option validates
    load_spec(write(tmp_path, data, "  kind: bradley_terry\n"))


def test_a_grpo_judge_on_image_pairs_is_refused_with_the_method_to_write(tmp_path):
    """The generative judge trains on images with method: sft, not grpo: validate says so, and the hint keeps
    the kind (its default method reads images) instead of sending the user to another approach."""
    why = declared_refusal("generative", method="grpo")
    assert why is not None and "method" in why
    pairs = "  source: {kind: files, paths: [pairs.jsonl]}\n  mapping: {preset: pairs, columns: {images: images}}\n"
    spec = write(tmp_path, pairs, "  kind: generative\n  method: grpo\n")
    with pytest.raises(SpecError) as caught:
        load_spec(spec)
    (issue,) = caught.value.issues
    assert issue.path == "data.mapping.columns.images" and issue.message.endswith(why)
    assert "keep approach kind: generative" in issue.hint
    chats = "  source: {kind: files, paths: [chats.jsonl]}\n  mapping: {preset: messages, columns: {images: images}}\n"
    load_spec(write(tmp_path, chats, "  kind: generative\n  method: sft\n"))


@pytest.mark.parametrize(
    "approach, mapping",
    [
        ("  kind: bradley_terry\n", "  mapping: {preset: pairs, columns: {images: img}}\n"),
        ("  kind: bradley_terry\n", "  mapping: {preset: rlaif-v}\n"),
        (
            "  kind: pointwise\n  attributes: [helpfulness]\n",
            "  mapping: {preset: helpsteer2, columns: {images: img}}\n",
        ),
    ],
)
def test_approaches_that_train_on_images_validate(tmp_path, cli, monkeypatch, approach, mapping):
    # validate refuses a hub id it finds nowhere offline (tests/test_new_user_52.py): the model is in a
    # Hugging Face cache here, laid out as `hf download` leaves it (refs/main -> snapshots/<rev>/config.json)
    import huggingface_hub.constants

    repo = tmp_path / "hub" / ("models--" + MODEL.replace("/", "--"))
    (repo / "snapshots" / "r0").mkdir(parents=True)
    (repo / "snapshots" / "r0" / "config.json").write_text('{"model_type": "qwen2_vl"}')
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("r0")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    spec = write(
        tmp_path,
        "  source: {kind: files, paths: [rows.jsonl]}\n" + mapping + "  images: {allow_urls: true, max_mb: 4}\n",
        approach,
        model_extra="  vision: {max_pixels: 50176}\n",
    )
    result = cli("validate", spec)
    assert result.code == 0, result.err
    assert "valid" in result.out


def test_validate_refuses_without_importing_torch(tmp_path):
    spec = write(tmp_path, LISTWISE_IMAGES, "  kind: listwise\n")
    code = (
        "import sys\n"
        "from rmspec.cli.main import main\n"
        f"sys.argv = ['rmspec', 'validate', {str(spec)!r}]\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    print('EXIT', exc.code)\n"
        "print('HEAVY', [m for m in ('torch', 'transformers', 'datasets', 'PIL') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert "EXIT 2" in out.stdout, out.stdout + out.stderr
    assert "HEAVY []" in out.stdout
    assert "does not train on images" in out.stderr
