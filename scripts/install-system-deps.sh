#!/usr/bin/env bash
# Install the Debian packages replcheck's tests and Spark jobs need, if any are missing.
#
# The tests start private MariaDB and PostgreSQL servers from the installed binaries (never
# the system's services), Spark needs Java 17+, and Spark reads MariaDB/PostgreSQL through
# the JDBC drivers Debian ships. The HTML report's browser test drives Debian's headless
# Chromium (never a downloaded browser). Idempotent: when everything is present it only
# reports. It never starts, stops or reconfigures the system's database services.
#
# Usage: bash scripts/install-system-deps.sh   (as root; otherwise it prints the sudo line)
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive
missing=()

# require LABEL PACKAGE COMMAND...: report LABEL as found if COMMAND succeeds, else queue PACKAGE.
require() {
    local label=$1 package=$2
    shift 2
    if "$@" >/dev/null 2>&1; then
        echo "found: $label"
    else
        echo "missing: $label (package $package)"
        missing+=("$package")
    fi
}

has_mariadb_server() {
    [[ -x /usr/sbin/mariadbd ]] && command -v mariadb-install-db
}

has_mariadb_client() {
    # The tests load time zones with mariadb-tzinfo-to-sql, which ships in the client package.
    command -v mariadb && command -v mariadb-tzinfo-to-sql
}

has_postgres_server() {
    compgen -G "/usr/lib/postgresql/*/bin/postgres"
}

has_java_17() {
    # `java -version` prints e.g. `openjdk version "17.0.15" 2025-04-15` ("1.8.0_x" for 8).
    local version
    version=$(java -version 2>&1 | awk -F'"' '/version/ {print $2; exit}') || return 1
    version=${version#1.}
    version=${version%%[.+-]*}
    [[ $version =~ ^[0-9]+$ ]] && ((version >= 17))
}

has_chromium() {
    # tests/reports/test_browser.py runs exactly this binary (Debian's chromium package).
    [[ -x /usr/bin/chromium ]]
}

check() {
    require "MariaDB server (mariadbd, mariadb-install-db)" mariadb-server has_mariadb_server
    require "MariaDB client (mariadb, mariadb-tzinfo-to-sql)" mariadb-client has_mariadb_client
    require "PostgreSQL server (/usr/lib/postgresql/*/bin/postgres)" postgresql has_postgres_server
    require "Java 17 or newer" openjdk-17-jre-headless has_java_17
    require "MariaDB JDBC driver (/usr/share/java/mariadb-java-client.jar)" libmariadb-java \
        test -f /usr/share/java/mariadb-java-client.jar
    require "PostgreSQL JDBC driver (/usr/share/java/postgresql.jar)" libpostgresql-jdbc-java \
        test -f /usr/share/java/postgresql.jar
    require "time zone data (/usr/share/zoneinfo)" tzdata test -f /usr/share/zoneinfo/Europe/Berlin
    require "Chromium for the report's browser test (/usr/bin/chromium)" chromium has_chromium
}

install_missing() {
    if ((EUID != 0)); then
        echo "run: sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
        exit 1
    fi
    # Installing a server package on a fresh machine may start its service; that is left
    # alone: the tests run their own private servers on other ports.
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

check
if ((${#missing[@]} > 0)); then
    install_missing
    missing=()
    check
    if ((${#missing[@]} > 0)); then
        echo "still missing after installing: ${missing[*]}" >&2
        exit 1
    fi
fi
