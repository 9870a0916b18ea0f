#!/usr/bin/env bash
# Fails when docs/guide/configuration.md differs from the configuration table the library has.
#   check_config_doc.sh GNIO_INFO DOC
set -euo pipefail
if ! diff -u "$2" <("$1" --config-markdown); then
  echo "docs/guide/configuration.md is out of date: regenerate it with" >&2
  echo "  build/tools/gnio-info/gnio-info --config-markdown > docs/guide/configuration.md" >&2
  exit 1
fi
