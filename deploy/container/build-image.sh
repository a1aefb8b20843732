#!/usr/bin/env bash
# Build Switchboard's container image with podman, on a machine with no registry.
#
#   deploy/container/build-image.sh [TAG]        (default localhost/switchboard:latest)
#
# 1. podman's settings for this kind of machine (containers.conf: runc, cgroupfs, the
#    file-descriptor limit this shell may grant), in the cache, exported as CONTAINERS_CONF;
# 2. the base image localhost/switchboard-base:bookworm, made once with mmdebstrap from
#    Debian's packages and kept;
# 3. the wheels: switchboard's own, built now (its C fast path compiled), and its
#    dependencies, fetched once into the cache and reused;
# 4. podman build of deploy/container/Dockerfile (HEALTHCHECK kept: --format docker).
#
# EXTRAS="[llama]" adds the llama.cpp engine; PYTHON (default .venv/bin/python) builds the
# wheels; SWITCHBOARD_IMAGE_CACHE (default ~/.cache/switchboard/image) holds what is kept.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tag=${1:-localhost/switchboard:latest}
base=localhost/switchboard-base:bookworm
python=${PYTHON:-$repo/.venv/bin/python}
extras=${EXTRAS:-}
cache=${SWITCHBOARD_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/switchboard/image}
mkdir -p "$cache/deps"

for tool in podman mmdebstrap; do
    command -v "$tool" >/dev/null || {
        echo "build-image: $tool is missing (apt-get install podman runc iptables netavark aardvark-dns mmdebstrap)" >&2
        exit 2
    }
done

# Root here may not raise its own limits and the cgroup layout is hybrid: without these,
# podman's defaults fail (setrlimit RLIMIT_NOFILE; cgroups in hybrid mode).
limit=$(ulimit -Hn)
cat > "$cache/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=$limit:$limit", "nproc=32768:32768"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
[network]
network_backend = "netavark"
CONF
export CONTAINERS_CONF=$cache/containers.conf

if ! podman image exists "$base"; then
    echo "build-image: making $base with mmdebstrap (about a minute, once)"
    mmdebstrap --quiet --variant=apt --include=python3,python3-venv,ca-certificates bookworm - \
        "deb http://deb.debian.org/debian bookworm main" \
        | podman import --change 'CMD ["/bin/bash"]' - "$base" >/dev/null
fi

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
mkdir "$context/wheels"
"$python" -m pip wheel --quiet --no-deps --wheel-dir "$context/wheels" "$repo"
wheel=$(ls "$context"/wheels/switchboard-*.whl)
# Dependencies from the cache alone when it has them all; from the index otherwise.
if ! "$python" -m pip wheel --quiet --no-index --find-links "$cache/deps" \
        --find-links "$context/wheels" --wheel-dir "$cache/deps" "switchboard$extras @ file://$wheel" \
        2>/dev/null; then
    "$python" -m pip wheel --quiet --find-links "$cache/deps" --wheel-dir "$cache/deps" \
        "switchboard$extras @ file://$wheel"
fi
rm -f "$cache"/deps/switchboard-*.whl
cp --link "$cache"/deps/*.whl "$context/wheels/" 2>/dev/null || cp "$cache"/deps/*.whl "$context/wheels/"
cp "$repo/deploy/container/Dockerfile" "$context/Dockerfile"

podman build --quiet --format docker --build-arg "EXTRAS=$extras" --tag "$tag" "$context" >/dev/null
echo "built $tag"
