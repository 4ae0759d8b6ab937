#!/usr/bin/env bash
# Writes one man page from txbatch's own --help (help2man), at build time (tools/meson.build):
#   manpage.sh TXBATCH OUT.1 "one-line description" DOCDIR [COMMAND]
# Without COMMAND: txbatch(1), the program's page; with it: txbatch-COMMAND(1) from
# `txbatch COMMAND --help`. Every page ends with SEE ALSO naming the others and the docs.
set -euo pipefail
txbatch=$1 out=$2 name=$3 docdir=$4 cmd=${5:-}
commands="run compare sweep tune calibrate report bridge respond sink lab"
include=$(mktemp)
trap 'rm -f "$include"' EXIT
{
  echo "[SEE ALSO]"
  see=""
  [[ -n $cmd ]] && see="\\fBtxbatch\\fR(1)"
  for c in $commands; do
    [[ $c == "$cmd" ]] && continue
    see+="${see:+, }\\fBtxbatch-$c\\fR(1)"
  done
  echo "$see, \\fBdpdk-telemetry.py\\fR, \\fBtc\\fR(8), \\fBtc-netem\\fR(8)."
  echo ".PP"
  echo "The guides: $docdir (usage.md, output.md, design.md; doc/ in the source tree)."
} >"$include"
if [[ -z $cmd ]]; then
  help2man --no-info --no-discard-stderr --name="$name" --include="$include" \
    --version-option=--version "$txbatch" >"$out"
else
  help2man --no-info --no-discard-stderr --name="$name" --include="$include" \
    --help-option="$cmd --help" --version-option=--version "$txbatch" \
    | sed -e "s/^\\.TH TXBATCH /.TH TXBATCH-${cmd^^} /" -e "s/^txbatch \\\\- /txbatch-$cmd \\\\- /" \
    >"$out"
fi
