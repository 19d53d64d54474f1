#!/bin/sh
echo "bazel coverage is not supported in kiln's offline build" >&2
exit 1
