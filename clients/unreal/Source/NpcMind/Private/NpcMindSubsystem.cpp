// The subsystem: the DecideClient of the game instance, and its Blueprint functions.
#include "NpcMindSubsystem.h"

#include "GameFramework/Actor.h"
#include "HAL/PlatformTime.h"
#include "Modules/ModuleManager.h"
#include "NpcMindCore/DecideClient.h"
#include "NpcMindCore/Npc.h"
#include "NpcMindHttpSender.h"
#include "NpcMindSettings.h"

IMPLEMENT_MODULE(FDefaultModuleImpl, NpcMind)

DEFINE_LOG_CATEGORY_STATIC(LogNpcMind, Log, All);

namespace
{
std::vector<std::string> Strings(const TArray<FString>& Items)
{
    std::vector<std::string> Out;
    for (const FString& Item : Items)
    {
        Out.push_back(NpcMindUtf8(Item));
    }
    return Out;
}

std::string IdOf(const AActor* Actor)
{
    return Actor ? NpcMindUtf8(Actor->GetName()) : std::string();
}
}  // namespace

void UNpcMindSubsystem::Initialize(FSubsystemCollectionBase& Collection)
{
    Super::Initialize(Collection);
    const UNpcMindSettings* Settings = GetDefault<UNpcMindSettings>();
    npcmind::SchedulerOptions Options;
    Options.ClientId = NpcMindUtf8(Settings->ClientId);
    Options.ApiKey = NpcMindUtf8(Settings->HostedKey);
    Options.Log = [](const std::string& Message) { UE_LOG(LogNpcMind, Warning, TEXT("%s"), *NpcMindText(Message)); };
    StartSeconds = FPlatformTime::Seconds();
    Http = std::make_unique<FNpcMindHttpSender>();
    Npcs = std::make_unique<npcmind::InMemoryNpcs>();
    const double Start = StartSeconds;
    Client = std::make_unique<npcmind::DecideClient>(NpcMindUtf8(Settings->ServiceUrl), Options, *Http,
                                                     [Start] { return (FPlatformTime::Seconds() - Start) * 1000.0; });
}

void UNpcMindSubsystem::Deinitialize()
{
    Client.reset();
    Super::Deinitialize();
}

void UNpcMindSubsystem::Tick(float DeltaTime)
{
    (void)DeltaTime;
    Client->Tick();
}

TStatId UNpcMindSubsystem::GetStatId() const
{
    RETURN_QUICK_DECLARE_CYCLE_STAT(UNpcMindSubsystem, STATGROUP_Tickables);
}

void UNpcMindSubsystem::TrackActor(AActor* Actor, const FString& Type, const TMap<FString, float>& Numbers,
                                   const TMap<FString, bool>& Flags, const TMap<FString, FString>& Texts,
                                   const TArray<FString>& LegalActions)
{
    if (!Actor || !Client)
    {
        return;
    }
    npcmind::Value Observation = npcmind::Value::MakeObject();
    for (const auto& Field : Numbers)
    {
        Observation.Set(NpcMindUtf8(Field.Key), static_cast<double>(Field.Value));
    }
    for (const auto& Field : Flags)
    {
        Observation.Set(NpcMindUtf8(Field.Key), Field.Value);
    }
    for (const auto& Field : Texts)
    {
        Observation.Set(NpcMindUtf8(Field.Key), NpcMindUtf8(Field.Value));
    }
    const FVector Where = Actor->GetActorLocation();
    npcmind::TrackOptions Extra;
    Extra.Position = std::vector<double>{Where.X, Where.Y, Where.Z};
    Client->Track(IdOf(Actor), NpcMindUtf8(Type), Observation, Strings(LegalActions), Extra);
}

bool UNpcMindSubsystem::GetAction(AActor* Actor, const TArray<FString>& LegalNow, FString& Action)
{
    if (!Actor || !Client)
    {
        return false;
    }
    const std::vector<std::string> Legal = Strings(LegalNow);
    const auto Choice = Client->Action(IdOf(Actor), LegalNow.Num() > 0 ? &Legal : nullptr);
    if (!Choice)
    {
        return false;
    }
    Action = NpcMindText(Choice->Action);
    return true;
}

bool UNpcMindSubsystem::Event(AActor* Actor, const FString& Trigger)
{
    return Actor && Client && Client->Event(IdOf(Actor), NpcMindUtf8(Trigger));
}

bool UNpcMindSubsystem::Report(AActor* Actor, const FString& Outcome, const FString& Detail)
{
    return Actor && Client && Client->Report(IdOf(Actor), NpcMindUtf8(Outcome), NpcMindUtf8(Detail));
}

void UNpcMindSubsystem::Untrack(AActor* Actor)
{
    if (Actor && Client)
    {
        Client->Untrack(IdOf(Actor));
    }
}

void UNpcMindSubsystem::SetEpoch(int32 Epoch)
{
    if (Client)
    {
        Client->SetEpoch(Epoch);
    }
}

int32 UNpcMindSubsystem::GetEpoch() const
{
    return Client ? Client->Epoch() : 0;
}

void UNpcMindSubsystem::SetScene(const FString& Scene)
{
    if (Client)
    {
        Client->SetScene(NpcMindUtf8(Scene));
    }
}

bool UNpcMindSubsystem::RegisterNpc(const FString& NpcId, const FString& Persona)
{
    return Npcs && Npcs->Register(NpcMindUtf8(NpcId), NpcMindUtf8(Persona));
}
