#!/usr/bin/env bash
# Builds the SDK (Runtime/ -> build/NpcMind.Runtime.dll) and its tests with Mono's mcs at C# 7.0 (what Unity and
# Godot 4 .NET compile), then runs the tests with NUnit 2.6's console: one command for a person or a test.
# The result is build/TestResult.xml (NUnit's format; tests/test_csharp.py reads it). Exit status: nunit-console's.
#   ./build.sh            build and test
#   ./build.sh build      build only
set -euo pipefail
cd "$(dirname "$0")"
NUNIT=${NUNIT_FRAMEWORK:-$(ls /usr/lib/cli/nunit.framework-2.6*/nunit.framework.dll 2>/dev/null | head -n1 || true)}
if [ -z "$NUNIT" ]; then
  echo "nunit.framework.dll not found: apt-get install libnunit-framework2.6.3-cil (Debian), or set NUNIT_FRAMEWORK" >&2
  exit 2
fi
mkdir -p build
MCS=(mcs -langversion:7 -nologo -warnaserror+ -nowarn:1591)
"${MCS[@]}" -target:library -out:build/NpcMind.Runtime.dll -doc:build/NpcMind.Runtime.xml \
  -r:System.Net.Http.dll Runtime/*.cs
"${MCS[@]}" -target:library -out:build/NpcMind.Tests.dll -r:build/NpcMind.Runtime.dll -r:"$NUNIT" \
  -r:System.Net.Http.dll Tests/*.cs
# the console game of the live test (tests/test_csharp.py)
"${MCS[@]}" -target:exe -out:build/NpcMindGame.exe -r:build/NpcMind.Runtime.dll -r:System.Net.Http.dll 'Examples~/Console/Game.cs'
cp "$NUNIT" build/
[ "${1:-}" = "build" ] && exit 0
cd build
exec nunit-console NpcMind.Tests.dll -nologo -noshadow -xml=TestResult.xml
