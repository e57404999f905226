// One npcmind client a game instance, ticked once a frame: Blueprint functions to track an actor with what it sees
// and may do, to get its decision (or none: run its native AI), and to tell events, reports, epochs and scenes.
#pragma once

#include <memory>

#include "CoreMinimal.h"
#include "Subsystems/GameInstanceSubsystem.h"
#include "Tickable.h"
#include "NpcMindSubsystem.generated.h"

namespace npcmind
{
class DecideClient;
class InMemoryNpcs;
}  // namespace npcmind
class FNpcMindHttpSender;
class AActor;

UCLASS()
class NPCMIND_API UNpcMindSubsystem : public UGameInstanceSubsystem, public FTickableGameObject
{
    GENERATED_BODY()

public:
    virtual void Initialize(FSubsystemCollectionBase& Collection) override;
    virtual void Deinitialize() override;

    // FTickableGameObject: the client's frame (what arrived goes to the scheduler, what is due is sent)
    virtual void Tick(float DeltaTime) override;
    virtual TStatId GetStatId() const override;
    virtual bool IsTickable() const override { return Client != nullptr; }

    /** Track an actor that decides: its type (a manifest type), what it observes, and its legal actions now. */
    UFUNCTION(BlueprintCallable, Category = "npcmind")
    void TrackActor(AActor* Actor, const FString& Type, const TMap<FString, float>& Numbers,
                    const TMap<FString, bool>& Flags, const TMap<FString, FString>& Texts,
                    const TArray<FString>& LegalActions);

    /** The actor's decision, checked against the actions legal now; false: run its native AI. */
    UFUNCTION(BlueprintCallable, Category = "npcmind")
    bool GetAction(AActor* Actor, const TArray<FString>& LegalNow, FString& Action);

    /** Something happened to the actor: it is asked again within the event window. */
    UFUNCTION(BlueprintCallable, Category = "npcmind")
    bool Event(AActor* Actor, const FString& Trigger);

    /** What became of the actor's AI decision: done, failed, interrupted or rejected. */
    UFUNCTION(BlueprintCallable, Category = "npcmind")
    bool Report(AActor* Actor, const FString& Outcome, const FString& Detail);

    /** The actor left (died, despawned). */
    UFUNCTION(BlueprintCallable, Category = "npcmind")
    void Untrack(AActor* Actor);

    /** The game's state was invalidated: decisions for the old epoch are dropped. */
    UFUNCTION(BlueprintCallable, Category = "npcmind")
    void SetEpoch(int32 Epoch);

    UFUNCTION(BlueprintPure, Category = "npcmind")
    int32 GetEpoch() const;

    /** A new level or map: the service resets its population. */
    UFUNCTION(BlueprintCallable, Category = "npcmind")
    void SetScene(const FString& Scene);

    /** A dialogue NPC the game knows (its memory is kept in memory; a game with its own saves gives its own). */
    UFUNCTION(BlueprintCallable, Category = "npcmind|Dialogue")
    bool RegisterNpc(const FString& NpcId, const FString& Persona);

    npcmind::InMemoryNpcs& Memory() { return *Npcs; }

private:
    std::unique_ptr<FNpcMindHttpSender> Http;
    std::unique_ptr<npcmind::DecideClient> Client;
    std::unique_ptr<npcmind::InMemoryNpcs> Npcs;
    double StartSeconds = 0;
};
