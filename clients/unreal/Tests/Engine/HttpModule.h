// Stand-in (see CoreMinimal.h).
#pragma once
#include "Interfaces/IHttpRequest.h"
class FHttpModule {
public:
    static FHttpModule& Get();
    TSharedRef<IHttpRequest, ESPMode::ThreadSafe> CreateRequest();
};
