// The Blueprint node "Say Dialogue Line": one turn of a dialogue NPC (the service drives the steps, the game's
// memory recalls, the cortex in Project Settings infers), its outcome verified through OpenSSL and then applied
// to the NPC's memory. OnLine gives the line and the action; OnFailed says why nothing was applied.
#pragma once

#include <memory>

#include "CoreMinimal.h"
#include "Kismet/BlueprintAsyncActionBase.h"
#include "NpcMindDialogueLine.generated.h"

namespace npcmind
{
class DialogueTurn;
struct OpenAICortex;
}  // namespace npcmind

DECLARE_DYNAMIC_MULTICAST_DELEGATE_TwoParams(FNpcMindLine, const FString&, Dialogue, const FString&, ActionType);
DECLARE_DYNAMIC_MULTICAST_DELEGATE_OneParam(FNpcMindLineFailed, const FString&, Error);

UCLASS()
class NPCMIND_API UNpcMindDialogueLine : public UBlueprintAsyncActionBase
{
    GENERATED_BODY()

public:
    UPROPERTY(BlueprintAssignable)
    FNpcMindLine OnLine;

    UPROPERTY(BlueprintAssignable)
    FNpcMindLineFailed OnFailed;

    /** One line of a registered NPC for what the player said or did. */
    UFUNCTION(BlueprintCallable, Category = "npcmind|Dialogue",
              meta = (BlueprintInternalUseOnly = "true", WorldContext = "WorldContext"))
    static UNpcMindDialogueLine* SayDialogueLine(UObject* WorldContext, const FString& NpcId, const FString& Observation);

    virtual void Activate() override;

private:
    void Drive();
    void Finish();

    UPROPERTY()
    UObject* Context = nullptr;
    FString NpcId;
    FString Observation;
    std::shared_ptr<npcmind::DialogueTurn> Turn;
    std::shared_ptr<npcmind::OpenAICortex> Cortex;
};
