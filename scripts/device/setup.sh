# Source on the GPU machine: carried wheels (peers) and ridgeline itself, offline.
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . >/tmp/pip-ridgeline.log 2>&1 || cat /tmp/pip-ridgeline.log
export RIDGELINE_CACHE_DIR=$PWD/.device-cache RIDGELINE_DATA_DIR=$PWD/.device-data
# The GPU machine gets a copy of the tree without .git: pass the commit in the run command, e.g.
#   RIDGELINE_GIT_SHA=<sha> RIDGELINE_GIT_DIRTY=0 bash scripts/device/runN.sh
