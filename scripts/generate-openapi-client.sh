#!/usr/bin/env bash
# Generates the client in Tests/LibraryClientTests/GeneratedClient/Generated from openapi.yaml with
# Apple's swift-openapi-generator 1.14.3 (the operations listed in openapi-generator-config.yaml),
# as a Swift developer would. Run it after changing those operations in openapi.yaml; the output
# is committed, so the tests build without the generator.
#
#   scripts/generate-openapi-client.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=$ROOT/Tests/LibraryClientTests/GeneratedClient
WORK=${OPENAPI_GENERATOR_DIR:-/tmp/swift-openapi-generator-1.14.3}
if [[ ! -x $WORK/.build/release/swift-openapi-generator ]]; then
    rm -rf "$WORK"
    git clone -q --branch 1.14.3 https://github.com/apple/swift-openapi-generator "$WORK"
    (cd "$WORK" && swift build -c release --product swift-openapi-generator)
fi
rm -rf "$DIR/Generated"
mkdir -p "$DIR/Generated"
"$WORK/.build/release/swift-openapi-generator" generate --config "$DIR/openapi-generator-config.yaml" \
    --output-directory "$DIR/Generated" "$ROOT/openapi.yaml" | grep -v '^Writing' || true
# Generated code keeps the generator's formatting: swift format skips it.
for file in "$DIR"/Generated/*.swift; do
    { echo "// swift-format-ignore-file"; cat "$file"; } >"$file.tmp" && mv "$file.tmp" "$file"
done
echo "generate-openapi-client: $(cat "$DIR"/Generated/*.swift | wc -l) lines in $DIR/Generated"
