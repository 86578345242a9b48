"""A top-level runner script, copied into each run directory by variations.py: runs a shard's
function in a `python -X faulthandler` child and, when the child fails, raises Zephyr's
exit-code RuntimeError (its text is argv[1]). The child's stderr goes to stderr; stdout gets
JSON: the parent's traceback and its one-line form."""

import json
import subprocess
import sys
import traceback

CHILD = "import sys; sys.path.insert(0, sys.argv[1]); import varlib; getattr(varlib, sys.argv[2])(*map(int, sys.argv[3:]))"


def run_shard(error_format, shard, entry, args):
    here = sys.path[0]
    proc = subprocess.run([sys.executable, "-X", "faulthandler", "-c", CHILD, here, entry, *args],
                          capture_output=True, text=True)
    sys.stderr.write(proc.stderr)  # the worker's stderr: the faulthandler dump, if any
    if proc.returncode != 0:
        raise RuntimeError(error_format.format(shard=shard, code=proc.returncode))
    return proc


def main():
    error_format, shard, entry, *args = sys.argv[1:]
    try:
        run_shard(error_format, int(shard), entry, args)
    except RuntimeError as exc:
        print(json.dumps({"traceback": traceback.format_exc(), "line": f"RuntimeError: {exc}"}))
    else:
        raise SystemExit(f"{entry} did not fail")


if __name__ == "__main__":
    main()
