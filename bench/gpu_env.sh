#!/bin/sh
# Run a command on a bare, offline CUDA machine (Python, torch and numpy only) with the bundle
# that bench/gpu_bundle.py packed, from the repository root:
#
#     sh bench/gpu_env.sh .gpu/site.tar.xz python3 bench/random_pi0.py /tmp/pi0
#
# It unpacks the bundle into $DEXRL_SITE (default /tmp/dexrl-site), byte-compiles it as pip
# would (the first imports are slow otherwise), copies conf/ to dexrl/conf (where the wheel ships
# the Hydra tree), puts the bundle, the repository and bench/ first on PYTHONPATH (the driver,
# Ray's daemons and every worker inherit it) and runs the command.
set -e
site=${DEXRL_SITE:-/tmp/dexrl-site}
mkdir -p "$site"
tar -xJf "$1" -C "$site"
shift
python3 -m compileall -q -j 0 "$site" > /dev/null 2>&1 || true
[ -e dexrl/conf ] || cp -r conf dexrl/conf
PYTHONPATH="$site:$PWD:$PWD/bench${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH MUJOCO_GL=egl PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
exec "$@"
