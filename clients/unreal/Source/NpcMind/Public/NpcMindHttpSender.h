// The core's IHttpSender over Unreal's FHttpModule: its callbacks come on the game thread. A streamed decide answer
// is given to the scheduler when the response completes (its lines then all at once); the body's cap is checked on
// what FHttpModule read.
#pragma once

#include "CoreMinimal.h"
#include "NpcMindCore/Transport.h"

class NPCMIND_API FNpcMindHttpSender : public npcmind::IHttpSender
{
public:
    virtual void Send(const npcmind::HttpCall& Call, npcmind::HttpEvents Events) override;
    virtual bool Busy() const override { return InFlight > 0; }

private:
    int32 InFlight = 0;
};

/** UTF-8 std::string <-> FString, in one place. */
NPCMIND_API std::string NpcMindUtf8(const FString& Text);
NPCMIND_API FString NpcMindText(const std::string& Text);
