// What a game sees of the SDK is its public surface alone (README: "The public surface"); the scheduler, the
// transport, the JSON reader and the signature checks are internal. Their tests, and the console programs that
// drive them from pytest (tests/test_csharp.py: the JSON reader and Ed25519 against Python's, the tick bench), are
// the only assemblies that see those internals. The main assembly is not strong-named, so the names suffice.

using System.Runtime.CompilerServices;

[assembly: InternalsVisibleTo("NpcMind.Tests")]           // Tests/ (NUnit; Unity's Test Runner builds the same name)
[assembly: InternalsVisibleTo("NpcMindDialogue")]         // Examples~/Console/Dialogue.cs: verify, read, numbers
[assembly: InternalsVisibleTo("NpcMindGame")]             // Examples~/Console/Game.cs: its JSON report line
[assembly: InternalsVisibleTo("NpcMindProbe")]            // Examples~/Console/Probe.cs: its JSON report line
[assembly: InternalsVisibleTo("NpcMindTickBench")]        // Examples~/Bench/Tick.cs: the scheduler alone
