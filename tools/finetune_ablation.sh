#!/usr/bin/env bash
# The fine-tuning terms' ablation (docs/RESULTS.md, "Fine-tuning terms, one off at a time"):
# the chain's last fine-tuning stage (training/configs/mann8.json) from the plain MANN-8 recipe
# network of each seed, with every term and with each term off, each exported at int8, then
# replayed on the held-out clips. The plain networks first:
#   ./run canis train --config training/configs/mann8.toml --out runs/mann8-s1   (seed 1)
#   the same with seed = 2 in a copy of the file, --out runs/mann8-s2
# Usage: tools/finetune_ablation.sh SEED [TERM ...]   (no TERM: every term on)
set -eu
seed=$1; shift
plain=runs/mann8-s$seed
name=every-term; [ $# -gt 0 ] && name=no-$(IFS=-; echo "$*")
out=runs/ablation/$name-s$seed
mkdir -p runs/ablation
python - "$@" > $out.json <<'PY'
import json, re, sys
from canis.training.finetune_config import check_config_values
config = json.load(open("training/configs/mann8.json"))
for term in sys.argv[1:]:
    config[term] = 1.0 if term == "jump_weight" else 0.0
while True:  # a setting that only qualifies a term turned off goes back to its default
    try:
        check_config_values(dict(config), "")
        break
    except ValueError as error:
        key = re.match(r"(\w+)", str(error)).group(1)
        if key not in config or key in sys.argv[1:]:
            raise
        del config[key]
print(json.dumps(config, indent=1))
PY
./run canis finetune --config $out.json --start $plain/train/last.safetensors --out $out \
  --dataset $plain/dog_dataset.npz --threads 1
./run canis export $out/last.safetensors --out $out/mann8.onnx --dataset $plain/dog_dataset.npz
./run canis export $out/mann8.onnx --precision int8 --out $out/mann8.int8.onnx
