// Stand-in (see CoreMinimal.h).
#pragma once
#include "CoreMinimal.h"
class AActor : public UObject {
public:
    FString GetName() const;
    FVector GetActorLocation() const;
};
