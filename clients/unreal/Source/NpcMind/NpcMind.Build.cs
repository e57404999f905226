// The Unreal module: a game-instance subsystem ticking one DecideClient a frame, the FHttpModule transport,
// Project Settings, Blueprint functions and the async dialogue-line node.
using UnrealBuildTool;

public class NpcMind : ModuleRules
{
    public NpcMind(ReadOnlyTargetRules Target) : base(Target)
    {
        PCHUsage = PCHUsageMode.UseExplicitOrSharedPCHs;
        CppStandard = CppStandardVersion.Cpp17;
        PublicDependencyModuleNames.AddRange(new string[] { "Core", "CoreUObject", "Engine", "DeveloperSettings", "NpcMindCore" });
        PrivateDependencyModuleNames.AddRange(new string[] { "HTTP" });
    }
}
