#!/usr/bin/env bash
# The SPDX SBOM of one release archive, for goreleaser's sboms step (run in
# the dist folder): syft SBOM ARCHIVE DOCUMENT COMMIT_UNIX_TIME.
#
# syft stamps the time of the run and a random UUID into every document, so
# two builds of one commit would differ. This sets the creation time to the
# commit's and replaces the UUID in the namespace with the archive's sha256:
# the bytes then follow from the archive alone, and each document's
# namespace stays unique to its archive, as SPDX asks.
set -euo pipefail
artifact=$1 document=$2 epoch=$3
export SYFT_CHECK_FOR_APP_UPDATE=false
tmp="$document.tmp"
syft scan "file:$artifact" -q -o "spdx-json=$tmp"
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
sum=$(sha256sum "$artifact" | cut -d' ' -f1)
uuid='[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'
sed -E \
	-e "s#(\"documentNamespace\":\"[^\"]*)-$uuid\"#\1-sha256-$sum\"#" \
	-e "s#\"created\":\"[^\"]*\"#\"created\":\"$created\"#" \
	"$tmp" >"$document"
rm -f "$tmp"
if ! grep -q "\"documentNamespace\":\"[^\"]*-sha256-$sum\"" "$document" || ! grep -q "\"created\":\"$created\"" "$document"; then
	echo "sbom.sh: syft's output for $artifact no longer has the namespace or creation time this script pins" >&2
	exit 1
fi
