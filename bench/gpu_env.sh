#!/bin/sh
# Run a command on a bare, offline CUDA machine (Python, torch and numpy) with the archives that
# bench/gpu_bundle.py packed, from the repository root:
#
#     sh bench/gpu_env.sh .gpu/site.tar.xz python3 bench/random_checkpoint.py /tmp/pi0
#     sh bench/gpu_env.sh .gpu/site.tar.xz .gpu/libero_spatial.tar.xz -- python3 bench/libero_run.py
#     sh bench/gpu_env.sh -- python3 bench/libero_run.py     # archives unpacked by an earlier call
#
# Without `--`, the first argument is the one archive. Each archive is unpacked into $DEXRL_SITE
# (default /tmp/dexrl-site) once (a marker file per archive), which is then byte-compiled as pip
# would (the first imports are slow otherwise); conf/ is copied to dexrl/conf (where the wheel
# ships the Hydra tree); the folder, the repository and bench/ go first on PYTHONPATH (the driver,
# Ray's daemons and every worker inherit it). LIBERO renders through NVIDIA's EGL: the variables
# robosuite and MuJoCo read are set unless already set. A call whose archives were unpacked by an
# earlier call on the same machine names none (`--` first) and fails at once, saying so, when that
# machine was given back in between (docs/performance.md#the-shipped-libero-run-on-a-gpu).
set -e
site=${DEXRL_SITE:-/tmp/dexrl-site}
mkdir -p "$site"
case " $* " in
  *" -- "*)
    while [ "$1" != "--" ]; do
      archives="$archives $1"
      shift
    done
    shift ;;
  *)
    archives=$1
    shift ;;
esac
for archive in $archives; do
  marker="$site/.unpacked-$(basename "$archive")"
  [ -e "$marker" ] && continue
  tar -xJf "$archive" -C "$site"
  touch "$marker"
done
if [ ! -d "$site/rlinf" ]; then
  echo "error: no unpacked site bundle in $site (the machine that unpacked it was given back?)" >&2
  echo "hint: carry .gpu/site.tar.xz and name it before --, or run the first call again" >&2
  exit 2
fi
python3 -m compileall -q -j 0 "$site" > /dev/null 2>&1 || true
[ -e dexrl/conf ] || cp -r conf dexrl/conf
PYTHONPATH="$site:$PWD:$PWD/bench${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH MUJOCO_GL=${MUJOCO_GL:-egl} PYOPENGL_PLATFORM=${PYOPENGL_PLATFORM:-egl}
export MUJOCO_EGL_DEVICE_ID=${MUJOCO_EGL_DEVICE_ID:-0} PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
vendor=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
if [ -z "$__EGL_VENDOR_LIBRARY_FILENAMES" ] && [ -e "$vendor" ]; then
  export __EGL_VENDOR_LIBRARY_FILENAMES=$vendor
fi
exec "$@"
