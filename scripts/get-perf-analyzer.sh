#!/usr/bin/env bash
# Fetches Triton's perf_analyzer (the C++ binary shipped in the
# tritonclient 2.40.0 wheel; the PyPI package named perf-analyzer is only a
# placeholder) with the two shared libraries it needs and Debian 12 lacks
# (libb64 from Debian, libcudart.so.12 from NVIDIA's PyPI wheel), into
# .perf_analyzer/ (git-ignored), and writes .perf_analyzer/perf_analyzer, a
# wrapper that sets LD_LIBRARY_PATH. Needs network (PyPI, Debian mirrors)
# and .venv (scripts/setup-venv.sh). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
D=.perf_analyzer
if [ -x "$D/perf_analyzer" ]; then exit 0; fi
rm -rf "$D" && mkdir -p "$D/lib" "$D/tmp"
.venv/bin/pip download -q --no-deps -d "$D/tmp" "tritonclient[all]==2.40.0" nvidia-cuda-runtime-cu12
(cd "$D/tmp" && apt-get download libb64-0d >/dev/null 2>&1)
.venv/bin/python - "$D" <<'PY'
import glob, os, shutil, sys, zipfile
d = sys.argv[1]
z = zipfile.ZipFile(glob.glob(f"{d}/tmp/tritonclient-2.40.0-*.whl")[0])
with z.open("tritonclient-2.40.0.data/data/bin/perf_analyzer") as src, open(f"{d}/perf_analyzer.bin", "wb") as dst:
    shutil.copyfileobj(src, dst)
os.chmod(f"{d}/perf_analyzer.bin", 0o755)
z = zipfile.ZipFile(glob.glob(f"{d}/tmp/nvidia_cuda_runtime_cu12-*.whl")[0])
with z.open("nvidia/cuda_runtime/lib/libcudart.so.12") as src, open(f"{d}/lib/libcudart.so.12", "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
dpkg -x "$D"/tmp/libb64-0d_*.deb "$D/tmp/b64"
cp "$D"/tmp/b64/usr/lib/x86_64-linux-gnu/libb64.so.0d "$D/lib/"
rm -rf "$D/tmp"
cat > "$D/perf_analyzer" <<'SH'
#!/usr/bin/env bash
here="$(cd "$(dirname "$0")" && pwd)"
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/perf_analyzer.bin" "$@"
SH
chmod +x "$D/perf_analyzer"
"$D/perf_analyzer" --version >/dev/null 2>&1 || true
echo "perf_analyzer at $D/perf_analyzer"
