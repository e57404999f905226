#pragma once

#include "CoreMinimal.h"
#include "GameFramework/Actor.h"
#include "BeeActor.generated.h"

UCLASS()
class ABeeActor : public AActor
{
    GENERATED_BODY()

public:
    virtual void Tick(float DeltaSeconds) override;

    void Act(const FString& Action);  // the game's: play the action
    void RunNativeAI();               // the game's own AI (a behaviour tree)

    float Health = 1.0f;
    bool bSeesPlayer = false;
};
