#!/usr/bin/env bash
# transformers and PEFT, the reference implementations of the checkpoints and LoRA adapters that
# `cllm create` converts, for tests/store/test_transformers_oracle.py: the converted model's
# llama.cpp logits must be transformers' on the same folder, and with the converted adapter
# PEFT's with the adapter it saved.
#
# A venv of their own, outside the repository ($HF_ORACLE_VENV, default ~/.cache/cllm-hf-oracle/venv):
# torch must not meet cllm's packages. torch==2.13.0 is the CPU build this kind of machine keeps on
# disk (pip takes it from there; elsewhere pip fetches a CUDA build of several GB). Measured on a
# shared 2-core machine: ~1 minute and 1.6 GB the first time; 1 s when already installed.
#
# Usage: bash compat/hf_oracle.sh   (run from anywhere)
set -euo pipefail
VENV="${HF_ORACLE_VENV:-$HOME/.cache/cllm-hf-oracle/venv}"
TORCH=2.13.0
TRANSFORMERS=5.24.0
PEFT=0.21.2
# transformers' SentencePiece reader (a tokenizer.model it resaves as tokenizer.json alone).
SENTENCEPIECE=0.2.3
PROTOBUF=7.36.2

installed() {
  "$VENV/bin/python" - <<PY 2>/dev/null
from importlib.metadata import version
assert version("torch").startswith("$TORCH") and version("transformers") == "$TRANSFORMERS"
assert version("peft") == "$PEFT"
assert version("sentencepiece") == "$SENTENCEPIECE" and version("protobuf") == "$PROTOBUF"
PY
}
# The test runs only where the marker says a whole install finished.
if ! [ -f "$VENV/cllm-ready" ] || ! installed; then
  rm -f "$VENV/cllm-ready"
  python3 -m venv "$VENV"
  nice -n 19 "$VENV/bin/pip" install -q "torch==$TORCH"
  nice -n 19 "$VENV/bin/pip" install -q "transformers==$TRANSFORMERS" "peft==$PEFT" \
    "sentencepiece==$SENTENCEPIECE" "protobuf==$PROTOBUF"
  installed
  touch "$VENV/cllm-ready"
fi
