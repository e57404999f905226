// Stand-in (see CoreMinimal.h): an object the engine ticks once a frame.
#pragma once
#include "CoreMinimal.h"
class FTickableGameObject {
public:
    virtual ~FTickableGameObject() = default;
    virtual void Tick(float DeltaTime) = 0;
    virtual TStatId GetStatId() const = 0;
    virtual bool IsTickable() const { return true; }
};
