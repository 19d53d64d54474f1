# Helpers of tools/docker-e2e (sourced by it; see there). Uses its settings:
# DOCKER IMAGE CACHE LOCK WORK SUDO PY T0 ROOT, and BIN once set.

# ------------------------------------------------------------------ output
declare -a SUMMARY=() FAILED=() CONTAINERS=() VOLUMES=()
COMPOSE_UP=0
ts() { local s=$((SECONDS - T0)); printf '%02d:%02d' $((s / 60)) $((s % 60)); }
say() { echo "docker-e2e [$(ts)] $*"; }
phase() { PHASE_T=$SECONDS; echo; say "== $*"; }
phase_done() { say "   ($1 took $((SECONDS - PHASE_T)) s)"; }
ok() { say "   ok: $*"; }
fail() { say "   FAIL: $*"; FAILED+=("$*"); }
check() {  # check "what" cmd...: runs cmd, ok / FAIL
  local what="$1"; shift
  if "$@" >"$WORK/check.log" 2>&1; then ok "$what"; else fail "$what"; sed 's/^/        /' "$WORK/check.log" | tail -20; fi
}
note() { SUMMARY+=("$1|$2"); }
die() { fail "$*"; finish; }
lock() { if [ -n "$LOCK" ]; then exec 9>"$LOCK"; flock 9; fi; }
unlock() { if [ -n "$LOCK" ]; then flock -u 9; exec 9>&-; fi; }

cleanup() {
  local rc=$?
  for c in "${CONTAINERS[@]}"; do $DOCKER rm -f "$c" >/dev/null 2>&1 || true; done
  for v in "${VOLUMES[@]}"; do $DOCKER volume rm -f "$v" >/dev/null 2>&1 || true; done
  if [ "$COMPOSE_UP" = 1 ]; then
    compose down -v --remove-orphans >/dev/null 2>&1 || true
  fi
  return $rc
}

