// Stand-in (see CoreMinimal.h).
#pragma once
class FDefaultModuleImpl {};
#define IMPLEMENT_MODULE(Impl, Name) Impl* NpcMindStandInModule_##Name();
