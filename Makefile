# Two commands on a fresh machine:
#   make demo   build Sluice and run the demo pipeline (prints images/s, writes a preview PNG)
#   make test   build Sluice and run every test (Rust and Python, DALI parity included)
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.deps-installed

.PHONY: demo test build deps rust-test py-test bench clean

demo: build
	$(PY) -m sluice demo $(DEMO_ARGS)

test: build rust-test py-test

# System tools: cmake, nasm (the vendored libjpeg-turbo and its SIMD code), a C++20 compiler
# (the Rust tests compile every CUDA kernel on the host against tools/cuda_shim/shim.h and run the JPEG entropy kernel and element.cuh there).
deps:
	@command -v cmake >/dev/null && command -v nasm >/dev/null && command -v c++ >/dev/null || \
	  { echo "installing cmake, nasm and g++"; \
	    if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq cmake nasm g++ >/dev/null; \
	    else sudo apt-get update -qq && sudo apt-get install -y -qq cmake nasm g++ >/dev/null; fi; }

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "maturin>=1.5,<2" pytest numpy pillow scikit-image "nvidia-dali-cuda130==2.4.0"
	touch $(STAMP)

build: deps $(STAMP)
	VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop --release -q

rust-test: deps
	cargo test --workspace --release -q

py-test: build
	$(PY) -m pytest -q tests

bench: build
	$(PY) benches/cpu_pipeline.py

clean:
	rm -rf target $(VENV)
