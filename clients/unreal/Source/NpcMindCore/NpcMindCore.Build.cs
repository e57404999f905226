// The engine-agnostic core (C++17, no exceptions, no RTTI): the scheduler, the dialogue step machine, JSON through
// the vendored RapidJSON, Ed25519 and SHA-256 through Unreal's OpenSSL module.
using System.IO;
using UnrealBuildTool;

public class NpcMindCore : ModuleRules
{
    public NpcMindCore(ReadOnlyTargetRules Target) : base(Target)
    {
        PCHUsage = PCHUsageMode.NoPCHs;
        CppStandard = CppStandardVersion.Cpp17;
        bEnableExceptions = false;
        bUseRTTI = false;
        PublicDependencyModuleNames.AddRange(new string[] { "Core", "OpenSSL" });
        PrivateIncludePaths.Add(Path.Combine(PluginDirectory, "ThirdParty", "rapidjson", "include"));
    }
}