finish() {
  echo
  say "== summary (logs in $WORK)"
  for line in "${SUMMARY[@]}"; do
    printf '  %-44s %s\n' "${line%%|*}" "${line#*|}"
  done
  printf '  %-44s %s\n' "total time" "$((SECONDS - T0)) s"
  if ((${#FAILED[@]})); then
    echo "  FAILED (${#FAILED[@]}):"
    for f in "${FAILED[@]}"; do echo "    - $f"; done
    say "docker-e2e: FAILED"
    exit 1
  fi
  say "docker-e2e: all checks passed"
  exit 0
}

# ------------------------------------------------------------------ helpers
host_pkgs() {  # installs the Debian packages given that are missing
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    say "   apt-get install ${missing[*]}"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      -o DPkg::Lock::Timeout=600 "${missing[@]}" >"$WORK/apt.log" 2>&1 \
      || { cat "$WORK/apt.log"; die "apt-get install ${missing[*]}"; }
  fi
}

apt_mirror() {  # the first deb URI of this machine's apt sources serving suite $1
  $PY - "$1" <<'PY'
import glob, re, sys
suite = sys.argv[1]
for f in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
    try:
        lines = open(f).read().splitlines()
    except OSError:
        continue
    for line in lines:
        w = re.sub(r"\[[^]]*\]", "", line.split("#")[0]).split()
        if len(w) >= 3 and w[0] == "deb" and w[2] == suite:
            print(w[1]); sys.exit()
for f in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    for stanza in open(f).read().split("\n\n"):
        d = {}
        for line in stanza.splitlines():
            if ":" in line and not line.lstrip().startswith("#"):
                k, v = line.split(":", 1)
                d[k.strip().lower()] = v.split()
        if "deb" in d.get("types", []) and suite in d.get("suites", []) and d.get("uris"):
            print(d["uris"][0]); sys.exit()
PY
}

ensure_base_images() {
  if $DOCKER image inspect debian:12 >/dev/null 2>&1 && $DOCKER image inspect debian:12-slim >/dev/null 2>&1; then
    ok "base images debian:12 and debian:12-slim present"
    return
  fi
  local mirror security tree="$CACHE/bookworm"
  mirror="$(apt_mirror bookworm)"; mirror="${mirror:-http://deb.debian.org/debian}"
  security="$(apt_mirror bookworm-security)"; security="${security:-http://deb.debian.org/debian-security}"
  if [ ! -f "$tree/.kiln-complete" ]; then
    say "   debootstrap --variant=minbase bookworm $tree $mirror (~2 min)"
    $SUDO rm -rf "$tree"; $SUDO mkdir -p "$CACHE"
    $SUDO debootstrap --variant=minbase bookworm "$tree" "$mirror" >"$WORK/debootstrap.log" 2>&1 \
      || { tail -20 "$WORK/debootstrap.log"; die "debootstrap"; }
    # apt sources as in Debian's images (+ updates and security), no stale
    # package lists or .debs, and apt set up as Debian's docker images are.
    $SUDO rm -f "$tree/etc/apt/sources.list"
    $SUDO tee "$tree/etc/apt/sources.list.d/debian.sources" >/dev/null <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    $SUDO tee "$tree/etc/apt/apt.conf.d/docker-clean" >/dev/null <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
EOF
    $SUDO rm -rf "$tree"/var/cache/apt/archives/*.deb "$tree"/var/lib/apt/lists/*
    $SUDO touch "$tree/.kiln-complete"
  fi
  say "   docker import debian:12 and debian:12-slim (slim: no docs, man pages, locales)"
  $SUDO tar -C "$tree" --exclude=./.kiln-complete -c . | $DOCKER import --change 'CMD ["bash"]' - debian:12 >/dev/null
  local slim="$CACHE/bookworm-slim"
  $SUDO rm -rf "$slim"; $SUDO cp -a "$tree" "$slim"
  $SUDO tee "$slim/etc/dpkg/dpkg.cfg.d/docker-slim" >/dev/null <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
EOF
  $SUDO find "$slim/usr/share/doc" -mindepth 1 ! -name copyright ! -type d -delete
  $SUDO find "$slim/usr/share/doc" -mindepth 1 -type d -empty -delete
  $SUDO rm -rf "$slim"/usr/share/{man,groff,info,lintian,locale}/*
  $SUDO tar -C "$slim" --exclude=./.kiln-complete -c . | $DOCKER import --change 'CMD ["bash"]' - debian:12-slim >/dev/null
  $SUDO rm -rf "$slim"
  ok "base images imported ($(img_size debian:12) / $(img_size debian:12-slim))"
}

img_size() { $DOCKER image inspect -f '{{.Size}}' "$1" | awk '{printf "%.0f MB", $1 / 1e6}'; }

compose() {
  KILN_GRPC_PORT="127.0.0.1:$C_GRPC" KILN_METRICS_PORT="127.0.0.1:$C_METRICS" \
  KILN_PROMETHEUS_PORT="127.0.0.1:$C_PROM" KILN_MODELS="$ROOT/models" \
    docker-compose -p kiln-e2e -f "$ROOT/deploy/docker-compose.yml" "$@"
}

free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

host_port() { $DOCKER port "$1" "$2/tcp" | head -n 1 | sed 's/.*://'; }

wait_healthy() {  # wait_healthy CONTAINER TIMEOUT_S -> 0 when healthy
  local c="$1" deadline=$((SECONDS + $2)) st
  while [ $SECONDS -lt $deadline ]; do
    st="$($DOCKER inspect -f '{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}' "$c" 2>/dev/null || echo gone)"
    case "$st" in
      "running healthy") return 0 ;;
      running*) sleep 0.5 ;;
      *) echo "container is $st"; $DOCKER logs --tail 30 "$c" 2>&1; return 1 ;;
    esac
  done
  echo "not healthy after $2 s: $st"; $DOCKER logs --tail 30 "$c" 2>&1
  return 1
}


# The host-side checks in Python (kiln_client): tools/docker-e2e.d/e2e.py.
e2e() { PYTHONPATH="$ROOT/clients/python:$BIN/clients/python" $PY "$ROOT/tools/docker-e2e.d/e2e.py" "$@"; }

build_image() {  # build_image LOG [extra docker build args]
  local log="$1"; shift
  local t=$SECONDS
  : >"$log"
  $DOCKER build --force-rm -f deploy/Dockerfile -t "$IMAGE" "$@" . >"$log" 2>&1 &
  local pid=$!
  tail -n +1 -f "$log" --pid=$pid 2>/dev/null \
    | grep --line-buffered -E '^Step [0-9]+/|^warm:|runtime packages:|Successfully built' \
    | while IFS= read -r l; do say "   ${l:0:150}"; done
  wait $pid || return 1
  BUILD_S=$((SECONDS - t))
}

so_count() {  # kernel objects (clang outputs) in the container's cache dir $2
  $DOCKER exec "$1" sh -c "find '$2' -name '*.so' 2>/dev/null | wc -l"
}

first_request() {  # first_request LABEL CACHE_DIR: times the first ocr_det 640 requests
  local label="$1" dir="$2" n0 n1 lat
  n0=$(so_count "$CID" "$dir")
  if lat=$(e2e first "127.0.0.1:$GP" ocr_det 1x3x640x640); then
    n1=$(so_count "$CID" "$dir")
    lat="$(e2e fmt-first "$lat" $((n1 - n0)) \
      "$(e2e metric "http://127.0.0.1:$MP/metrics" kiln_kernel_compile_seconds_total)")"
    ok "first ocr_det 1x3x640x640 request ($label): $lat"
    note "first ocr_det 640 request ($label)" "$lat"
    if [ "$label" = precompiled ]; then
      [ "$n1" = "$n0" ] && ok "no kernel compiled by clang for it (all $n0 in the image's cache)" \
        || fail "$((n1 - n0)) kernels compiled by clang despite the precompiled cache"
    else
      # The count that the precompiled case requires to stay put must see
      # compiles when there are some, or that check could not fail.
      [ "$n1" -gt "$n0" ] && ok "$((n1 - n0)) kernel objects compiled by clang for it (empty cache)" \
        || fail "no kernel object appeared in $dir with an empty cache: the compile count sees nothing"
    fi
  else
    fail "ocr_det first request ($label): $lat"
  fi
}

run_kilnd() {  # run_kilnd NAME [docker run args]: starts, sets CID / GP / MP, T_START
  local name="$1"; shift
  T_START=$($PY -c 'import time; print(time.time())')
  CID=$($DOCKER run -d --name "$name" -p 127.0.0.1::8001 -p 127.0.0.1::8002 \
        -v "$ROOT/models:/models:ro" "$@" $IMAGE)
  CONTAINERS+=("$CID")
  GP=$(host_port "$CID" 8001); MP=$(host_port "$CID" 8002)
}

load_stop() {  # load_stop LABEL URL CONTAINER stop-cmd...
  local label="$1" url="$2" c="$3"; shift 3
  if KILN_E2E_REQUESTS_CSV="$WORK/requests-${label// /-}.csv" e2e load "$url" 4 2 4 "$@" >"$WORK/load-$label.log" 2>&1; then
    ok "requests during the stop: $(e2e fmt-load "$WORK/load-$label.log")"
  else
    fail "requests lost during $label: $(e2e fmt-load "$WORK/load-$label.log" 2>/dev/null || tail -n 3 "$WORK/load-$label.log")"
    grep -E '^LOST' "$WORK/load-$label.log" | sed 's/^/        /' || true
  fi
  local rc; rc=$($DOCKER inspect -f '{{.State.ExitCode}}' "$c")
  [ "$rc" = 0 ] && ok "container exit code 0" || fail "container exit code $rc after $label"
  $DOCKER logs "$c" >"$WORK/kilnd-$label.log" 2>&1 || true
  note "$label under load (4 det + 2 simple clients)" "exit $rc; $(e2e fmt-load "$WORK/load-$label.log" 2>/dev/null || echo '?')"
}
