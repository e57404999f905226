// FHttpModule as the core's transport.
#include "NpcMindHttpSender.h"

#include "HttpModule.h"
#include "Interfaces/IHttpRequest.h"
#include "Interfaces/IHttpResponse.h"
#include "NpcMindCore/Limits.h"

std::string NpcMindUtf8(const FString& Text)
{
    return std::string(TCHAR_TO_UTF8(*Text));
}

FString NpcMindText(const std::string& Text)
{
    return FString(UTF8_TO_TCHAR(Text.c_str()));
}

void FNpcMindHttpSender::Send(const npcmind::HttpCall& Call, npcmind::HttpEvents Events)
{
    TSharedRef<IHttpRequest, ESPMode::ThreadSafe> Request = FHttpModule::Get().CreateRequest();
    Request->SetURL(NpcMindText(Call.Url));
    Request->SetVerb(NpcMindText(Call.Method));
    for (const auto& Header : Call.RequestHeaders)
    {
        Request->SetHeader(NpcMindText(Header.first), NpcMindText(Header.second));
    }
    if (Call.Stream)
    {
        Request->SetHeader(TEXT("Accept"), TEXT("application/x-ndjson"));
    }
    if (!Call.Body.empty())
    {
        TArray<uint8> Body;
        Body.Append(reinterpret_cast<const uint8*>(Call.Body.data()), static_cast<int32>(Call.Body.size()));
        Request->SetContent(Body);
    }
    Request->SetTimeout(static_cast<float>(Call.TimeoutMs / 1000.0));
    const bool bStream = Call.Stream;
    const size_t MaxBytes = Call.MaxBytes;
    const std::string Where = Call.Method + " " + Call.Url;
    InFlight++;
    Request->OnProcessRequestComplete().BindLambda(
        [this, Events, bStream, MaxBytes, Where](FHttpRequestPtr, FHttpResponsePtr Response, bool bConnected)
        {
            InFlight--;
            if (!bConnected || !Response.IsValid())
            {
                Events.Done(0, {}, "", false, npcmind::FailKind::Unreachable, "no answer (the connection failed or timed out)");
                return;
            }
            const int Status = Response->GetResponseCode();
            const TArray<uint8>& Content = Response->GetContent();
            std::string Body(reinterpret_cast<const char*>(Content.GetData()), static_cast<size_t>(Content.Num()));
            npcmind::Headers Headers;
            for (const FString& Line : Response->GetAllHeaders())
            {
                FString Name, Value;
                if (Line.Split(TEXT(":"), &Name, &Value))
                {
                    Headers.emplace_back(NpcMindUtf8(Name.ToLower()), NpcMindUtf8(Value.TrimStartAndEnd()));
                }
            }
            const bool bNdjson = Response->GetContentType().StartsWith(TEXT("application/x-ndjson"));
            const size_t Cap = bStream && Status == 200 && bNdjson ? npcmind::Limits::MaxStreamBytes
                                                                    : npcmind::Limits::For(Status, MaxBytes);
            if (Body.size() > Cap)
            {
                Events.Done(0, Headers, "", false, npcmind::FailKind::TooLarge,
                            npcmind::Limits::TooLarge(Where, Cap, "Limits"));
                return;
            }
            if (bStream && Status == 200 && bNdjson)
            {
                Events.Chunk(Body);  // the lines, read when the response completed
                Events.Done(Status, Headers, "", true, npcmind::FailKind::Unreachable, "");
                return;
            }
            Events.Done(Status, Headers, Body, false, npcmind::FailKind::Unreachable, "");
        });
    Request->ProcessRequest();
}
