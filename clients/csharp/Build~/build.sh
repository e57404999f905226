#!/usr/bin/env bash
# Builds the SDK (Runtime/ -> NpcMind.Runtime.dll) and its tests with Mono's mcs at C# 7.0 (what Unity and Godot 4
# .NET compile), then runs the tests with NUnit 2.6's console: one command for a person or a test. It lives in
# Build~/ and writes to Build~/out/ (or $NPCMIND_CSHARP_OUT): Unity imports no folder whose name ends in ~, so
# neither this script nor its DLLs become assets of a game that adds the package (a build/ folder's DLLs would be
# imported as duplicate assemblies). The result is out/TestResult.xml (NUnit's format; tests/test_csharp.py reads
# it). Exit status: nunit-console's. The tests read their shared cases from Tests/Data~/, inside the package, so
# they run from a copy of this folder alone (a git-URL install).
#   Build~/build.sh            build and test
#   Build~/build.sh build      build only
#   Build~/build.sh metas      write the .meta file of every file and folder Unity imports that has none
#   Build~/build.sh data       copy the repository's shared cases (clients/conformance, docs/signature-vectors.json)
#                              into Tests/Data~/ (tests/test_csharp.py fails while the copy differs)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "data" ]; then
  rm -rf 'Tests/Data~' && mkdir -p 'Tests/Data~/conformance'
  (cd ../conformance && find . -name '*.json' -exec cp --parents {} '../csharp/Tests/Data~/conformance/' \;)
  cp ../../docs/signature-vectors.json 'Tests/Data~/'
  echo "copied the shared cases into Tests/Data~"
  exit 0
fi
if [ "${1:-}" = "metas" ]; then
  # Unity imports a package from a git URL read-only: every file and folder it sees needs its .meta, with a GUID
  # that never changes (made from the path). Unity skips hidden names and names ending in ~ (Samples~, Examples~).
  find . -mindepth 1 \( -name '.*' -o -name '*~' \) -prune -o ! -name '*.meta' -print | sort |
  while read -r path; do
    meta="$path.meta"
    [ -e "$meta" ] && continue
    guid=$(printf 'npcmind-csharp:%s' "${path#./}" | md5sum | cut -c1-32)
    if [ -d "$path" ]; then importer="folderAsset: yes
DefaultImporter:"
    else case "$path" in
      *.cs) importer="MonoImporter:
  serializedVersion: 2
  defaultReferences: []
  executionOrder: 0
  icon: {instanceID: 0}" ;;
      *.asmdef) importer="AssemblyDefinitionImporter:" ;;
      *.dll) importer="PluginImporter:
  serializedVersion: 2
  iconMap: {}
  executionOrder: {}
  defineConstraints: []
  isPreloaded: 0
  isOverridable: 0
  isExplicitlyReferenced: 1
  validateReferences: 1
  platformData:
  - first:
      Any: 
    second:
      enabled: 1
      settings: {}" ;;
      *.json|*.md) importer="TextScriptImporter:" ;;
      *) importer="DefaultImporter:" ;;
    esac; fi
    printf 'fileFormatVersion: 2\nguid: %s\n%s\n  externalObjects: {}\n  userData: \n  assetBundleName: \n  assetBundleVariant: \n' \
      "$guid" "$importer" > "$meta"
    echo "wrote $meta"
  done
  exit 0
fi
NUNIT=${NUNIT_FRAMEWORK:-$(ls /usr/lib/cli/nunit.framework-2.6*/nunit.framework.dll 2>/dev/null | head -n1 || true)}
if [ -z "$NUNIT" ]; then
  echo "nunit.framework.dll not found: apt-get install libnunit-framework2.6.3-cil (Debian), or set NUNIT_FRAMEWORK" >&2
  exit 2
