// Project Settings > Plugins > npcmind: where the service is, who the game is, and the dialogue cortex.
#pragma once

#include "CoreMinimal.h"
#include "Engine/DeveloperSettings.h"
#include "NpcMindSettings.generated.h"

UCLASS(Config = Game, DefaultConfig, meta = (DisplayName = "npcmind"))
class NPCMIND_API UNpcMindSettings : public UDeveloperSettings
{
    GENERATED_BODY()

public:
    /** The npcmind service, e.g. http://127.0.0.1:8080. */
    UPROPERTY(Config, EditAnywhere, Category = "Service")
    FString ServiceUrl = TEXT("http://127.0.0.1:8080");

    /** The game's client id (the service counts and budgets by it). */
    UPROPERTY(Config, EditAnywhere, Category = "Service")
    FString ClientId = TEXT("unreal-game");

    /** A hosted service's API key (empty: a service of your own, no session). */
    UPROPERTY(Config, EditAnywhere, Category = "Service")
    FString HostedKey;

    /** The OpenAI-compatible server that runs dialogue inference on the game's side (Ollama, llama.cpp). */
    UPROPERTY(Config, EditAnywhere, Category = "Dialogue")
    FString CortexUrl = TEXT("http://127.0.0.1:11434/v1");

    UPROPERTY(Config, EditAnywhere, Category = "Dialogue")
    FString CortexModel = TEXT("local");
};
