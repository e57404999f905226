// Stand-in (see CoreMinimal.h).
#pragma once
#include "CoreMinimal.h"
class UGameInstance;
class AActor : public UObject {
public:
    virtual void Tick(float DeltaSeconds);
    UGameInstance* GetGameInstance() const;
    FString GetName() const;
    FVector GetActorLocation() const;
};
