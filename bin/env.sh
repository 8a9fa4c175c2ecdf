# Sourced by the other bin/ scripts (the course's and the students'): creates the
# course environment in .venv on first use (or when requirements.txt or constraints.txt changed),
# then activates it. Inside the conda environment of environment.yml, uses that.
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
  echo "error: the course needs Python >= 3.11 (nbgrader 0.9.6 does); install it or set COURSE_PYTHON" >&2
  return 1
}

# The wheel folders and index pip is configured with (pip.conf, PIP_* variables), as uv options:
# uv does not read pip's configuration, and a machine may keep its builds there (a CPU-only torch).
pip_sources_for_uv() {
  "$VENV/bin/python" -m pip config list 2>/dev/null | while IFS= read -r line; do
    key="${line%%=*}"; value="${line#*=}"; value="${value#\'}"; value="${value%\'}"
    case "$key" in
      *.extra-index-url) ;;
      *.index-url) echo "--index-url=$value" ;;
      *.find-links) for link in $value; do [ -e "$link" ] && echo "--find-links=$link"; done ;;
    esac
  done | awk '!seen[$0]++'
}

# The pinned set into .venv: with uv where it installs, else with pip. Bytecode is compiled at
# install time, as pip does: sandboxed grading processes cannot write __pycache__, and would
# otherwise compile torch and the rest again on every import.
install_requirements() {
  local sources=()
  if "$VENV/bin/python" -m pip install --quiet "uv==0.13.8" >/dev/null 2>&1; then
    mapfile -t sources < <(pip_sources_for_uv)
    "$VENV/bin/uv" pip install --quiet --compile-bytecode --python "$VENV/bin/python" "${sources[@]}" \
      -r "$ROOT/requirements.txt" -c "$ROOT/constraints.txt" &&
      return 0
    echo "uv could not install the environment; trying pip" >&2
  fi
  # Notes from pip about package folders that do not exist are noise: keep the rest.
  "$VENV/bin/python" -m pip install --quiet -r "$ROOT/requirements.txt" -c "$ROOT/constraints.txt" 2>&1 |
    grep -v "is ignored: it is neither a file nor a directory" || true
}

checksum() { (sha256sum "$1" 2>/dev/null || shasum -a 256 "$1") | cut -d' ' -f1; }

if [ "${CONDA_DEFAULT_ENV:-}" != "parallel-course" ]; then
  want="$(checksum "$ROOT/requirements.txt") $(checksum "$ROOT/constraints.txt")"
  if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
    py="$(pick_python)" || return 1 2>/dev/null || exit 1
    echo "Setting up the course environment in .venv (one time, a minute or more)..."
    "$py" -m venv "$VENV"
    install_requirements
    "$VENV/bin/python" -c "import torch, nbgrader" || return 1 2>/dev/null || exit 1
    echo "$want" > "$STAMP"
  fi
  # nbgrader calls the `alembic` executable from PATH: the environment's bin/ first.
  export PATH="$VENV/bin:$PATH"
fi

# PYTHONPATH makes the course's own packages (`import helpers`) importable in
# every notebook kernel and in every worker process the notebooks start.
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
cd "$ROOT"
