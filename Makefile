# Two commands on a fresh machine:
#   make demo   build Sluice and run the demo pipeline (prints images/s, writes a preview PNG)
#   make test   build Sluice and run every test (Rust and Python, DALI parity included)
# and the wheel users install: make wheel (dist/, abi3, manylinux_2_28).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.deps-installed
# The Python tests run against the wheel installed in this environment, made afresh each run.
TEST_VENV ?= .venv-test

.PHONY: demo test build wheel deps rust-test test-venv py-test bench clean fuzz-deps fuzz-smoke

demo: build
	$(PY) -m sluice demo $(DEMO_ARGS)

test: rust-test py-test fuzz-smoke

# System tools: cmake, nasm (the vendored libjpeg-turbo and its SIMD code), a C++20 compiler
# (the Rust tests compile every CUDA kernel on the host against tools/cuda_shim/shim.h and run the JPEG entropy kernel and element.cuh there).
deps:
	@command -v cmake >/dev/null && command -v nasm >/dev/null && command -v c++ >/dev/null || \
	  { echo "installing cmake, nasm and g++"; \
	    if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq cmake nasm g++ >/dev/null; \
	    else sudo apt-get update -qq && sudo apt-get install -y -qq cmake nasm g++ >/dev/null; fi; }

# The build tools; `maturin develop` adds Sluice's own dependencies (numpy). ziglang is the
# version the wheel build was checked with.
$(STAMP): pyproject.toml Makefile
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "maturin>=1.5,<2" "ziglang~=0.17.1"
	touch $(STAMP)

build: deps $(STAMP)
	VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop --release -q

# zig links against glibc 2.28's symbols (the vendored libjpeg-turbo and csrc/ too: maturin
# hands cmake and cc its zig cc wrapper), so pip takes the wheel on glibc >= 2.28 (RHEL 8,
# Debian 11, Ubuntu 20.04), not only on this machine's glibc. maturin finds zig through the
# venv's python (`python -m ziglang`).
wheel: deps $(STAMP)
	rm -rf dist
	PATH=$(abspath $(VENV))/bin:$$PATH $(VENV)/bin/maturin build --release --zig --compatibility manylinux_2_28 -o dist -q

rust-test: deps
	cargo test --workspace --release -q

# Fuzzing (fuzz/: cargo-fuzz, libFuzzer) on the machine's own Rust: without a sanitizer
# (AddressSanitizer needs nightly; see docs/RELIABILITY.md for longer runs with it), so the
# smoke run catches panics, overflows, hangs and runaway allocations.
FUZZ_SECONDS ?= 20
fuzz-deps:
	@command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked -q

# Every fuzz target for FUZZ_SECONDS from its seed corpus (fuzz/corpus/<target>) and the
# regressions it found before (tests/bad/<target>, replayed first); what it finds goes to a
# scratch folder, a crash to fuzz/artifacts/<target>/ and fails the run.
fuzz-smoke: deps fuzz-deps
	set -o pipefail; cd fuzz && for t in $$(cargo fuzz list); do \
	  scratch=$$(mktemp -d); \
	  bad=$$(test -d ../tests/bad/$$t && echo ../tests/bad/$$t); \
	  cargo fuzz run -O -a -s none $$t $$scratch corpus/$$t $$bad -- -max_total_time=$(FUZZ_SECONDS) \
	    -rss_limit_mb=4096 -timeout=10 2>&1 | tail -40 || exit 1; \
	  rm -rf $$scratch; done

# A fresh environment holding only the wheel and pyproject's `test` extra, so a file or a
# library missing from the wheel fails the tests. pip first: older ones (Python 3.9's) do
# not know the manylinux_2_28 tag.
test-venv: wheel
	rm -rf $(TEST_VENV)
	python3 -m venv $(TEST_VENV)
	$(TEST_VENV)/bin/python -m pip install -q --upgrade pip
	$(TEST_VENV)/bin/python -m pip install -q "$$(echo dist/*.whl)[test]"

# Run from the environment's folder, where nothing of the checkout is importable;
# SLUICE_TEST_INSTALLED makes tests/conftest.py refuse a sluice imported from python/ anyway.
py-test: test-venv
	cd $(TEST_VENV) && SLUICE_TEST_INSTALLED=1 $(abspath $(TEST_VENV))/bin/python -m pytest -q -p no:cacheprovider \
	  --rootdir=$(CURDIR) $(CURDIR)/tests $(PYTEST_ARGS)

# The tests' environment has what the benchmark needs: Pillow and scikit-image (its data set
# maker) and DALI (to compare with).
bench: test-venv
	$(TEST_VENV)/bin/python benches/cpu_pipeline.py

clean:
	rm -rf target dist $(VENV) $(TEST_VENV)
