// Stand-in (see CoreMinimal.h): the parts of Unreal's HTTP response the module uses.
#pragma once
#include "CoreMinimal.h"
class IHttpResponse {
public:
    virtual ~IHttpResponse() = default;
    virtual int32 GetResponseCode() const = 0;
    virtual const TArray<uint8>& GetContent() const = 0;
    virtual TArray<FString> GetAllHeaders() const = 0;
    virtual FString GetContentType() const = 0;
};
