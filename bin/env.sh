# Sourced by the other bin/ scripts: creates the course's virtual environment on
# first use (or when requirements.txt changed), then activates it.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
STAMP="$VENV/.requirements.sha256"

pick_python() {
  for candidate in "${COURSE_PYTHON:-}" python3.11 python3.12 python3; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  echo "error: the course needs Python >= 3.11 (nbgrader 0.9.6 does); set COURSE_PYTHON" >&2
  return 1
}

want="$(sha256sum "$ROOT/requirements.txt" | cut -d' ' -f1)"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
  py="$(pick_python)" || exit 1
  echo "Setting up the course environment in .venv (one time, about a minute)..."
  "$py" -m venv "$VENV"
  # pip's notes about this machine's extra package folders are noise: keep errors only.
  "$VENV/bin/python" -m pip install --quiet -r "$ROOT/requirements.txt" 2>&1 |
    grep -v "is ignored: it is neither a file nor a directory" || true
  "$VENV/bin/python" -c "import torch, nbgrader" || exit 1
  echo "$want" > "$STAMP"
fi

# nbgrader calls the `alembic` executable from PATH, so the environment's bin/
# must come first; PYTHONPATH makes `helpers` and `autograder` importable from
# every notebook kernel and every spawned worker process.
export PATH="$VENV/bin:$PATH"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export MPLBACKEND="${MPLBACKEND:-Agg}"
cd "$ROOT"
