// The async dialogue node: DialogueTurn driven over FHttpModule, one call at a time, on the game thread.
#include "NpcMindDialogueLine.h"

#include "Engine/GameInstance.h"
#include "Engine/World.h"
#include "NpcMindCore/Npc.h"
#include "NpcMindHttpSender.h"
#include "NpcMindSettings.h"
#include "NpcMindSubsystem.h"

namespace
{
FNpcMindHttpSender& Sender()
{
    static FNpcMindHttpSender Shared;
    return Shared;
}
}  // namespace

UNpcMindDialogueLine* UNpcMindDialogueLine::SayDialogueLine(UObject* WorldContext, const FString& NpcId,
                                                             const FString& Observation)
{
    UNpcMindDialogueLine* Node = NewObject<UNpcMindDialogueLine>();
    Node->Context = WorldContext;
    Node->NpcId = NpcId;
    Node->Observation = Observation;
    Node->RegisterWithGameInstance(WorldContext);
    return Node;
}

void UNpcMindDialogueLine::Activate()
{
    UWorld* World = Context ? Context->GetWorld() : nullptr;
    UGameInstance* Game = World ? World->GetGameInstance() : nullptr;
    UNpcMindSubsystem* Mind = Game ? Game->GetSubsystem<UNpcMindSubsystem>() : nullptr;
    if (!Mind)
    {
        OnFailed.Broadcast(TEXT("no npcmind subsystem: is the plugin enabled?"));
        SetReadyToDestroy();
        return;
    }
    const UNpcMindSettings* Settings = GetDefault<UNpcMindSettings>();
    Cortex = std::make_shared<npcmind::OpenAICortex>(NpcMindUtf8(Settings->CortexUrl), NpcMindUtf8(Settings->CortexModel));
    Turn = std::make_shared<npcmind::DialogueTurn>(NpcMindUtf8(Settings->ServiceUrl), NpcMindUtf8(NpcId),
                                                   NpcMindUtf8(Observation), Mind->Memory());
    Drive();
}

void UNpcMindDialogueLine::Drive()
{
    const auto Need = Turn->Next();
    if (Need == npcmind::DialogueTurn::Need::Done || Need == npcmind::DialogueTurn::Need::Failed)
    {
        Finish();
        return;
    }
    npcmind::HttpEvents Events;
    const bool bInfer = Need == npcmind::DialogueTurn::Need::Infer;
    Events.Done = [this, bInfer](int Status, const npcmind::Headers&, const std::string& Body, bool, npcmind::FailKind,
                                 const std::string& Error)
    {
        if (!bInfer)
        {
            Turn->Answered(Status, Body, Error);
        }
        else
        {
            std::string Text, Why;
            if (Cortex->Read(Status, Body, Error, Text, Why))
            {
                Turn->Inferred(Text);
            }
            else
            {
                Turn->InferenceFailed(Why);
            }
        }
        Drive();
    };
    Sender().Send(bInfer ? Cortex->Request(Turn->Prompt(), Turn->Constraints()) : Turn->Call(), Events);
}

void UNpcMindDialogueLine::Finish()
{
    if (Turn->Next() == npcmind::DialogueTurn::Need::Failed)
    {
        OnFailed.Broadcast(NpcMindText(Turn->Error()));
    }
    else
    {
        npcmind::NpcOutcome Outcome = Turn->Outcome();
        Turn->Apply(Outcome);  // verified through OpenSSL before the turn was done; an invalid line applies nothing
        OnLine.Broadcast(NpcMindText(Outcome.Dialogue), NpcMindText(Outcome.Action["type"].AsString()));
    }
    SetReadyToDestroy();
}
