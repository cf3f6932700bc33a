#!/bin/bash
# Build what the GPU machine needs into .gpu/ (git-ignored): the GPU runtime's test binary
# (the other Rust tests need no GPU and run in CI), the wheel of `make wheel`, the data set
# maker, and run.sh, which runs them there with SLUICE_REQUIRE_GPU=1 so GPU tests fail, not skip.
# Usage: bash tools/gpu-pack.sh [pytest args...]; then `run` with carry [".gpu"] and
# command `bash .gpu/run.sh`. Adapted from ../shared/gpu/pack.sh.
set -euo pipefail
root=$(git rev-parse --show-toplevel); cd "$root"
rm -rf .gpu; mkdir -p .gpu/bin .gpu/wheels
cargo test --release -p sluice-cuda --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("profile",{}).get("test") and m.get("executable"):
        print(m["executable"])' | while read -r exe; do cp "$exe" .gpu/bin/; done
strip .gpu/bin/* 2>/dev/null || true
make -s wheel >/dev/null && cp dist/*.whl .gpu/wheels/
cp tests/data_gen/make_dataset.py .gpu/
printf '%s\n' "$*" > .gpu/pytest-args
cat > .gpu/run.sh <<'RUN'
#!/bin/bash
# Runs on the GPU machine from the project root.
# SLUICE_TEST_INSTALLED: tests/conftest.py refuses a sluice imported from the checkout.
export SLUICE_REQUIRE_GPU=1 SLUICE_TEST_INSTALLED=1 RUST_BACKTRACE=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
fail=0
for t in .gpu/bin/*; do [ -x "$t" ] || continue; echo "== $t"; "$t" --test-threads=4 || fail=1; done
python3 -m pip install -q --no-index --no-deps --target /tmp/sluice-site .gpu/wheels/*.whl --upgrade || fail=1
export PYTHONPATH=/tmp/sluice-site${PYTHONPATH:+:$PYTHONPATH}
python3 -m pytest -q tests $(cat .gpu/pytest-args) || fail=1
echo "gpu run: $([ $fail = 0 ] && echo PASSED || echo FAILED)"; exit $fail
RUN
chmod +x .gpu/run.sh
du -sh .gpu
