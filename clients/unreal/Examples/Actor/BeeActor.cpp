#include "BeeActor.h"

#include "Engine/GameInstance.h"
#include "NpcMindSubsystem.h"

void ABeeActor::Tick(float DeltaSeconds)
{
    Super::Tick(DeltaSeconds);
    UNpcMindSubsystem* Mind = GetGameInstance()->GetSubsystem<UNpcMindSubsystem>();
    const TArray<FString> Legal = {TEXT("idle"), TEXT("wander"), TEXT("chase"), TEXT("flee")};
    // what the bee sees, in the manifest's fields; the subsystem sends it and asks the model when due
    Mind->TrackActor(this, TEXT("bee"), {{TEXT("hp_fraction"), Health}}, {{TEXT("sees_player"), bSeesPlayer}}, {}, Legal);
    FString Action;
    if (Mind->GetAction(this, Legal, Action))
    {
        Act(Action);  // the model's decision: legal now, of the current epoch, not expired
    }
    else
    {
        RunNativeAI();  // no decision (yet, or the service is away): the game's own AI, never a guess
    }
}
