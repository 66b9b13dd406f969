#!/usr/bin/env bash
# Build the course image (the repository's Dockerfile) on a machine that reaches no container registry, with
# podman, as root, by hand (no test runs this). bench/README.md, "The course image", says what it did here.
#
#   sudo bash bench/build_image.sh          # WORK=/var/tmp/addnorm-image by default; nothing is written in the repo
#
# 1. a Debian 12 root file system by debootstrap (from the mirror apt uses here), imported into podman;
# 2. on it, a stand-in for the Jupyter Docker Stacks base: user jovyan (uid 1000, gid 100), Python 3.11 in a venv
#    at /opt/conda owned by jovyan, the host's trusted certificates (pip must trust what the host trusts);
# 3. the Dockerfile built on that base (--build-arg BASE), torch taken from this machine's wheel folder (pip's
#    find-links), served on loopback, since PyTorch's CPU index cannot be reached here (--build-arg TORCH_FROM);
# 4. checks: `import addnorm_grading` in the image, its size, nbgrader's exchange, and one solution graded in it
#    with the sandbox on, the container's /proc masked and unmasked.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-/var/tmp/addnorm-image}
TAG=${TAG:-localhost/addnorm-course:$(cd "$ROOT" && python3 -c 'import re; print(re.search(r"__version__ = \"(.+)\"", open("lib/addnorm/__init__.py").read())[1])')}
WHEELS=${WHEELS:-$(pip3 config get global.find-links 2>/dev/null || echo /opt/wheels)}
PORT=${PORT:-8765}
MIRROR=${MIRROR:-$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null)}
DEBIAN=localhost/addnorm-debian:bookworm
BASE=localhost/addnorm-stacks-standin:bookworm

for tool in podman debootstrap runc; do
    command -v "$tool" >/dev/null || { echo "needs $tool: apt-get install -y podman debootstrap runc" >&2; exit 1; }
done
[ -n "$MIRROR" ] || { echo "no Debian mirror found in /etc/apt/sources.list.d/debian.sources: set MIRROR" >&2; exit 1; }
mkdir -p "$WORK"
# Where this was first run, crun refused the machine's hybrid cgroups and podman's default process limit could not
# be set: runc, and no default ulimits.
RUNTIME=${RUNTIME:-runc}
if [ -z "${CONTAINERS_CONF:-}" ]; then
    printf '[containers]\ndefault_ulimits = []\n' > "$WORK/containers.conf"
    export CONTAINERS_CONF="$WORK/containers.conf"
fi
step() { echo "== $(date -u +%T) $*"; }

if [ ! -e "$WORK/rootfs/etc/os-release" ]; then
    step "debootstrap bookworm into $WORK/rootfs"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$WORK/rootfs" "$MIRROR"
fi
cp /etc/ssl/certs/ca-certificates.crt "$WORK/rootfs/etc/ssl/certs/ca-certificates.crt"

if ! podman image exists "$DEBIAN"; then
    step "podman import $DEBIAN"
    tar -C "$WORK/rootfs" -c . | podman import - "$DEBIAN"
fi

step "the stand-in base $BASE"
mkdir -p "$WORK/base"
cat > "$WORK/base/Containerfile" <<EOF
FROM $DEBIAN
RUN useradd --uid 1000 --gid 100 --create-home --shell /bin/bash jovyan \\
 && python3 -m venv /opt/conda && /opt/conda/bin/pip install --no-cache-dir --upgrade pip \\
 && chown -R 1000:100 /opt/conda
ENV NB_USER=jovyan NB_UID=1000 NB_GID=100 CONDA_DIR=/opt/conda HOME=/home/jovyan PATH=/opt/conda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
USER 1000
WORKDIR /home/jovyan
EOF
podman --runtime "$RUNTIME" build --network host -t "$BASE" -f "$WORK/base/Containerfile" "$WORK/base"

step "serving $WHEELS on 127.0.0.1:$PORT for torch"
python3 -m http.server --bind 127.0.0.1 --directory "$WHEELS" "$PORT" >"$WORK/wheels-server.log" 2>&1 &
server=$!
trap 'kill $server' EXIT
sleep 1

step "podman build $TAG"
start=$(date +%s)
podman --runtime "$RUNTIME" build --network host --build-arg BASE="$BASE" \
    --build-arg TORCH_FROM="--find-links http://127.0.0.1:$PORT/" -t "$TAG" "$ROOT"
echo "built in $(( $(date +%s) - start )) s"

step "checks"
run() { podman --runtime "$RUNTIME" run --rm "$@"; }
run "$TAG" python -c \
    "import addnorm, addnorm_grading, torch, nbgrader, distributed; print('addnorm', addnorm.__version__, 'torch', torch.__version__, 'cuda', torch.version.cuda)"
run "$TAG" id
podman image inspect --format '{{.Size}}' "$TAG" | awk '{printf "image size: %.2f GB\n", $1 / 1e9}'
# nbgrader in the image uses the HTTP exchange: with no ADDNORM_EXCHANGE_URL it says so
run -e JUPYTER_CONFIG_PATH=/etc/addnorm/student "$TAG" nbgrader list 2>&1 | head -1 || true

# One solution graded in the image with the sandbox on (the repository, read-only, as the course's origin), with the
# container's /proc masked (podman's default) and unmasked: bubblewrap mounts a /proc of its own for each kernel.
cat > "$WORK/grade_one.py" <<'EOF'
import tempfile
from pathlib import Path

from addnorm_grading import coursework, submissions

course = coursework.make_course(Path(tempfile.mkdtemp()) / "course", origin=Path("/src"))
solution = submissions.solution_text("01_residual", Path("/src/solutions"))
coursework.submit(course, "ann", "01_residual", {"residual.ipynb": solution})
run = coursework.run_nbgrader(["autograde", "01_residual", "--force"], course, check=False)
print(*sorted({line for line in (run.stdout + run.stderr).splitlines() if line.startswith("bwrap:")}), sep="\n")
print("01_residual, the solution:", coursework.scores(course)[("ann", "01_residual", "residual")])
EOF
for proc in masked unmasked; do
    step "one solution graded in the image, /proc $proc"
    options=(-v "$ROOT:/src:ro" -v "$WORK/grade_one.py:/grade_one.py:ro")
    if [ "$proc" = unmasked ]; then options+=(--security-opt unmask=ALL); fi
    run "${options[@]}" "$TAG" python /grade_one.py
done