fi
OUT=${NPCMIND_CSHARP_OUT:-Build~/out}
mkdir -p "$OUT"
export NPCMIND_CONFORMANCE=${NPCMIND_CONFORMANCE:-$PWD/Tests/Data~/conformance}
MCS=(mcs -langversion:7 -nologo -warnaserror+ -nowarn:1591)
BC=Runtime/Plugins/BouncyCastle.Crypto.dll  # Ed25519 (Runtime/Ed25519.cs): vendored, NOTICE.md
cp "$BC" "$OUT"/
"${MCS[@]}" -target:library -out:"$OUT"/NpcMind.Runtime.dll -doc:"$OUT"/NpcMind.Runtime.xml \
  -r:System.Net.Http.dll -r:System.Numerics.dll -r:"$BC" Runtime/*.cs
"${MCS[@]}" -target:library -out:"$OUT"/NpcMind.Tests.dll -r:"$OUT"/NpcMind.Runtime.dll -r:"$NUNIT" -r:"$BC" -r:System.Numerics.dll \
  -r:System.Net.Http.dll Tests/*.cs
# the console programs of the live tests (tests/test_csharp.py)
"${MCS[@]}" -target:exe -out:"$OUT"/NpcMindGame.exe -r:"$OUT"/NpcMind.Runtime.dll -r:System.Net.Http.dll 'Examples~/Console/Game.cs'
"${MCS[@]}" -target:exe -out:"$OUT"/NpcMindDialogue.exe -r:"$OUT"/NpcMind.Runtime.dll -r:System.Net.Http.dll 'Examples~/Console/Dialogue.cs'
"${MCS[@]}" -target:exe -out:"$OUT"/NpcMindProbe.exe -r:"$OUT"/NpcMind.Runtime.dll -r:System.Net.Http.dll 'Examples~/Console/Probe.cs'
# the tick bench (bench/tick_bench.py runs it beside Python's and TypeScript's)
"${MCS[@]}" -target:exe -out:"$OUT"/NpcMindTickBench.exe -r:"$OUT"/NpcMind.Runtime.dll 'Examples~/Bench/Tick.cs'
# the README's engine examples, against stand-ins of the engine types they touch: they compile, so they cannot rot
"${MCS[@]}" -target:library -out:"$OUT"/UnityEngine.dll 'Examples~/Engines/UnityEngine.cs'
# the Unity assembly (Unity/: UnityWebRequestSender, NpcMindRunner), the core staying engine-free
"${MCS[@]}" -target:library -out:"$OUT"/NpcMind.Unity.dll -r:"$OUT"/NpcMind.Runtime.dll -r:"$OUT"/UnityEngine.dll Unity/*.cs
"${MCS[@]}" -target:library -out:"$OUT"/Example.Unity.dll -r:"$OUT"/NpcMind.Runtime.dll -r:"$OUT"/UnityEngine.dll \
  -r:"$OUT"/NpcMind.Unity.dll 'Samples~/HelloNpc/BeeBrain.cs' 'Samples~/HelloNpc/Innkeeper.cs'
# the engine tests: the runner, the Unity sender and the sample bee against the stand-ins (Tests/Engines~, which Unity
# does not import), an assembly of their own beside NpcMind.Tests
"${MCS[@]}" -target:library -out:"$OUT"/NpcMind.EngineTests.dll -r:"$OUT"/NpcMind.Runtime.dll -r:"$OUT"/UnityEngine.dll \
  -r:"$OUT"/NpcMind.Unity.dll -r:"$OUT"/Example.Unity.dll -r:"$NUNIT" 'Tests/Engines~/EngineTests.cs'
"${MCS[@]}" -target:library -out:"$OUT"/Example.Godot.dll -r:"$OUT"/NpcMind.Runtime.dll \
  'Examples~/Godot/Bee.cs' 'Examples~/Engines/Godot.cs'
cp "$NUNIT" "$OUT"/
[ "${1:-}" = "build" ] && exit 0
cd "$OUT"
exec nunit-console NpcMind.Tests.dll NpcMind.EngineTests.dll -nologo -noshadow -xml=TestResult.xml
