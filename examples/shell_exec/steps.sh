#!/usr/bin/env bash
# One script per step keeps the example short; each is an ordinary shell command.
# Whimbrel passes WHIMBREL_ACTIVITY_EXEC_ID, WHIMBREL_ACTIVITY_NAME,
# WHIMBREL_WORKFLOW_EXEC_ID and WHIMBREL_WORKFLOW_NAME in the environment.
set -euo pipefail
work="${BACKUP_DIR:-/tmp/whimbrel-backup}/${WHIMBREL_WORKFLOW_EXEC_ID}"
mkdir -p "$work"
case "$1" in
  dump)     seq 1 200000 > "$work/db.sql"; echo "dumped $(wc -l < "$work/db.sql") rows" ;;
  compress) gzip -f "$work/db.sql"; ls -l "$work/db.sql.gz" ;;
  upload)   cp "$work/db.sql.gz" "$work/uploaded.sql.gz"   # aws s3 cp … in real life
            sleep "${UPLOAD_SECONDS:-2}" ;;
  verify)   cmp "$work/db.sql.gz" "$work/uploaded.sql.gz" \
              || { echo "upload differs from the dump" >&2; exit 3; } ;;
  *)        echo "unknown step $1" >&2; exit 64 ;;
esac
