// Stand-in (see CoreMinimal.h): the parts of Unreal's HTTP request the module uses.
#pragma once
#include "CoreMinimal.h"
class IHttpRequest;
class IHttpResponse;
using FHttpRequestPtr = TSharedPtr<IHttpRequest, ESPMode::ThreadSafe>;
using FHttpResponsePtr = TSharedPtr<IHttpResponse, ESPMode::ThreadSafe>;
class FHttpRequestCompleteDelegate {
public:
    template <typename F>
    void BindLambda(F&& f) { bound_ = std::forward<F>(f); }

private:
    std::function<void(FHttpRequestPtr, FHttpResponsePtr, bool)> bound_;
};
class IHttpRequest {
public:
    virtual ~IHttpRequest() = default;
    virtual void SetURL(const FString& Url) = 0;
    virtual void SetVerb(const FString& Verb) = 0;
    virtual void SetHeader(const FString& Name, const FString& Value) = 0;
    virtual void SetContent(const TArray<uint8>& Content) = 0;
    virtual void SetTimeout(float Seconds) = 0;
    virtual FHttpRequestCompleteDelegate& OnProcessRequestComplete() = 0;
    virtual bool ProcessRequest() = 0;
};
