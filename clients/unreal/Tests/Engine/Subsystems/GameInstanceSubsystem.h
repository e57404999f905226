// Stand-in (see CoreMinimal.h): a subsystem that lives as long as the game instance.
#pragma once
#include "CoreMinimal.h"
class FSubsystemCollectionBase {};
class UGameInstanceSubsystem : public UObject {
public:
    virtual void Initialize(FSubsystemCollectionBase& Collection);
    virtual void Deinitialize();
};
